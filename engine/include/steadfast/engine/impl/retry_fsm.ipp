#pragma once
#include <steadfast/engine/breaker.hpp>
#include <steadfast/engine/detail/retry_fsm.hpp>
#include <steadfast/engine/watchable.hpp>

#include <boost/asio/error.hpp>

namespace steadfast::detail {

retry_fsm::retry_fsm(const retry_policy& p) : state_(p) {}

retry_fsm::~retry_fsm() {
    // An operation destroyed with its attempt in flight (a stopped and
    // destroyed io_context): the permit goes back, or a half-open breaker
    // would wait for a trial that never ends.
    if (permit_) p().breaker_->release(permit_gen_);
}

bool retry_fsm::breaker_shut() const {
    if (!p().breaker_ || p().attempt_when_) return false;  // a gate waits the break out instead
    const breaker_state s = p().breaker_->state();
    return s == breaker_state::open || s == breaker_state::isolated;
}

retry_summary retry_fsm::summary() const noexcept {
    return {reason_, state_.attempts(), elapsed_, previous_.how_.ec};
}

bool retry_fsm::stop_cancels_attempt() const noexcept {
    return p().stop_when_ != nullptr && p().stop_in_flight_ == stop_in_flight::cancel;
}

bool retry_fsm::stop_requested() const noexcept {
    return p().stop_when_ && (stop_fired_ || p().stop_when_->value());
}

classification retry_fsm::classify(const std::exception_ptr& e) const {
    return p().exception_classifier_ ? p().exception_classifier_(e) : classify_exception(e);
}

retry_action retry_fsm::resume(const retry_event& ev) {
    switch (at_) {
        case phase::start:
        case phase::waiting:
            return next(ev);
        case phase::gate:
            if (!ev.cancelled && !stop_requested() && !p().attempt_when_->value()) {
                if (ev.expired) return finish(stop_reason::deadline, ev.elapsed);
                // Woken for nothing (the gate opened and closed again): wait on.
                return {retry_action::type::wait_gate, p().stop_.deadline().value_or(nanoseconds::max())};
            }
            return next(ev);
        case phase::attempting:
            return after_attempt(ev);
        case phase::done:
            break;
    }
    return {retry_action::type::done, {}};
}

retry_action retry_fsm::settle(const retry_action& a, bool cancelled, nanoseconds elapsed) {
    if (at_ == phase::done) return a;
    // Stop-when was not requested when resume() decided `a` (it checks
    // before every action): if the driver's subscription saw it turn true
    // since, user code set it. (stop_fired_, not value(): no virtual call on
    // every step.)
    if (cancelled) return finish(stop_reason::cancelled, elapsed);
    if (stop_fired_) return finish(stop_reason::condition, elapsed);
    return a;
}

// Before each attempt, in this order: the caller's cancellation, stop-when,
// the gate, the deadline, the circuit breaker.
retry_action retry_fsm::next(const retry_event& ev) {
    if (ev.cancelled) return finish(stop_reason::cancelled, ev.elapsed);
    if (stop_requested()) return finish(stop_reason::condition, ev.elapsed);
    if (p().attempt_when_ && !p().attempt_when_->value()) {
        at_ = phase::gate;
        return {retry_action::type::wait_gate, p().stop_.deadline().value_or(nanoseconds::max())};
    }
    if (state_.out_of_time(ev.elapsed)) return finish(stop_reason::deadline, ev.elapsed);
    if (p().breaker_) {
        if (!p().breaker_->acquire(permit_gen_)) return finish(stop_reason::circuit_open, ev.elapsed);
        permit_ = true;
    }
    ctx_ = state_.begin_attempt(ev.elapsed);
    ctx_.previous = ctx_.number > 1 ? &previous_ : nullptr;
    if (p().hooks_.before_attempt) p().hooks_.before_attempt(ctx_);
    at_ = phase::attempting;
    return {retry_action::type::attempt, {}};
}

retry_action retry_fsm::after_attempt(const retry_event& ev) {
    classification c = ev.outcome;
    if (ev.timed_out && c.kind != verdict::success) c = classification::retryable(error::attempt_timeout);
    // A success that arrives after the caller cancelled still reports
    // cancelled (the driver keeps the value).
    if (ev.cancelled && c.kind != verdict::cancelled)
        c = classification::cancelled(boost::asio::error::operation_aborted);
    if (permit_) {
        p().breaker_->record(permit_gen_, c, ev.elapsed - ctx_.elapsed);
        permit_ = false;  // (after: if is_failure threw, finish() or the destructor gives it back)
    }
    previous_outcome now;
    now.how_ = c;
    now.exception_ = ev.exception;
    now.value_ = ev.value;
    now.type_ = ev.type;

    // A stop-when condition that cut the attempt short (or holds now) is the
    // reason, unless the caller cancelled.
    decision d;
    if (!ev.cancelled && c.kind != verdict::success && stop_requested())
        d = decision{decision::action::stop, stop_reason::condition, {}, false};
    else if (c.kind == verdict::retryable && breaker_shut())
        // This failure opened the breaker (or another call did meanwhile):
        // no sleep and no budget for a retry it would reject.
        d = decision{decision::action::stop, stop_reason::circuit_open, {}, false};
    else
        d = state_.on_outcome(c, ev.elapsed, &now);  // a custom backoff sees this outcome
    if (p().hooks_.after_attempt) {
        // The hook sees the attempt's context as the attempt did, except the
        // value before: the driver keeps only the latest value.
        attempt_context seen = ctx_;
        previous_outcome before;
        if (seen.previous) {
            before.how_ = previous_.how_;
            before.exception_ = previous_.exception_;
            seen.previous = &before;
        }
        p().hooks_.after_attempt(seen, c, d);
    }
    previous_ = std::move(now);
    if (d.what == decision::action::stop) return finish(d.reason, ev.elapsed);
    at_ = phase::waiting;
    // Zero delay still yields, so a retry loop never starves the event loop.
    if (d.delay.count() > 0) return {retry_action::type::sleep, d.delay, !d.hinted};
    return {retry_action::type::yield, {}};
}

retry_action retry_fsm::finish(stop_reason why, nanoseconds elapsed) {
    if (permit_) {  // an attempt let through but never made (ended by a hook)
        permit_ = false;
        p().breaker_->release(permit_gen_);
    }
    reason_ = why;
    elapsed_ = elapsed;
    at_ = phase::done;
    if (why != stop_reason::success && p().hooks_.on_give_up) p().hooks_.on_give_up(summary());
    return {retry_action::type::done, {}};
}

}  // namespace steadfast::detail
