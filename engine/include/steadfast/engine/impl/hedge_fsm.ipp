#pragma once
#include <steadfast/engine/detail/hedge_fsm.hpp>

#include <stdexcept>

namespace steadfast::detail {

hedge_fsm::hedge_fsm(hedge_settings s, retry_budget* budget) : s_(s), budget_(budget) {
    if (s_.max_attempts == 0) throw std::invalid_argument("hedging: max_attempts must be at least 1");
    if (s_.delay < std::chrono::nanoseconds::zero()) throw std::invalid_argument("hedging: delay must not be negative");
}

bool hedge_fsm::may_hedge() const noexcept {
    return !done_ && !no_more_ && started_ < s_.max_attempts;
}

hedge_step hedge_fsm::finish(stop_reason why, hedge_step step) {
    done_ = true;
    reason_ = why;
    step.done = true;
    step.disarm_timer = true;
    step.timer_at.reset();
    step.cancel_others = in_flight_ > 0;
    return step;
}

hedge_step hedge_fsm::start_next(std::chrono::nanoseconds now, hedge_step step) {
    if (!may_hedge()) return step;
    // A hedge (not the first attempt) draws on the retry budget.
    if (started_ >= 1 && budget_ && !budget_->try_acquire(budget_->settings().retry_cost)) {
        no_more_ = true;
        failed_ = stop_reason::budget;
        step.disarm_timer = true;
        return step;
    }
    ++started_;
    ++in_flight_;
    step.start = started_;
    if (started_ < s_.max_attempts)
        // Saturating: a delay of nanoseconds::max() hedges only after failures.
        step.timer_at =
            s_.delay >= std::chrono::nanoseconds::max() - now ? std::chrono::nanoseconds::max() : now + s_.delay;
    else
        step.disarm_timer = true;
    return step;
}

hedge_step hedge_fsm::start(std::chrono::nanoseconds now) {
    return start_next(now, {});
}

hedge_step hedge_fsm::on_timer(std::chrono::nanoseconds now) {
    if (done_) return {};
    hedge_step step = start_next(now, {});
    // Nothing started (the budget refused) and nothing in flight: the end.
    if (in_flight_ == 0 && step.start == 0) return finish(failed_, step);
    return step;
}

hedge_step hedge_fsm::on_outcome(std::uint32_t number, const classification& c, std::chrono::nanoseconds now) {
    if (done_) {
        ++late_;  // the call has its result: dropped
        // Cancelled from outside, the call still keeps a success that comes
        // in while its attempts wind down (as a retry keeps one).
        if (reason_ == stop_reason::cancelled && c.kind == verdict::success && !late_success_) {
            late_success_ = true;
            result_of_ = number;
        }
        return {};
    }
    if (in_flight_ > 0) --in_flight_;
    switch (c.kind) {
        case verdict::success:
            result_of_ = number;
            if (budget_ && s_.refund_on_success) budget_->release(budget_->settings().success_refund);
            return finish(stop_reason::success, {});
        case verdict::permanent:
            result_of_ = number;
            return finish(stop_reason::permanent, {});
        case verdict::cancelled:
            // Cancelled from outside the call (not by it): as a failure
            // that starts nothing new; with nothing else in flight the call
            // ends (a pending hedging timer would leave it idle, or for good
            // with a delay without end).
            if (!pushback_) result_of_ = number;
            if (in_flight_ == 0) return finish(failed_, {});
            return {};
        case verdict::retryable:
            break;
    }
    // The call's result is the last failure, except that a pushback stays
    // the result once seen: its delay hint is what the retry must wait.
    if (!pushback_) result_of_ = number;
    hedge_step step;
    if (c.delay_hint) {
        // The server pushes back: no further hedges; those in flight go on.
        no_more_ = true;
        pushback_ = true;
        result_of_ = number;
        failed_ = stop_reason::pushback;
        step.disarm_timer = true;
    }
    step = start_next(now, step);  // at once, not after the delay
    if (in_flight_ == 0 && step.start == 0) return finish(failed_, step);
    return step;
}

hedge_step hedge_fsm::cancel() {
    if (done_) return {};
    return finish(stop_reason::cancelled, {});
}

}  // namespace steadfast::detail
