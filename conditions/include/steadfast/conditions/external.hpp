// Adapters for outside event sources: an external callback that reports a
// boolean state (a service-discovery watch, a membership library, a signal).
#pragma once

#include <steadfast/conditions/condition.hpp>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/signal_set.hpp>

#include <functional>
#include <initializer_list>

namespace steadfast {

/// A condition fed by an outside source. `connect` receives a push function
/// (callable from any thread, any number of times, also after the condition is
/// gone) and returns a disconnect function, called when the condition dies.
class external_condition : public condition {
public:
    using push_fn = std::function<void(bool)>;
    using connect_fn = std::function<std::function<void()>(push_fn)>;

    external_condition(executor_type ex, std::string name, bool initial)
        : condition(std::move(ex), std::move(name), initial) {}
    ~external_condition() override {
        if (disconnect_) disconnect_();
    }

    /// Connects the source; make_external() calls it.
    void connect(const connect_fn& c) {
        disconnect_ = c([weak = weak_from_this(), ex = get_executor()](bool v) {
            boost::asio::dispatch(ex, [weak, v] {
                if (auto self = std::static_pointer_cast<external_condition>(weak.lock())) self->assign(v);
            });
        });
    }

private:
    std::function<void()> disconnect_;
};

inline std::shared_ptr<external_condition> make_external(condition::executor_type ex, std::string name, bool initial,
                                                         const external_condition::connect_fn& connect) {
    auto c = std::make_shared<external_condition>(std::move(ex), std::move(name), initial);
    if (connect) c->connect(connect);
    return c;
}

/// Ready-made: "shutdown-requested", true once one of `signals` arrives (or
/// request() is called). Owns its signal_set; thread-safe request().
class shutdown_condition : public condition {
public:
    shutdown_condition(executor_type ex, std::initializer_list<int> signals)
        : condition(ex, "shutdown-requested", false), signals_(ex) {
        for (int s : signals) signals_.add(s);
    }
    void start() {
        signals_.async_wait([weak = weak_from_this()](error_code ec, int sig) {
            if (ec) return;
            if (auto self = std::static_pointer_cast<shutdown_condition>(weak.lock())) {
                self->signal_ = sig;
                self->assign(true);
            }
        });
    }
    /// The signal that requested the shutdown (0: none, or request()).
    int signal_number() const noexcept { return signal_; }
    /// Stops catching the signals, so that their default action returns: for
    /// the last part of a shutdown, where a second Ctrl-C should end the process.
    void release_signals() {
        error_code ignored;
        signals_.clear(ignored);
    }
    void request() {
        boost::asio::dispatch(get_executor(),
                              [self = std::static_pointer_cast<shutdown_condition>(shared_from_this())] {
                                  self->assign(true);
                                  self->signals_.cancel();
                              });
    }

private:
    boost::asio::signal_set signals_;
    int signal_ = 0;  // on the condition's executor
};

inline std::shared_ptr<shutdown_condition> make_shutdown_requested(condition::executor_type ex,
                                                                   std::initializer_list<int> signals = {}) {
    auto c = std::make_shared<shutdown_condition>(std::move(ex), signals);
    c->start();
    return c;
}

}  // namespace steadfast
