// retry(): turn an attempt-producing callable into a retrying operation.
//
//   auto r = co_await steadfast::retry(policy, [&](const steadfast::attempt_context& ctx)
//                                               -> asio::awaitable<result<reply>> { ... });
//
// The attempt is called with its context and returns asio::awaitable<R>. Each
// outcome is classified (see classify.hpp), the decision comes from
// retry_state (plain code, see policy.hpp), and this file only waits: on the
// backoff timer, on the per-attempt timeout, on stop-when and gate conditions.
#pragma once

#include <steadfast/engine/classify.hpp>
#include <steadfast/engine/policy.hpp>
#include <steadfast/engine/result.hpp>
#include <steadfast/engine/watchable.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/executor.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/is_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <chrono>
#include <memory>
#include <exception>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

namespace steadfast {

namespace detail {

template <class T>
struct awaitable_value;
template <class T, class E>
struct awaitable_value<boost::asio::awaitable<T, E>> {
    using type = T;
};

template <class A>
struct attempt_parts {
    using fn_type = A;
    using classifier_type = default_classifier;
    static fn_type& fn(A& a) noexcept { return a; }
    static classifier_type classifier(A&) noexcept { return {}; }
};
template <class F, class C>
struct attempt_parts<classified_attempt<F, C>> {
    using fn_type = F;
    using classifier_type = C;
    static fn_type& fn(classified_attempt<F, C>& a) noexcept { return a.fn; }
    static const classifier_type& classifier(classified_attempt<F, C>& a) noexcept { return a.classify; }
};

template <class A>
using attempt_raw_t = typename awaitable_value<
    std::invoke_result_t<typename attempt_parts<A>::fn_type&, const attempt_context&>>::type;

template <class T>
using stored_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <class R>
struct attempt_outcome {
    std::optional<R> value;
    std::exception_ptr error;
};

// Runs one attempt and turns a thrown exception into a value. It runs in a
// coroutine of its own (co_spawn), whose cancellation filter would let only
// terminal cancellation through: partial and total reach the attempt too.
template <class Raw, class Fn>
boost::asio::awaitable<attempt_outcome<stored_t<Raw>>> guarded_attempt(Fn& fn, attempt_context ctx) {
    co_await boost::asio::this_coro::reset_cancellation_state(boost::asio::enable_total_cancellation());
    attempt_outcome<stored_t<Raw>> out;
    try {
        if constexpr (std::is_void_v<Raw>) {
            co_await fn(ctx);
            out.value.emplace();
        } else {
            out.value.emplace(co_await fn(ctx));
        }
    } catch (...) {
        out.error = std::current_exception();
    }
    co_return out;
}

// start + d on a timer's clock, saturating at the clock's end: a limit such
// as max_elapsed(nanoseconds::max()) must mean "never", not overflow into the past.
template <class TimePoint>
TimePoint saturating_deadline(TimePoint start, std::chrono::nanoseconds d) {
    using dur = typename TimePoint::duration;
    const auto dd = std::chrono::duration_cast<dur>(d);
    if (dd.count() <= 0) return start;
    return dd >= TimePoint::max() - start ? TimePoint::max() : start + dd;
}

inline bool is_cancelled(const boost::asio::cancellation_state& cs) noexcept {
    return cs.cancelled() != boost::asio::cancellation_type::none;
}

}  // namespace detail

/// The result type of retrying attempt `A`.
template <class A>
using retry_result_for = retry_result<detail::stored_t<detail::attempt_raw_t<A>>>;

namespace detail {

// The rare paths live in coroutines of their own, so their locals are not in
// the frame of every pending retry (g++ 12 does not overlap frame slots).

// Wakes `t` (cancels its wait) when `w` turns true, and records that it did
// in `*fired`: a stop-when condition that is true only briefly (set, then
// cleared before the woken step runs) still stops the retry.
// (Two pointers: the callback fits std::function's small buffer, so a
// subscription allocates nothing.)
inline void wake_timer_on(watchable* w, watchable::subscription& sub, auto& t, bool* fired = nullptr) {
    if (w)
        w->subscribe(sub, [&t, fired](bool v) {
            if (!v) return;
            if (fired) *fired = true;
            t.cancel();
        });
}

// Whether the retry must stop for its stop-when condition: it holds now, or
// it turned true during the last wait or attempt.
inline bool stop_requested(const detail::policy_data& pd, bool fired) {
    return pd.stop_when_ && (fired || pd.stop_when_->value());
}

// The helpers below make the retry's timer on first use, in their own frames.
template <class Timer>
boost::asio::awaitable<Timer*> timer_of(std::optional<Timer>& t) {
    if (!t) t.emplace(co_await boost::asio::this_coro::executor);
    co_return &*t;
}

// Waits until the gate opens, at most until the stop condition's deadline.
// Returns a reason to stop, or nullopt to go on.
template <class Timer>
boost::asio::awaitable<std::optional<stop_reason>> wait_for_gate(const detail::policy_data& pd,
                                                                   std::optional<Timer>& timer,
                                                                   typename Timer::time_point start, bool& stop_fired) {
    namespace asio = boost::asio;
    using clock = typename Timer::clock_type;
    const auto cs = co_await asio::this_coro::cancellation_state;
    Timer& t = *co_await timer_of(timer);
    watchable::subscription stop_sub, gate_sub;
    const auto limit = pd.stop_.deadline();
    t.expires_at(limit ? saturating_deadline(start, *limit) : clock::time_point::max());
    wake_timer_on(pd.stop_when_.get(), stop_sub, t, &stop_fired);
    wake_timer_on(pd.attempt_when_.get(), gate_sub, t);
    while (!pd.attempt_when_->value()) {
        auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
        if (is_cancelled(cs)) co_return stop_reason::cancelled;
        if (stop_requested(pd, stop_fired)) co_return stop_reason::condition;
        if (!ec) co_return stop_reason::deadline;
    }
    co_return std::nullopt;
}

// Races the attempt against the timer (the per-attempt timeout, also woken by
// stop-when). Whichever ends first cancels the other, which is awaited.
// Returns whether the timeout fired first.
template <class Raw, class Timer, class Fn>
boost::asio::awaitable<bool> race_attempt(const detail::policy_data& pd, std::optional<Timer>& timer, Fn& fn,
                                          attempt_context ctx, attempt_outcome<stored_t<Raw>>& out,
                                          bool& stop_fired) {
    namespace asio = boost::asio;
    using clock = typename Timer::clock_type;
    Timer& t = *co_await timer_of(timer);
    watchable::subscription stop_sub;
    if (ctx.timeout)
        t.expires_after(std::chrono::duration_cast<typename clock::duration>(*ctx.timeout));
    else
        t.expires_at(clock::time_point::max());
    wake_timer_on(pd.stop_when_.get(), stop_sub, t, &stop_fired);
    auto [order, spawn_error, outcome, timer_ec] =
        co_await asio::experimental::make_parallel_group(
            asio::co_spawn(co_await asio::this_coro::executor, guarded_attempt<Raw>(fn, ctx), asio::deferred),
            t.async_wait(asio::deferred))
            .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
    out = std::move(outcome);
    if (spawn_error) out.error = spawn_error;
    co_return order[0] == 1 && !timer_ec;
}

// The backoff sleep. It ends early when stop-when turns true, or when the gate
// turns true (the awaited resource is back: try at once).
template <class Timer>
boost::asio::awaitable<void> backoff_sleep(const detail::policy_data& pd, std::optional<Timer>& timer,
                                           nanoseconds delay, bool& stop_fired) {
    namespace asio = boost::asio;
    if (delay.count() == 0) {
        // Zero delay still yields, so a retry loop never starves the event loop.
        co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
        co_return;
    }
    Timer& t = *co_await timer_of(timer);
    watchable::subscription stop_sub, gate_sub;
    t.expires_after(std::chrono::duration_cast<typename Timer::clock_type::duration>(delay));
    wake_timer_on(pd.stop_when_.get(), stop_sub, t, &stop_fired);
    wake_timer_on(pd.attempt_when_.get(), gate_sub, t);
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;  // expired or woken: the caller looks at the state either way
}

// Everything between an attempt's end and the next wait, as plain code: its
// locals stay on the stack, out of the coroutine frame.
template <class R, class Classifier>
decision after_attempt(const detail::policy_data& pd, retry_state& state, retry_result<R>& res,
                       const Classifier& classify, attempt_outcome<R>& out, bool timed_out, bool cancelled,
                       bool stop_fired, const attempt_context& ctx, nanoseconds elapsed) {
    classification c;
    if (out.error) c = pd.exception_classifier_ ? pd.exception_classifier_(out.error) : classify_exception(out.error);
    else if (out.value) c = classify(*out.value);
    if (timed_out && c.kind != verdict::success) c = classification::retryable(error::attempt_timeout);
    if (cancelled && c.kind != verdict::cancelled) c = classification::cancelled(boost::asio::error::operation_aborted);
    res.value_ = std::move(out.value);
    res.exception_ = out.error;
    res.summary_.last_error = c.ec;

    // A stop-when condition that cut the attempt short (or holds now) is the
    // reason, unless the caller cancelled.
    decision d;
    if (!cancelled && c.kind != verdict::success && stop_requested(pd, stop_fired))
        d = decision{decision::action::stop, stop_reason::condition, {}, false};
    else
        d = state.on_outcome(c, elapsed);
    if (pd.hooks_.after_attempt) pd.hooks_.after_attempt(ctx, c, d);
    return d;
}

}  // namespace detail

/// Retries `attempt` under `policy` in the calling coroutine.
///
/// Completion: never throws for the expected failure paths; the result says
/// why it stopped. Executor: the calling coroutine's. Cancellation: terminal,
/// partial and total cancellation of the calling coroutine end the retry
/// promptly with stop_reason::cancelled (the sleep or the attempt in flight is
/// cancelled and awaited; a success that arrives after cancellation still
/// reports cancelled, with the value kept). `Timer` selects the clock, so
/// tests run on steadfast::manual_timer.
template <class Timer = boost::asio::steady_timer, class Attempt>
boost::asio::awaitable<retry_result_for<Attempt>> retry(retry_policy policy, Attempt attempt) {
    namespace asio = boost::asio;
    using parts = detail::attempt_parts<Attempt>;
    using raw_t = detail::attempt_raw_t<Attempt>;
    using R = detail::stored_t<raw_t>;
    using clock = typename Timer::clock_type;
    using std::chrono::duration_cast;

    const detail::policy_data& pd = policy.data();
    const auto cs = co_await asio::this_coro::cancellation_state;
    const auto start = clock::now();
    nanoseconds elapsed{};  // as of the latest clock read
    retry_state state(policy);
    retry_result<R> res;
    std::optional<Timer> timer;  // made on the first wait: an instant success needs none
    bool stop_fired = false;     // stop-when turned true during a wait or an attempt

    for (;;) {
        if (detail::is_cancelled(cs)) {
            res.summary_.reason = stop_reason::cancelled;
            break;
        }
        if (detail::stop_requested(pd, stop_fired)) {
            res.summary_.reason = stop_reason::condition;
            break;
        }
        if (pd.attempt_when_ && !pd.attempt_when_->value()) {
            const auto why = co_await detail::wait_for_gate(pd, timer, start, stop_fired);
            elapsed = duration_cast<nanoseconds>(clock::now() - start);
            if (why) {
                res.summary_.reason = *why;
                break;
            }
        }

        if (state.out_of_time(elapsed)) {
            res.summary_.reason = stop_reason::deadline;
            break;
        }
        const attempt_context ctx = state.begin_attempt(elapsed);
        if (pd.hooks_.before_attempt) pd.hooks_.before_attempt(ctx);

        detail::attempt_outcome<R> out;
        bool timed_out = false;
        if (ctx.timeout || pd.stop_when_) {
            timed_out = co_await detail::race_attempt<raw_t>(pd, timer, parts::fn(attempt), ctx, out, stop_fired);
        } else {
            // The fast path: the attempt runs inline in this frame.
            try {
                if constexpr (std::is_void_v<raw_t>) {
                    co_await parts::fn(attempt)(ctx);
                    out.value.emplace();
                } else {
                    out.value.emplace(co_await parts::fn(attempt)(ctx));
                }
            } catch (...) {
                out.error = std::current_exception();
            }
        }
        elapsed = duration_cast<nanoseconds>(clock::now() - start);

        const decision d = detail::after_attempt(pd, state, res, parts::classifier(attempt), out, timed_out,
                                                 detail::is_cancelled(cs), stop_fired, ctx, elapsed);
        if (d.what == decision::action::stop) {
            res.summary_.reason = d.reason;
            break;
        }
        co_await detail::backoff_sleep(pd, timer, d.delay, stop_fired);
        elapsed = duration_cast<nanoseconds>(clock::now() - start);
    }

    res.summary_.attempts = state.attempts();
    res.summary_.elapsed = elapsed;
    if (res.summary_.reason != stop_reason::success && pd.hooks_.on_give_up) pd.hooks_.on_give_up(res.summary_);
    co_return res;
}

namespace detail {

// async_retry as a composed operation: between attempts only this state and
// the timer's wait exist (no coroutine frame), so many pending retries stay
// small. Each attempt runs in a coroutine spawned for its duration.
//
// Asio's rules for a composed operation: the first step is posted to `ex`, so
// the operation never completes inside its initiating function (a loop of
// retries that stop at once does not grow the stack); every intermediate step
// is bound to `ex` (a strand stays a strand whatever the handler is bound
// to); the completion is dispatched to the handler's associated executor.
template <class Timer, class Attempt>
class retry_op {
    using parts = attempt_parts<Attempt>;
    using raw_t = attempt_raw_t<Attempt>;
    using R = stored_t<raw_t>;
    using clock = typename Timer::clock_type;
    enum class phase : unsigned char { starting, started, gate, attempting, sleeping, yielding };

    struct data {
        data(const boost::asio::any_io_executor& ex, retry_policy p, Attempt a)
            : policy(std::move(p)), attempt(std::move(a)), state(policy), timer(ex) {}
        retry_policy policy;
        Attempt attempt;
        retry_state state;
        retry_result<R> res;
        Timer timer;
        typename clock::time_point start{};
        nanoseconds elapsed{};
        attempt_context ctx;
        watchable::subscription stop_sub, gate_sub;
        phase at = phase::starting;
        bool stop_fired = false;  // stop-when turned true during a wait or an attempt
    };
    std::unique_ptr<data> d_;
    // The result, once finished: the state (timer, attempt, policy) is freed
    // before the hop to the handler's executor.
    std::unique_ptr<retry_result<R>> done_;

public:
    retry_op(const boost::asio::any_io_executor& ex, retry_policy p, Attempt a)
        : d_(std::make_unique<data>(ex, std::move(p), std::move(a))) {}

    template <class Self>
    void operator()(Self& self) {  // start; the first step; after a zero-delay yield; completing
        if (done_) {
            auto res = std::move(*done_);
            done_.reset();
            return self.complete(std::move(res));
        }
        if (d_->at == phase::starting) {
            self.reset_cancellation_state(boost::asio::enable_total_cancellation());
            d_->start = clock::now();
            d_->at = phase::started;
            return on_ex(self, [](auto&& h) { boost::asio::post(std::move(h)); });
        }
        next(self);
    }

    template <class Self>
    void operator()(Self& self, error_code ec) {  // the timer: gate wait or backoff sleep
        data& d = *d_;
        d.stop_sub.reset();
        d.gate_sub.reset();
        d.elapsed = elapsed();
        if (d.at == phase::gate && !cancelled(self) && !stop_requested() && !d.policy.data().attempt_when_->value()) {
            if (!ec) return finish(self, stop_reason::deadline);
            return wait_for_gate(self);  // woken for nothing: wait on
        }
        next(self);
    }

    template <class Self>
    void operator()(Self& self, std::exception_ptr e, attempt_outcome<R> out) {  // a plain attempt
        attempt_done(self, e, std::move(out), false);
    }

    template <class Self>
    void operator()(Self& self, std::array<std::size_t, 2> order, std::exception_ptr e, attempt_outcome<R> out,
                    error_code timer_ec) {  // an attempt raced against the timer
        d_->stop_sub.reset();
        attempt_done(self, e, std::move(out), order[0] == 1 && !timer_ec);
    }

private:
    template <class Self>
    static bool cancelled(Self& self) {
        return self.get_cancellation_state().cancelled() != boost::asio::cancellation_type::none;
    }
    bool stop_requested() const { return detail::stop_requested(d_->policy.data(), d_->stop_fired); }
    // Starts `op` with the operation as its handler, on `ex`: bound to it when
    // the handler's executor is another (a bound handler costs a copy of the
    // executor in every pending wait, so only then).
    // (An unbound handler's executor is `ex` with outstanding work tracked:
    // the same executor for this purpose.)
    template <class Self, class Op>
    void on_ex(Self& self, Op&& op) const {
        namespace asio = boost::asio;
        const auto ex = d_->timer.get_executor();
        const auto assoc = asio::get_associated_executor(self, ex);
        if (assoc == ex || assoc == asio::any_io_executor(asio::prefer(ex, asio::execution::outstanding_work.tracked)))
            std::forward<Op>(op)(std::move(self));
        else
            std::forward<Op>(op)(asio::bind_executor(ex, std::move(self)));
    }
    nanoseconds elapsed() const { return std::chrono::duration_cast<nanoseconds>(clock::now() - d_->start); }

    template <class Self>
    void next(Self& self) {
        data& d = *d_;
        const auto& pd = d.policy.data();
        if (cancelled(self)) return finish(self, stop_reason::cancelled);
        if (stop_requested()) return finish(self, stop_reason::condition);
        if (pd.attempt_when_ && !pd.attempt_when_->value()) {
            const auto limit = pd.stop_.deadline();
            d.timer.expires_at(limit ? detail::saturating_deadline(d.start, *limit) : clock::time_point::max());
            return wait_for_gate(self);
        }
        if (d.state.out_of_time(d.elapsed)) return finish(self, stop_reason::deadline);
        d.ctx = d.state.begin_attempt(d.elapsed);
        if (pd.hooks_.before_attempt) pd.hooks_.before_attempt(d.ctx);
        d.at = phase::attempting;
        auto ex = d.timer.get_executor();
        auto attempt = boost::asio::co_spawn(ex, guarded_attempt<raw_t>(parts::fn(d.attempt), d.ctx), boost::asio::deferred);
        if (!d.ctx.timeout && !pd.stop_when_) return on_ex(self, std::move(attempt));
        if (d.ctx.timeout)
            d.timer.expires_after(std::chrono::duration_cast<typename clock::duration>(*d.ctx.timeout));
        else
            d.timer.expires_at(clock::time_point::max());
        wake_timer_on(pd.stop_when_.get(), d.stop_sub, d.timer, &d.stop_fired);
        on_ex(self, [&](auto&& h) {
            boost::asio::experimental::make_parallel_group(std::move(attempt), d.timer.async_wait(boost::asio::deferred))
                .async_wait(boost::asio::experimental::wait_for_one(), std::move(h));
        });
    }

    template <class Self>
    void wait_for_gate(Self& self) {
        data& d = *d_;
        const auto& pd = d.policy.data();
        d.at = phase::gate;
        wake_timer_on(pd.stop_when_.get(), d.stop_sub, d.timer, &d.stop_fired);
        wake_timer_on(pd.attempt_when_.get(), d.gate_sub, d.timer);
        on_ex(self, [&d](auto&& h) { d.timer.async_wait(std::move(h)); });
    }

    template <class Self>
    void attempt_done(Self& self, std::exception_ptr e, attempt_outcome<R> out, bool timed_out) {
        data& d = *d_;
        const auto& pd = d.policy.data();
        if (e) out.error = e;
        d.elapsed = elapsed();
        const decision dec = after_attempt(pd, d.state, d.res, parts::classifier(d.attempt), out, timed_out,
                                           cancelled(self), d.stop_fired, d.ctx, d.elapsed);
        if (dec.what == decision::action::stop) return finish(self, dec.reason);
        if (dec.delay.count() > 0) {
            d.at = phase::sleeping;
            d.timer.expires_after(std::chrono::duration_cast<typename clock::duration>(dec.delay));
            wake_timer_on(pd.stop_when_.get(), d.stop_sub, d.timer, &d.stop_fired);
            wake_timer_on(pd.attempt_when_.get(), d.gate_sub, d.timer);
            return on_ex(self, [&d](auto&& h) { d.timer.async_wait(std::move(h)); });
        }
        d.at = phase::yielding;  // zero delay still yields to the event loop
        on_ex(self, [](auto&& h) { boost::asio::post(std::move(h)); });
    }

    template <class Self>
    void finish(Self& self, stop_reason why) {
        data& d = *d_;
        d.res.summary_.reason = why;
        d.res.summary_.attempts = d.state.attempts();
        d.res.summary_.elapsed = d.elapsed;
        const auto& pd = d.policy.data();
        if (why != stop_reason::success && pd.hooks_.on_give_up) pd.hooks_.on_give_up(d.res.summary_);
        d.stop_sub.reset();
        d.gate_sub.reset();
        // Steps run on `ex`; the handler runs on its own associated executor
        // (at once when that is where this step runs).
        done_ = std::make_unique<retry_result<R>>(std::move(d.res));
        d_.reset();
        boost::asio::dispatch(std::move(self));
    }
};

}  // namespace detail

/// The same as a composed asynchronous operation taking any completion token.
///
/// Completion signature: void(retry_result_for<Attempt>). Executor: every step
/// (attempts, hooks, condition checks) runs on `ex` (use a strand on a
/// multi-threaded io_context), the first one posted, so the operation never
/// completes inside this call; the completion handler runs on its associated
/// executor (default: `ex`). Cancellation: terminal, partial and total,
/// through the token's associated cancellation slot, passed on to the attempt
/// in flight (whose coroutine lets all three through). Emit it on `ex`: the
/// steps it races with run there. Between attempts the operation holds only
/// its state and a timer wait (no coroutine frame).
template <class Timer = boost::asio::steady_timer, class Executor, class Attempt,
          class CompletionToken = boost::asio::default_completion_token_t<Executor>>
    requires(boost::asio::execution::is_executor<Executor>::value || boost::asio::is_executor<Executor>::value)
auto async_retry(const Executor& ex, retry_policy policy, Attempt attempt, CompletionToken&& token = {}) {
    using result_t = retry_result_for<Attempt>;
    return boost::asio::async_compose<CompletionToken, void(result_t)>(
        detail::retry_op<Timer, Attempt>(boost::asio::any_io_executor(ex), std::move(policy), std::move(attempt)), token,
        ex);
}

/// The same on an execution context (an io_context, say): its executor.
template <class Timer = boost::asio::steady_timer, class ExecutionContext, class Attempt,
          class CompletionToken = boost::asio::default_completion_token_t<typename ExecutionContext::executor_type>>
    requires std::is_convertible_v<ExecutionContext&, boost::asio::execution_context&>
auto async_retry(ExecutionContext& ctx, retry_policy policy, Attempt attempt, CompletionToken&& token = {}) {
    return steadfast::async_retry<Timer>(ctx.get_executor(), std::move(policy), std::move(attempt),
                                         std::forward<CompletionToken>(token));
}

}  // namespace steadfast
