// probe_condition: an asynchronous check run periodically, publishing
// online/offline transitions with hysteresis: N failures in a row to go
// offline, one success to come back. While failing it probes on its own
// backoff (steadfast::backoff), so a dead peer is not hammered but a peer that
// comes back is seen within one backoff step.
//
// The check is any callable returning asio::awaitable<bool> (true = healthy);
// a check that throws or overruns `check_timeout` counts as a failure.
// The secondary's HTTP health probe (steadfast::transport) plugs in here.
#pragma once

#include <steadfast/conditions/condition.hpp>
#include <steadfast/engine/backoff.hpp>
#include <steadfast/engine/policy.hpp>
#include <steadfast/engine/retry.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <utility>

namespace steadfast {

struct probe_options {
    std::chrono::nanoseconds interval = std::chrono::seconds(1);  // between checks while online
    backoff failing_backoff = backoff::exponential(std::chrono::milliseconds(250), 2.0, std::chrono::seconds(2));
    std::chrono::nanoseconds check_timeout = std::chrono::seconds(2);
    std::uint32_t failures_to_offline = 3;
    bool initially_online = false;  // unknown counts as offline until a check passes
};

template <class Timer = boost::asio::steady_timer>
class probe_condition : public condition {
public:
    using check_fn = std::function<boost::asio::awaitable<bool>()>;

    probe_condition(executor_type ex, std::string name, check_fn check, probe_options o)
        : condition(ex, std::move(name), o.initially_online), check_(std::move(check)), opts_(std::move(o)) {
        if (!check_) throw std::invalid_argument("steadfast::probe_condition: needs a check function");
        if (opts_.interval.count() <= 0)
            throw std::invalid_argument("steadfast::probe_condition: interval must be positive");
        if (opts_.check_timeout.count() <= 0)
            throw std::invalid_argument("steadfast::probe_condition: check_timeout must be positive");
        if (opts_.failures_to_offline == 0)
            throw std::invalid_argument("steadfast::probe_condition: failures_to_offline must be at least 1");
    }

    /// Stops probing: a probe nobody holds any more does not go on checking.
    ~probe_condition() override { stop(); }

    /// Starts probing (the first check runs at once). Call on the executor.
    /// Probing holds the probe only during a check: once its last owner lets
    /// go, it ends (at once when waiting, or after the check in flight).
    void start() {
        if (running_.exchange(true)) return;
        const auto run = ++runs_;
        // The signal is shared with the loop: the probe may be destroyed first.
        stop_ = std::make_shared<boost::asio::cancellation_signal>();
        boost::asio::co_spawn(
            get_executor(), loop(std::static_pointer_cast<probe_condition>(shared_from_this()), stop_, run),
            boost::asio::bind_cancellation_slot(stop_->slot(), [keep = stop_](std::exception_ptr) {}));
    }
    /// Stops probing; the value stays as it was. Safe from any thread (the
    /// stop is carried out on the executor) and after the context shut down.
    /// start() may follow at once: the old loop ends without touching the new.
    void stop() {
        // First: the loop running now is no longer the current one (a start()
        // between the two lines then sees it running and does nothing).
        ++runs_;
        if (!running_.exchange(false)) return;
        auto s = std::move(stop_);
        if (!s || !context_alive()) return;
        // Posted, never run inline: a loop whose start is still queued runs
        // (and turns throw_if_cancelled off) before this emission.
        boost::asio::post(get_executor(), [s] { s->emit(boost::asio::cancellation_type::terminal); });
    }

    /// Checks at once when it is waiting between checks (its owner saw the
    /// peer fail meanwhile, say): that wait is cut short, once; a check in
    /// flight is not repeated, and nothing happens while stopped. Call on the
    /// executor.
    void check_soon() {
        if (waiting_ && !soon_) {
            soon_ = true;
            waiting_->cancel();
        }
    }

    std::uint64_t checks() const noexcept { return checks_; }
    std::uint32_t consecutive_failures() const noexcept { return failures_; }

private:
    static boost::asio::awaitable<void> loop(std::shared_ptr<probe_condition> strong,
                                             std::shared_ptr<boost::asio::cancellation_signal> own, std::uint64_t run) {
        namespace asio = boost::asio;
        // The loop ends on its own stop (stopped(), below), never by a throw:
        // a loop stopped before it ever suspended (its last owner let go
        // before the first check) would otherwise throw from co_spawn's
        // closing post, outside any handler: std::terminate.
        co_await asio::this_coro::throw_if_cancelled(false);
        // Between checks only a weak reference: the probe's owners decide how long it lives.
        const std::weak_ptr<probe_condition> weak = strong;
        // One attempt with a timeout, through the engine: the check is cancelled
        // when it overruns, and a throw is a failure like any other.
        const auto once =
            retry_policy{}.with_stop(stop::max_attempts(1)).with_attempt_timeout(strong->opts_.check_timeout);
        strong.reset();
        Timer timer(co_await asio::this_coro::executor);
        nanoseconds previous{};
        const auto cs = co_await asio::this_coro::cancellation_state;
        auto stopped = [&cs] { return cs.cancelled() != asio::cancellation_type::none; };
        while (!stopped()) {
            auto self = weak.lock();
            if (!self) co_return;
            // Stopped, or stopped and started again, its emission still on its
            // way: no new check (the new loop makes its own).
            // (running_ too: a stop() from another thread racing a start()
            // may count its run before that start() counts its own.)
            if (self->runs_.load() != run || !self->running_.load()) break;
            auto r = co_await steadfast::retry<Timer>(once, [&self](const attempt_context&) { return self->check_(); });
            ++self->checks_;
            // Only the probe's own stop ends it: a check that failed with
            // operation_aborted (its own I/O cancelled) is a failed check.
            if (stopped() || self->runs_.load() != run) break;
            const bool healthy = r.ok() && r.value();
            nanoseconds delay = self->opts_.interval;
            if (healthy) {
                self->failures_ = 0;
                self->assign(true);
            } else {
                ++self->failures_;
                if (self->failures_ >= self->opts_.failures_to_offline) self->assign(false);
                delay =
                    self->opts_.failing_backoff.delay(self->failures_, previous, [&self] { return self->random_(); });
                previous = delay;
            }
            timer.expires_after(std::chrono::duration_cast<typename Timer::duration>(delay));
            self->waiting_ = &timer;
            self.reset();  // the last owner may let go while this waits: ~probe_condition stops the wait
            if (weak.expired()) co_return;
            boost::system::error_code ec;
            bool soon = false;
            {
                // The probe forgets this wait however it ends (the frame may
                // be destroyed with its context, the probe living on).
                const forget_wait forget{weak, &timer};
                auto [e] = co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
                ec = e;
                if (auto s = weak.lock(); s && s->waiting_ == &timer) soon = std::exchange(s->soon_, false);
            }
            if (ec && (!soon || stopped())) break;  // stopped; a wait cut short by check_soon() goes on
        }
        // Ended by itself (not by stop()), and not replaced by a newer loop: no longer running.
        if (auto self = weak.lock(); self && self->stop_ == own) {
            self->stop_.reset();
            self->running_ = false;
        }
    }

    // (Only its own: a loop stopped and replaced by start() may end its
    // wait after the new loop began one.)
    struct forget_wait {
        std::weak_ptr<probe_condition> probe;
        Timer* timer;
        ~forget_wait() {
            if (auto p = probe.lock(); p && p->waiting_ == timer) {
                p->waiting_ = nullptr;
                p->soon_ = false;
            }
        }
    };

    check_fn check_;
    probe_options opts_;
    std::shared_ptr<boost::asio::cancellation_signal> stop_;
    std::atomic<bool> running_{false};
    std::atomic<std::uint64_t> runs_{0};  // each start() and stop(): a loop goes on while it is its run
    std::uint64_t checks_ = 0;
    Timer* waiting_ = nullptr;  // the wait between checks, while it runs (the loop's; on the executor)
    bool soon_ = false;         // check_soon() cut the wait short
    std::uint32_t failures_ = 0;
    std::mt19937_64 random_{std::random_device{}()};  // for a jittered failing backoff
};

template <class Timer = boost::asio::steady_timer>
std::shared_ptr<probe_condition<Timer>> make_probe(condition::executor_type ex, std::string name,
                                                   typename probe_condition<Timer>::check_fn check,
                                                   probe_options o = {}) {
    auto p = std::make_shared<probe_condition<Timer>>(std::move(ex), std::move(name), std::move(check), std::move(o));
    p->start();
    return p;
}

}  // namespace steadfast
