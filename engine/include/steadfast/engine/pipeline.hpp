// A pipeline: the resilience pieces composed around one call, in one value.
//
//   auto p = steadfast::pipeline{}
//                .with_rate_limit(rate)          // 1. a token per call (queues, or ends `limited`)
//                .with_concurrency_limit(bulk)   // 2. a permit for the whole call
//                .with_retry(policy)             // 3. retries the call...
//                .with_breaker(breaker)          //    ...asking the breaker before each attempt
//                .with_hedging({.max_attempts = 2, .delay = 50ms})  // 4. each attempt hedged
//                .with_timeout(200ms);           // 5. each attempt's (each hedge's) own timeout
//   auto r = co_await steadfast::execute(p, attempt);
//
// The order is fixed and documented: rate limit -> concurrency limit -> retry
// (with the breaker) -> hedging -> timeout -> attempt. The rate limit and the
// bulkhead admit the call once, before anything starts (a call that finds
// their queue full ends with stop_reason::limited and no attempt); the retry
// asks the breaker before each of its attempts and records each outcome in
// it (Polly's recommended order: the breaker inside the retry, so that an
// opened breaker ends the retry at once rather than after its backoff);
// each retry attempt is one hedged call when hedging is set; the timeout
// bounds each attempt, each hedge on its own. A timeout already in the
// retry policy (retry_policy::with_attempt_timeout) bounds each retry
// attempt as a whole: under hedging, the hedged call.
//
// Hedging inside a retry multiplies requests: each retry attempt may send up
// to max_attempts of them, and a hedge starts at once after a fast failure.
// Give the retry policy a budget (hedges draw on it: gRPC's A6 throttles
// them the same way) and a backoff. The breaker is asked once per retry
// attempt, that is per hedged call, and records the call's outcome, not
// each hedge's.
//
// Like retry_policy, a pipeline is immutable and cheap to copy (one shared
// pointer); the with_* builders return modified copies and refuse bad values
// (std::invalid_argument). Its drivers keep the retry drivers' rules:
// execute() runs in the calling coroutine; async_execute() takes any
// completion token, never completes inline, runs every step on its executor,
// takes its state from the handler's allocator and passes terminal, partial
// and total cancellation on to whatever the call is waiting for.
#pragma once

#include <steadfast/engine/breaker.hpp>
#include <steadfast/engine/hedging.hpp>
#include <steadfast/engine/limits.hpp>
#include <steadfast/engine/policy.hpp>
#include <steadfast/engine/result.hpp>
#include <steadfast/engine/retry.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <utility>

namespace steadfast {

template <class Timer>
class basic_pipeline;

namespace detail {
template <class Timer>
struct pipeline_data {
    std::shared_ptr<basic_rate_limit<Timer>> rate;
    std::shared_ptr<concurrency_limit> bulkhead;
    std::shared_ptr<circuit_breaker> breaker;
    std::optional<hedging_options> hedging;
    std::optional<nanoseconds> timeout;
    retry_policy retry;      // as given to with_retry
    retry_policy effective;  // with the breaker, and the timeout when not hedging
    hedge_config hedge;      // points at `effective`
};
struct pipeline_access;
}  // namespace detail

/// See the top of this file. `Timer` is the clock of the rate limit, the
/// retry's waits and the timeouts (steadfast::manual_timer in tests).
template <class Timer = boost::asio::steady_timer>
class basic_pipeline {
public:
    /// No limits, no breaker, no hedging, no timeout; retry_policy's defaults.
    basic_pipeline() : basic_pipeline(fresh()) {}

    basic_pipeline with_rate_limit(std::shared_ptr<basic_rate_limit<Timer>> r) const {
        require(r != nullptr, "with_rate_limit needs a rate limit");
        return modified([&](auto& d) { d.rate = std::move(r); });
    }
    basic_pipeline with_concurrency_limit(std::shared_ptr<concurrency_limit> c) const {
        require(c != nullptr, "with_concurrency_limit needs a concurrency limit");
        return modified([&](auto& d) { d.bulkhead = std::move(c); });
    }
    /// Replaces the retry policy (retry_policy{}.with_stop(stop::max_attempts(1)): no retry).
    basic_pipeline with_retry(retry_policy p) const {
        return modified([&](auto& d) { d.retry = std::move(p); });
    }
    /// The retry asks `b` before each attempt (as retry_policy::with_breaker;
    /// this one wins over a breaker set in the policy).
    basic_pipeline with_breaker(std::shared_ptr<circuit_breaker> b) const {
        require(b != nullptr, "with_breaker needs a circuit breaker");
        return modified([&](auto& d) { d.breaker = std::move(b); });
    }
    /// Each retry attempt becomes one hedged call (see hedging.hpp).
    basic_pipeline with_hedging(hedging_options o) const {
        require(o.max_attempts >= 1 && o.max_attempts <= detail::max_hedged_attempts,
                "with_hedging: max_attempts must be from 1 to 8");
        require(o.delay >= nanoseconds::zero(), "with_hedging: the delay must not be negative");
        return modified([&](auto& d) { d.hedging = o; });
    }
    /// Each attempt that overruns `d` is cancelled (every type) and counts as
    /// a retryable timeout (error::attempt_timeout); under hedging, each
    /// hedge has its own. d > 0.
    basic_pipeline with_timeout(nanoseconds d) const {
        require(d > nanoseconds::zero(), "with_timeout: the timeout must be positive");
        return modified([&](auto& d2) { d2.timeout = d; });
    }

    const std::shared_ptr<basic_rate_limit<Timer>>& rate_limit() const noexcept { return d_->rate; }
    const std::shared_ptr<concurrency_limit>& concurrency() const noexcept { return d_->bulkhead; }
    const std::shared_ptr<circuit_breaker>& breaker() const noexcept { return d_->breaker; }
    const std::optional<hedging_options>& hedging() const noexcept { return d_->hedging; }
    std::optional<nanoseconds> timeout() const noexcept { return d_->timeout; }
    /// The policy the retry runs with: with_retry's, with the breaker and
    /// (without hedging) the timeout.
    const retry_policy& policy() const noexcept { return d_->effective; }

private:
    friend struct detail::pipeline_access;
    static void require(bool ok, const char* what) {
        if (!ok) throw std::invalid_argument(what);
    }
    template <class F>
    basic_pipeline modified(F&& f) const {
        auto d = std::make_shared<detail::pipeline_data<Timer>>(*d_);
        std::forward<F>(f)(*d);
        d->effective = d->retry;
        if (d->breaker) d->effective = d->effective.with_breaker(d->breaker);
        if (d->timeout && !d->hedging) {
            // The tighter of this and a timeout already in the retry policy.
            const auto own = d->retry.attempt_timeout();
            d->effective = d->effective.with_attempt_timeout(own && *own < *d->timeout ? *own : *d->timeout);
        }
        d->hedge = {d->hedging.value_or(hedging_options{}), d->timeout, &d->effective};
        return basic_pipeline(std::move(d));
    }
    static std::shared_ptr<detail::pipeline_data<Timer>> fresh() {
        auto d = std::make_shared<detail::pipeline_data<Timer>>();
        d->hedge.policy = &d->effective;
        return d;
    }
    explicit basic_pipeline(std::shared_ptr<detail::pipeline_data<Timer>> d) : d_(std::move(d)) {}
    std::shared_ptr<const detail::pipeline_data<Timer>> d_;
};

using pipeline = basic_pipeline<>;

namespace detail {

struct pipeline_access {
    template <class Timer>
    static const pipeline_data<Timer>& data(const basic_pipeline<Timer>& p) noexcept {
        return *p.d_;
    }
};

// A call the limits did not admit: `ec` is error::queue_full or
// operation_aborted. No attempt was made.
template <class R>
retry_result<R> not_admitted(error_code ec) {
    retry_result<R> r;
    auto& s = result_access::summary(r);
    s.reason = ec == boost::asio::error::operation_aborted ? stop_reason::cancelled : stop_reason::limited;
    s.last_error = ec;
    return r;
}

// The slow path of admission (a limit without room at once): queued, in a
// coroutine of its own so that the common path's frame does not hold it.
// A caller cancelled while it waited (even if a limit let it in just
// before: the grant's completion may come after the cancellation) ends
// with operation_aborted, its permit given back, and no attempt.
template <class Timer>
boost::asio::awaitable<error_code> admit_queued(const pipeline_data<Timer>& d, bool rate_done,
                                                concurrency_limit::permit& permit) {
    namespace asio = boost::asio;
    const auto ex = co_await asio::this_coro::executor;
    const auto cs = co_await asio::this_coro::cancellation_state;
    // A cancelled coroutine's next co_await must not throw here: the
    // outcome is a value. (Per coroutine stack: put back before returning.)
    const bool throws = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    error_code ec;
    if (!rate_done) std::tie(ec) = co_await d.rate->async_acquire(ex, asio::as_tuple(asio::use_awaitable));
    if (!ec && d.bulkhead && !permit) {
        permit = d.bulkhead->try_acquire();
        if (!permit && !is_cancelled(cs)) {
            auto [e, p] = co_await d.bulkhead->async_acquire(ex, asio::as_tuple(asio::use_awaitable));
            ec = e;
            permit = std::move(p);
        }
    }
    if (!ec && is_cancelled(cs)) ec = boost::asio::error::operation_aborted;
    if (ec) permit = {};
    co_await asio::this_coro::throw_if_cancelled(throws);
    co_return ec;
}

}  // namespace detail

namespace detail {

// What a pipeline's call holds until it ends: its pipeline (the hedging
// settings point into it) and its bulkhead permit. The attempt the retry
// keeps carries them, so they go when the retry's state goes: before its
// result reaches the caller.
template <class Timer>
struct call_holdings {
    basic_pipeline<Timer> pipeline;
    concurrency_limit::permit permit;
};

template <class Timer, class Attempt>
struct held_attempt {
    Attempt attempt;
    call_holdings<Timer> held;
};

template <class Timer, class A>
struct attempt_parts<held_attempt<Timer, A>> {
    using inner = attempt_parts<A>;
    using fn_type = typename inner::fn_type;
    using classifier_type = typename inner::classifier_type;
    static fn_type& fn(held_attempt<Timer, A>& a) noexcept { return inner::fn(a.attempt); }
    static decltype(auto) classifier(held_attempt<Timer, A>& a) noexcept { return inner::classifier(a.attempt); }
    static bool timed_out(const held_attempt<Timer, A>& a) noexcept { return inner::timed_out(a.attempt); }
};

// The call once admitted: the retry of the attempt, hedged or not.
template <class Timer, class Attempt>
boost::asio::awaitable<retry_result_for<Attempt>> run_admitted(basic_pipeline<Timer> p, Attempt attempt,
                                                               concurrency_limit::permit permit) {
    const pipeline_data<Timer>& d = pipeline_access::data(p);  // (on the heap: `p` may move)
    if (d.hedging)
        return retry<Timer>(d.effective, held_attempt<Timer, hedged_fn<Timer, Attempt>>{
                                             hedged_fn<Timer, Attempt>(&d.hedge, std::move(attempt)),
                                             {std::move(p), std::move(permit)}});
    return retry<Timer>(d.effective,
                        held_attempt<Timer, Attempt>{std::move(attempt), {std::move(p), std::move(permit)}});
}

// The call when a limit had no room at once: queued, then run.
template <class Timer, class Attempt>
boost::asio::awaitable<retry_result_for<Attempt>> execute_queued(basic_pipeline<Timer> p, Attempt attempt,
                                                                 bool rate_done, concurrency_limit::permit permit) {
    using R = typename retry_result_for<Attempt>::value_type;
    if (const error_code ec = co_await admit_queued(pipeline_access::data(p), rate_done, permit))
        co_return not_admitted<R>(ec);
    co_return co_await run_admitted<Timer>(std::move(p), std::move(attempt), std::move(permit));
}

}  // namespace detail

/// Runs `attempt` through the pipeline in the calling coroutine: admitted
/// by the rate limit and the bulkhead (the permit is held until the call
/// ends), then retried as `p.policy()` says, each attempt hedged and timed
/// as the pipeline says. The attempt is what retry() takes (a callable
/// (const attempt_context&) -> awaitable<R>, or classified(fn, classifier)).
/// Completion, executor and cancellation: as retry(); a call cancelled
/// while queued at a limit leaves the queue and ends with
/// stop_reason::cancelled. With hedging, the hedges run on the calling
/// coroutine's executor beside it: on a multi-threaded io_context, run the
/// calling coroutine on a strand (as for a timeout or stop-when).
///
/// The limits are asked when execute() is called (a token or permit at
/// once needs no coroutine of its own); await the result where it is made,
/// as with any call whose admission counts. A permit is given back when
/// the awaitable goes, run or not.
template <class Timer = boost::asio::steady_timer, class Attempt>
boost::asio::awaitable<retry_result_for<Attempt>> execute(basic_pipeline<Timer> p, Attempt attempt) {
    const auto& d = detail::pipeline_access::data(p);
    concurrency_limit::permit permit;
    // In the documented order: the rate limit's token, then the permit.
    const bool rate_done = !d.rate || d.rate->try_acquire();
    if (rate_done && d.bulkhead) permit = d.bulkhead->try_acquire();
    if (!rate_done || (d.bulkhead && !permit))
        return detail::execute_queued<Timer>(std::move(p), std::move(attempt), rate_done, std::move(permit));
    return detail::run_admitted<Timer>(std::move(p), std::move(attempt), std::move(permit));
}

namespace detail {

// async_execute as a composed operation: admission by each limit (their
// async_acquire, each completing into this), then async_retry completing
// into this, then the completion. The permit travels in the attempt that
// async_retry keeps, so it is given back with the retry's state, before the
// handler runs.
template <class Timer, class Executor, class Attempt>
struct execute_op {
    using R = typename retry_result_for<Attempt>::value_type;
    basic_pipeline<Timer> p;
    Attempt attempt;
    Executor ex;

    template <class Self>
    void operator()(Self& self) {  // the first step, in the initiating function
        self.reset_cancellation_state(boost::asio::enable_total_cancellation());
        const auto& d = pipeline_access::data(p);
        if (d.rate && !d.rate->try_acquire()) return queue_at(*d.rate, self);
        admitted_by_rate(self);
    }
    template <class Self>
    void operator()(Self& self, error_code ec) {  // the rate limit's queue
        if (!ec && cancelled(self)) ec = boost::asio::error::operation_aborted;
        if (ec) return refuse(self, ec);
        admitted_by_rate(self);
    }
    template <class Self>
    void operator()(Self& self, error_code ec, concurrency_limit::permit got) {  // the bulkhead's queue
        if (!ec && cancelled(self)) ec = boost::asio::error::operation_aborted;
        if (ec) return refuse(self, ec);  // (`got` given back first)
        run(self, std::move(got));
    }
    template <class Self>
    void operator()(Self& self, retry_result<R> r) {  // the retry
        self.complete(std::move(r));
    }

private:
    // A cancellation that came while a limit was letting the call in (its
    // completion on the way) still ends the call before any attempt.
    template <class Self>
    static bool cancelled(Self& self) {
        return self.get_cancellation_state().cancelled() != boost::asio::cancellation_type::none;
    }
    // The steps run on `ex`; the handler runs on its own executor.
    template <class Self>
    static void refuse(Self& self, error_code ec) {
        boost::asio::dispatch(boost::asio::append(std::move(self), not_admitted<R>(ec)));
    }
    // Waits in `limit`'s queue, completing into this operation on `ex`.
    template <class Limit, class Self>
    void queue_at(Limit& limit, Self& self) {
        // A copy first: moving `self` moves this operation, `ex` with it, and
        // the two arguments may be evaluated in either order (g++: right to
        // left).
        const Executor e = ex;
        limit.async_acquire(e, boost::asio::bind_executor(e, std::move(self)));
    }
    template <class Self>
    void admitted_by_rate(Self& self) {
        const auto& d = pipeline_access::data(p);
        concurrency_limit::permit permit;
        if (d.bulkhead) {
            permit = d.bulkhead->try_acquire();
            if (!permit) return queue_at(*d.bulkhead, self);
        }
        run(self, std::move(permit));
    }
    template <class Self>
    void run(Self& self, concurrency_limit::permit permit) {
        const auto& d = pipeline_access::data(p);
        if (d.hedging)
            return steadfast::async_retry<Timer>(
                ex, d.effective,
                held_attempt<Timer, hedged_fn<Timer, Attempt>>{hedged_fn<Timer, Attempt>(&d.hedge, std::move(attempt)),
                                                               {p, std::move(permit)}},
                std::move(self));
        steadfast::async_retry<Timer>(
            ex, d.effective, held_attempt<Timer, Attempt>{std::move(attempt), {p, std::move(permit)}}, std::move(self));
    }
};

}  // namespace detail

/// The same as a composed asynchronous operation taking any completion
/// token. Completion signature void(retry_result_for<Attempt>). Executor,
/// allocator and cancellation as async_retry(): every step on `ex` (a strand
/// on a multi-threaded io_context), never completing inside this call, the
/// state from the handler's associated allocator, terminal, partial and
/// total cancellation passed on to the limit's queue, the wait or the
/// attempts in flight.
template <class Timer = boost::asio::steady_timer, class Executor, class Attempt,
          class CompletionToken = boost::asio::default_completion_token_t<Executor>>
requires(boost::asio::execution::is_executor<Executor>::value ||
         boost::asio::is_executor<Executor>::value) auto async_execute(const Executor& ex, basic_pipeline<Timer> p,
                                                                       Attempt attempt, CompletionToken&& token = {}) {
    using result_t = retry_result_for<Attempt>;
    return boost::asio::async_compose<CompletionToken, void(result_t)>(
        detail::execute_op<Timer, Executor, Attempt>{std::move(p), std::move(attempt), ex}, token, ex);
}

/// The same on an execution context (an io_context, say): its executor.
template <class Timer = boost::asio::steady_timer, class ExecutionContext, class Attempt,
          class CompletionToken = boost::asio::default_completion_token_t<typename ExecutionContext::executor_type>>
requires std::is_convertible_v<ExecutionContext&, boost::asio::execution_context&>
auto async_execute(ExecutionContext& ctx, basic_pipeline<Timer> p, Attempt attempt, CompletionToken&& token = {}) {
    return steadfast::async_execute<Timer>(ctx.get_executor(), std::move(p), std::move(attempt),
                                           std::forward<CompletionToken>(token));
}

}  // namespace steadfast
