// condition: a named boolean state with its current value and an awaitable
// "wait until it becomes true / false", woken by changes, never polled.
//
// A condition belongs to one executor (a strand on a multi-threaded
// io_context). value() may be read from any thread; waits, subscriptions and
// changes happen on that executor. Conditions are shared: create them with
// std::make_shared (or the make_* functions) and pass condition_ptr around.
// Each one is a steadfast::watchable, so retry policies can stop on it or be
// gated by it (retry_policy::with_stop_when / with_attempt_when).
#pragma once

#include <steadfast/engine/error.hpp>
#include <steadfast/engine/watchable.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <utility>

namespace steadfast {

namespace detail {
class condition_service;
}

class condition : public watchable, public std::enable_shared_from_this<condition> {
public:
    using executor_type = boost::asio::any_io_executor;

    condition(executor_type ex, std::string name, bool initial);
    ~condition() override;

    bool value() const override { return value_.load(std::memory_order_acquire); }
    const executor_type& get_executor() const noexcept { return ex_; }
    /// Waiters not yet woken.
    std::size_t waiter_count() const noexcept { return waiter_count_; }

    /// Waits until value() == `want` (completes at once, through the executor,
    /// if it already is).
    ///
    /// Completion signature: void(error_code); operation_aborted when cancelled.
    /// Executor: the handler's associated executor, else the condition's.
    /// Cancellation: terminal, partial and total (the wait is simply dropped).
    /// Call on the condition's executor. Many waiters are cheap: one small
    /// allocation each, O(1) to add and remove.
    /// The operation holds a reference to the condition from this call on, so
    /// a deferred wait launched later is safe (the condition must be owned by
    /// a std::shared_ptr, as make_flag and the other make_* functions do).
    template <class CompletionToken = boost::asio::default_completion_token_t<executor_type>>
    auto async_wait_until(bool want, CompletionToken&& token = {}) {
        // The reference travels as an initiation argument, not as a capture:
        // g++ 12 miscompiles non-trivial captures of an initiation that
        // use_awaitable moves into its by-value coroutine parameter.
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(initiate_wait{}, token,
                                                                              shared_from_this(), want);
    }

protected:
    /// Whether the execution context is still there (not shut down): work may
    /// still be handed to the executor.
    bool context_alive() const noexcept { return service_.load() != nullptr; }

    /// Sets the value; call on the condition's executor. Notifies on a change.
    void assign(bool v) {
        if (value_.exchange(v, std::memory_order_acq_rel) == v) return;
        // A woken waiter may drop the last reference to this condition.
        auto guard = weak_from_this().lock();
        notify(v);
    }

private:
    friend class detail::condition_service;

    struct initiate_wait {
        template <class Handler>
        void operator()(Handler&& handler, const std::shared_ptr<condition>& self, bool want) const {
            self->start_wait(want, std::forward<Handler>(handler));
        }
    };

    // Pending waits form an intrusive list, so that shutting the execution
    // context down can destroy them (and the coroutines they would resume).
    struct waiter_base {
        condition* owner = nullptr;
        waiter_base* prev = nullptr;
        waiter_base* next = nullptr;
        subscription sub;
        virtual void destroy() noexcept = 0;  // drops the handler without calling it
        virtual ~waiter_base() = default;
    };

    template <class Handler>
    struct waiter final : waiter_base {
        std::shared_ptr<condition> keep;  // a condition lives while someone waits on it
        bool want;
        Handler handler;
        // A pending wait is outstanding work, like any Asio operation: run()
        // does not return while a coroutine waits for a flag another thread sets.
        boost::asio::executor_work_guard<executor_type> work;

        waiter(std::shared_ptr<condition> k, bool w, Handler h)
            : keep(std::move(k)), want(w), handler(std::move(h)), work(keep->ex_) {}

        void complete(error_code ec) {
            auto slot = boost::asio::get_associated_cancellation_slot(handler);
            if (slot.is_connected()) slot.clear();
            owner->unlink(this);
            auto ex = owner->ex_;
            auto h = std::move(handler);
            auto k = std::move(keep);
            delete this;
            boost::asio::post(ex, boost::asio::append(std::move(h), ec));
        }
        void destroy() noexcept override {
            auto slot = boost::asio::get_associated_cancellation_slot(handler);
            if (slot.is_connected()) slot.clear();
            owner->unlink(this);
            delete this;
        }
    };

    template <class Handler>
    void start_wait(bool want, Handler handler) {
        if (value() == want) {
            boost::asio::post(ex_, boost::asio::append(std::move(handler), error_code{}));
            return;
        }
        auto* w = new waiter<Handler>(shared_from_this(), want, std::move(handler));
        link(w);
        subscribe(w->sub, [w](bool v) {
            if (v == w->want) w->complete({});
        });
        auto slot = boost::asio::get_associated_cancellation_slot(w->handler);
        if (slot.is_connected())
            slot.assign([w](boost::asio::cancellation_type) { w->complete(boost::asio::error::operation_aborted); });
    }

    void link(waiter_base* w) noexcept;
    void unlink(waiter_base* w) noexcept;
    void shutdown() noexcept;  // from the service

    executor_type ex_;
    std::atomic<bool> value_;
    waiter_base* waiters_ = nullptr;
    std::size_t waiter_count_ = 0;
    std::atomic<detail::condition_service*> service_{nullptr};  // null once the context shut down
    condition* svc_prev_ = nullptr;
    condition* svc_next_ = nullptr;
};

using condition_ptr = std::shared_ptr<condition>;

}  // namespace steadfast
