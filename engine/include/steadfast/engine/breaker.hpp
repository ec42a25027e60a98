// circuit_breaker: one breaker shared by every operation that calls a
// dependency, so that a dependency that keeps failing is left alone for a
// while instead of being called (and retried) by each of them.
//
//   auto breaker = std::make_shared<steadfast::circuit_breaker>(opts);
//   auto policy = steadfast::retry_policy{}.with_breaker(breaker);
//   // a call the breaker rejects ends with stop_reason::circuit_open, and no
//   // attempt; to wait for the break to end instead:
//   policy = policy.with_attempt_when(breaker->closed(executor));
//
// The decisions are detail::breaker_fsm's (resilience4j's windows and
// thresholds, Polly's break-duration generator; breaker_options.hpp); this
// class adds a lock (any thread may use it), a clock, the transition hook,
// counters for metrics, and closed(): the state as a condition.
//
// A call counts only in the state it was permitted in: an outcome that
// arrives after the breaker changed state (a call let through while closed
// that ends once it is open, or half-open's trial that ends after a reset)
// is not counted, and its permit is not given back to the new state.
#pragma once

#include <steadfast/engine/breaker_options.hpp>
#include <steadfast/engine/classify.hpp>
#include <steadfast/engine/detail/breaker_fsm.hpp>
#include <steadfast/engine/detail/timed_condition.hpp>
#include <steadfast/engine/watchable.hpp>

#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace steadfast {

class circuit_breaker : public std::enable_shared_from_this<circuit_breaker> {
public:
    /// The time, as nanoseconds since any fixed origin (tests pass
    /// manual_clock's). Empty: std::chrono::steady_clock.
    using clock_function = std::function<nanoseconds()>;

    /// Throws std::invalid_argument naming an option out of range.
    explicit circuit_breaker(breaker_options o = {}, clock_function now = {});
    circuit_breaker(const circuit_breaker&) = delete;
    circuit_breaker& operator=(const circuit_breaker&) = delete;

    /// A call's right to run, from try_acquire(): false when rejected. Tell
    /// it how the call went (success(), failure(), or record() with the
    /// retry's classification); one that is destroyed untold gives its
    /// permit back uncounted (a cancelled call). How long the call took is
    /// measured from try_acquire() on the breaker's clock (for slow calls):
    /// without a clock of the caller's, the system's coarse monotonic clock
    /// (CLOCK_MONOTONIC_COARSE, about a fifth of steady_clock's cost) when
    /// its resolution is at most 1/100 of slow_call (4 ms here, against the
    /// default 60 s), steady_clock otherwise. Breaks are timed on
    /// steady_clock either way.
    class permit {
    public:
        permit() = default;
        permit(permit&& o) noexcept : b_(std::move(o.b_)), generation_(o.generation_), at_(o.at_) {}
        permit& operator=(permit&& o) noexcept;
        ~permit() { release(); }
        explicit operator bool() const noexcept { return b_ != nullptr; }

        void success() { record(false); }
        void failure() { record(true); }
        /// Cancelled: given back; otherwise a failure as the options' is_failure says.
        void record(const classification& c);
        /// Given back uncounted (nothing happens once told).
        void release() noexcept;

    private:
        friend class circuit_breaker;
        void record(bool failure);
        std::shared_ptr<circuit_breaker> b_;  // keeps the breaker alive while a call runs
        std::uint32_t generation_ = 0;
        nanoseconds at_{};
    };

    /// A permit, or an empty one (rejected: open, isolated, or half-open with
    /// every trial taken). The breaker must be owned by a shared_ptr (the
    /// permit keeps it alive; std::bad_weak_ptr otherwise).
    permit try_acquire();

    /// The same for code that keeps no permit object (the retry's decision
    /// loop): true if permitted, with the state's generation to pass back.
    bool acquire(std::uint32_t& generation);
    /// A permitted call of `generation` ended after `took`.
    void record(std::uint32_t generation, bool failure, nanoseconds took);
    /// The same with the retry's classification: cancelled gives the permit
    /// back; otherwise a failure as the options' is_failure says.
    void record(std::uint32_t generation, const classification& c, nanoseconds took);
    /// A permitted call of `generation` ended without an outcome.
    void release(std::uint32_t generation) noexcept;
    /// Whether an outcome `c` counts as a failure (the options' is_failure, or
    /// retryable).
    bool is_failure(const classification& c) const;

    /// Opens it by hand until reset().
    void isolate();
    /// Closes it with a fresh window, from any state.
    void reset();

    /// Now (an open breaker whose break is over reads half_open).
    breaker_state state() const;
    /// How long the current break still lasts (zero unless open).
    nanoseconds break_left() const;

    /// For metrics: calls permitted and rejected, outcomes counted, permits
    /// given back, outcomes too late to count, and transitions into each
    /// state. Consistent with each other (read under the lock).
    struct stats {
        std::uint64_t permitted = 0, rejected = 0;
        std::uint64_t successes = 0, failures = 0, slow = 0, released = 0, stale = 0;
        std::uint64_t opened = 0, half_opened = 0, closed = 0, isolated = 0;
        breaker_state state = breaker_state::closed;
    };
    stats get_stats() const;

    /// A condition, true while the breaker lets calls through (closed or
    /// half-open), false while it is open or isolated; it turns true by
    /// itself when a break ends (a `Timer` on `ex` waits for it). For
    /// retry_policy::with_attempt_when: attempts wait out the break instead
    /// of ending with circuit_open (a half-open breaker whose trials are all
    /// taken still rejects). The breaker must be owned by a shared_ptr; the
    /// condition keeps it alive. Like every watchable, use it (and destroy
    /// it) on `ex`.
    template <class Timer = boost::asio::steady_timer, class Executor>
    std::shared_ptr<watchable> closed(const Executor& ex, std::string name = "circuit_closed");

private:
    nanoseconds now() const { return now_ ? now_() : std::chrono::steady_clock::now().time_since_epoch(); }
    // The clock a permit's call is timed on (see permit).
    nanoseconds call_time() const;
    // acquire(), also telling when on call_time() (for the permit's slow-call measure).
    bool acquire(std::uint32_t& generation, nanoseconds* at);
    // record(), with how long the call took: took() runs under the lock.
    template <class Took>
    void record_timed(std::uint32_t generation, bool failure, Took took);
    // After a transition, under the lock: a new generation, the counters.
    void count(breaker_transition& t);
    // Outside the lock: the hook and the listeners.
    void announce(const breaker_transition& t);

    mutable std::mutex m_;
    detail::breaker_fsm fsm_;
    std::function<bool(const classification&)> is_failure_;
    std::function<void(const breaker_transition&)> on_transition_;
    clock_function now_;
    bool coarse_calls_ = false;  // call_time() reads the coarse clock
    std::uint32_t generation_ = 1;
    stats stats_;
    detail::listener_list listeners_;
};

template <class Timer, class Executor>
std::shared_ptr<watchable> circuit_breaker::closed(const Executor& ex, std::string name) {
    auto self = shared_from_this();
    auto c = std::make_shared<detail::timed_condition<Timer, Executor>>(
        std::move(name), ex, self, [b = self.get()]() -> detail::condition_reading {
            switch (b->state()) {
                case breaker_state::open:
                    return {false, b->break_left()};  // true again when the break ends
                case breaker_state::isolated:
                    return {false, std::nullopt};  // until reset()
                default:
                    return {true, std::nullopt};
            }
        });
    c->start(listeners_);
    return c;
}

}  // namespace steadfast
