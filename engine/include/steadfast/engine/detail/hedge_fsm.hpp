// hedge_fsm: the decisions of a hedged call, apart from I/O and clocks
// (issue 31: the public hedging driver comes next, around this).
//
// In the style of retry_fsm and breaker_fsm: the driver tells what happened
// (started, the hedging timer fired, attempt n ended with an outcome) and
// does what the returned step says (start attempt n, arm the timer, cancel
// the others, finish). Nothing here includes Asio; time is passed in.
//
// The rules, as gRPC's A6 and Polly v8 document hedging:
// - the first attempt starts at once; each next one after the hedging delay
//   since the one before, up to `max_attempts` in all;
// - a retryable failure starts the next attempt at once (not waiting out the
//   delay); a permanent one ends the call, and the others are cancelled;
// - the first success wins: the others are cancelled, and their results,
//   when they come, are dropped (late());
// - a server's pushback (a retryable failure with a delay hint) stops
//   further hedges; the attempts in flight go on;
// - each hedge (attempt 2 and on) draws on the retry budget, if any: without
//   tokens no more hedges start;
// - when nothing is in flight and nothing more may start, the call fails
//   with the last failure's reason (an attempt cancelled from outside the
//   call, with nothing else in flight, ends it too); its result is the
//   last failure, or the pushback if one came (its hint is the wait).
#pragma once

#include <steadfast/engine/budget.hpp>
#include <steadfast/engine/classify.hpp>
#include <steadfast/engine/error.hpp>

#include <chrono>
#include <cstdint>
#include <optional>

namespace steadfast::detail {

struct hedge_settings {
    std::uint32_t max_attempts = 3;                                   // >= 1 (1: no hedge)
    std::chrono::nanoseconds delay = std::chrono::milliseconds(100);  // >= 0
    /// A success gives the budget back its success_refund. Off when a retry
    /// around the call refunds the same success (a pipeline).
    bool refund_on_success = true;
};

/// What the driver does now, in this order: cancel the others, start one,
/// (re)arm or disarm the timer, finish.
struct hedge_step {
    // Every attempt in flight but the winner: every cancellation type (after
    // cancel(), the caller's: hedged_call sends the type it came as).
    bool cancel_others = false;
    std::uint32_t start = 0;                           // start attempt number `start` (0: none)
    std::optional<std::chrono::nanoseconds> timer_at;  // arm the hedging timer for this time
    bool disarm_timer = false;                         // no more hedges: the timer is not needed
    bool done = false;                                 // finished: hedge_fsm::reason(), winner()
};

class hedge_fsm {
public:
    /// Throws std::invalid_argument naming a setting out of range. `budget`
    /// (may be null) must outlive the call.
    explicit hedge_fsm(hedge_settings s, retry_budget* budget = nullptr);

    /// The call starts at `now`.
    hedge_step start(std::chrono::nanoseconds now);
    /// The hedging timer fired at `now`.
    hedge_step on_timer(std::chrono::nanoseconds now);
    /// Attempt `number` ended at `now`, as classified.
    hedge_step on_outcome(std::uint32_t number, const classification& c, std::chrono::nanoseconds now);

    bool finished() const noexcept { return done_; }
    /// How it ended: success, permanent, pushback, budget, attempts_exhausted
    /// or cancelled (cancel()).
    stop_reason reason() const noexcept { return reason_; }
    /// The attempt whose result is the call's (the winner, or the last to
    /// fail; after cancel(), the first success still to come, if any); 0
    /// before the end or when cancelled with nothing ended.
    std::uint32_t result_of() const noexcept { return result_of_; }
    std::uint32_t started() const noexcept { return started_; }
    std::uint32_t in_flight() const noexcept { return in_flight_; }
    /// Outcomes that came after the end (dropped).
    std::uint32_t late() const noexcept { return late_; }
    /// The caller cancelled: every attempt in flight is cancelled, the call
    /// ends with stop_reason::cancelled.
    hedge_step cancel();

private:
    hedge_step start_next(std::chrono::nanoseconds now, hedge_step step);
    hedge_step finish(stop_reason why, hedge_step step);
    bool may_hedge() const noexcept;

    hedge_settings s_;
    retry_budget* budget_;
    std::uint32_t started_ = 0, in_flight_ = 0, late_ = 0, result_of_ = 0;
    stop_reason reason_ = stop_reason::success;
    stop_reason failed_ = stop_reason::attempts_exhausted;  // what the call ends with if nothing succeeds
    bool no_more_ = false;                                  // pushback or budget: no further hedge
    bool done_ = false;
    bool late_success_ = false;  // cancelled, then a success came in: the call's result
    bool pushback_ = false;      // a failure with a delay hint came in: the call's result unless one succeeds
};

}  // namespace steadfast::detail
