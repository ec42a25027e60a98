// retry_fsm: the one decision loop of a retrying operation, apart from I/O.
//
// In the style of Boost.Redis' run_fsm: the driver (the coroutine retry() or
// the composed async_retry()) calls resume() with what it saw, and does what
// the returned action says: start an attempt, wait for the gate, sleep, yield
// to the event loop, or finish. Cancellation, stop-when, the gate, deadlines,
// hooks and giving up are decided here, once, for both drivers, and tested
// without timers (test/unit/engine/fsm.cpp). Nothing here includes Asio.
#pragma once

#include <steadfast/engine/classify.hpp>
#include <steadfast/engine/policy.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <typeinfo>

namespace steadfast::detail {

/// What the driver does next.
struct retry_action {
    enum class type : unsigned char {
        attempt,    // start the attempt described by retry_fsm::context()
        wait_gate,  // wait until the gate opens (woken by it and by stop-when), at most until `at`
        sleep,      // wait `at` (woken early by stop-when and by the gate)
        yield,      // let other work run (post), then resume
        done,       // finished: retry_fsm::summary() says why
    };
    type what = type::done;
    /// sleep: the delay. wait_gate: the deadline as time since the start
    /// (nanoseconds::max(): none).
    nanoseconds at{};
    /// sleep: the gate opening ends it early (not when the delay is a
    /// server's pushback hint: that wait is never shortened).
    bool wake_on_gate = true;
};

/// What the driver saw since the last action.
struct retry_event {
    nanoseconds elapsed{};   // since the start, read just now
    bool cancelled = false;  // the caller's cancellation (any type) was requested
    bool expired = false;    // wait_gate: the wait ran out rather than being woken
    // After action::attempt: the outcome as classified, and whether the
    // per-attempt timeout fired before it ended.
    classification outcome;
    bool timed_out = false;
    std::exception_ptr exception;  // what the attempt threw, if it threw
    const void* value = nullptr;   // what it returned, if it returned (kept by the driver)
    const std::type_info* type = nullptr;
};

class retry_fsm {
public:
    /// Keeps a reference to `p`'s data: the policy must outlive it.
    explicit retry_fsm(const retry_policy& p);
    retry_fsm(retry_policy&&) = delete;
    retry_fsm(const retry_fsm&) = delete;
    retry_fsm& operator=(const retry_fsm&) = delete;
    ~retry_fsm();

    /// The first call starts the operation (elapsed 0, nothing else set).
    retry_action resume(const retry_event& ev);
    /// Called by the driver with what every resume() returned: resume() runs
    /// user code (hooks, a custom backoff, the random source), which may have
    /// cancelled the operation (`cancelled`: the driver's cancellation state,
    /// read just after resume()) or set stop-when (as stop_seen() tells: the
    /// driver's subscription is in place for the whole operation). Then `a` is not carried
    /// out (no sleep, gate wait or attempt starts) and the operation ends:
    /// cancelled before condition, as everywhere. An attempt whose
    /// before_attempt hook ended it is counted (the hook saw its number) but
    /// never runs. Once done, nothing changes. Returns the action to carry out.
    retry_action settle(const retry_action& a, bool cancelled, nanoseconds elapsed);

    /// The attempt to start, after action::attempt.
    const attempt_context& context() const noexcept { return ctx_; }
    /// How it ended, after action::done.
    retry_summary summary() const noexcept;
    /// The exception the last attempt threw, if it threw.
    const std::exception_ptr& last_exception() const noexcept { return previous_.exception_; }
    /// A thrown exception as the policy classifies it.
    classification classify(const std::exception_ptr& e) const;

    /// Whether an attempt needs a cancellation signal of its own: it has a
    /// timeout, or a stop-when condition can cut it short (not one that
    /// lets it finish).
    bool watch_attempt() const noexcept { return ctx_.timeout.has_value() || stop_cancels_attempt(); }
    /// Whether stop-when turning true cancels the attempt in flight (not
    /// stop_in_flight::let_finish: then only a timeout or the caller does).
    bool stop_cancels_attempt() const noexcept;
    /// The stop-when condition and the gate, for the driver's subscriptions.
    watchable* stop_when() const noexcept { return p().stop_when_.get(); }
    watchable* gate() const noexcept { return p().attempt_when_.get(); }
    /// Called (from the stop-when subscription, which the driver keeps for the
    /// operation's whole life) when stop-when turns true: a condition that is
    /// true only briefly, at any moment, still stops the retry.
    void stop_seen() noexcept { stop_fired_ = true; }

private:
    enum class phase : unsigned char { start, gate, attempting, waiting, done };
    retry_action next(const retry_event& ev);
    retry_action after_attempt(const retry_event& ev);
    retry_action finish(stop_reason why, nanoseconds elapsed);
    bool stop_requested() const noexcept;
    /// The policy's breaker rejects calls now, and no gate waits for it.
    bool breaker_shut() const;
    const policy_data& p() const noexcept { return *state_.p_; }

    // Kept small: a pending async_retry holds one of these.
    retry_state state_;
    attempt_context ctx_;
    previous_outcome previous_;
    nanoseconds elapsed_{};  // at the end
    stop_reason reason_ = stop_reason::success;
    phase at_ = phase::start;
    bool stop_fired_ = false;
    bool permit_ = false;           // the breaker let the attempt in flight through
    std::uint32_t permit_gen_ = 0;  // in this state of the breaker
};

}  // namespace steadfast::detail
