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
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
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

// Runs one attempt and turns a thrown exception into a value.
template <class Raw, class Fn>
boost::asio::awaitable<attempt_outcome<stored_t<Raw>>> guarded_attempt(Fn& fn, attempt_context ctx) {
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

inline bool is_cancelled(const boost::asio::cancellation_state& cs) noexcept {
    return cs.cancelled() != boost::asio::cancellation_type::none;
}

}  // namespace detail

/// The result type of retrying attempt `A`.
template <class A>
using retry_result_for = retry_result<detail::stored_t<detail::attempt_raw_t<A>>>;

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

    auto& fn = parts::fn(attempt);
    auto&& classify = parts::classifier(attempt);
    const detail::policy_data& pd = policy.data();
    const auto cs = co_await asio::this_coro::cancellation_state;
    const auto ex = co_await asio::this_coro::executor;
    const auto start = clock::now();
    auto elapsed = [&] { return duration_cast<nanoseconds>(clock::now() - start); };

    retry_state state(policy);
    retry_result<R> res;
    std::optional<Timer> timer;  // made on the first wait: an instant success needs none
    auto get_timer = [&]() -> Timer& {
        if (!timer) timer.emplace(ex);
        return *timer;
    };
    auto finish = [&](stop_reason why) -> retry_result<R> {
        res.summary_.reason = why;
        res.summary_.attempts = state.attempts();
        res.summary_.elapsed = elapsed();
        if (why != stop_reason::success && pd.hooks_.on_give_up) pd.hooks_.on_give_up(res.summary_);
        return std::move(res);
    };
    auto stop_requested = [&] { return pd.stop_when_ && pd.stop_when_->value(); };
    watchable::subscription stop_sub, gate_sub;
    auto wake_on_stop = [&](Timer& t) {
        if (pd.stop_when_)
            pd.stop_when_->subscribe(stop_sub, [&t](bool v) {
                if (v) t.cancel();
            });
    };

    for (;;) {
        if (detail::is_cancelled(cs)) co_return finish(stop_reason::cancelled);
        if (stop_requested()) co_return finish(stop_reason::condition);

        // Gate: make no attempt while attempt_when is false; wait for it to open,
        // bounded by the stop condition's deadline and by stop-when.
        if (pd.attempt_when_ && !pd.attempt_when_->value()) {
            Timer& t = get_timer();
            if (auto limit = pd.stop_.deadline())
                t.expires_at(start + duration_cast<typename clock::duration>(*limit));
            else
                t.expires_at(clock::time_point::max());
            wake_on_stop(t);
            pd.attempt_when_->subscribe(gate_sub, [&t](bool v) {
                if (v) t.cancel();
            });
            while (!pd.attempt_when_->value()) {
                auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
                if (detail::is_cancelled(cs)) co_return finish(stop_reason::cancelled);
                if (stop_requested()) co_return finish(stop_reason::condition);
                if (!ec) co_return finish(stop_reason::deadline);
            }
            stop_sub.reset();
            gate_sub.reset();
        }

        const attempt_context ctx = state.begin_attempt(elapsed());
        if (pd.hooks_.before_attempt) pd.hooks_.before_attempt(ctx);

        detail::attempt_outcome<R> out;
        bool timed_out = false;
        if (ctx.timeout || pd.stop_when_) {
            // Race the attempt against the timer; stop-when cancels the timer,
            // and whichever ends first cancels the other, which is awaited.
            Timer& t = get_timer();
            if (ctx.timeout)
                t.expires_after(duration_cast<typename clock::duration>(*ctx.timeout));
            else
                t.expires_at(clock::time_point::max());
            wake_on_stop(t);
            auto [order, spawn_error, outcome, timer_ec] =
                co_await asio::experimental::make_parallel_group(
                    asio::co_spawn(ex, detail::guarded_attempt<raw_t>(fn, ctx), asio::deferred),
                    t.async_wait(asio::deferred))
                    .async_wait(asio::experimental::wait_for_one(), asio::use_awaitable);
            stop_sub.reset();
            out = std::move(outcome);
            if (spawn_error) out.error = spawn_error;
            timed_out = order[0] == 1 && !timer_ec;
        } else {
            out = co_await detail::guarded_attempt<raw_t>(fn, ctx);
        }

        classification c;
        if (out.error) {
            c = pd.exception_classifier_ ? pd.exception_classifier_(out.error) : classify_exception(out.error);
        } else if (out.value) {
            c = classify(*out.value);
        }
        if (timed_out && c.kind != verdict::success) c = classification::retryable(error::attempt_timeout);
        if (detail::is_cancelled(cs) && c.kind != verdict::cancelled)
            c = classification::cancelled(asio::error::operation_aborted);
        res.value_ = std::move(out.value);
        res.exception_ = out.error;
        res.summary_.last_error = c.ec;

        decision d;
        if (c.kind != verdict::success && c.kind != verdict::cancelled && stop_requested())
            d = decision{decision::action::stop, stop_reason::condition, {}, false};
        else
            d = state.on_outcome(c, elapsed());
        if (pd.hooks_.after_attempt) pd.hooks_.after_attempt(ctx, c, d);
        if (d.what == decision::action::stop) co_return finish(d.reason);

        // Backoff sleep. It ends early when stop-when turns true, or when the
        // gate turns true (the awaited resource is back: try at once).
        if (d.delay.count() > 0) {
            Timer& t = get_timer();
            t.expires_after(duration_cast<typename clock::duration>(d.delay));
            wake_on_stop(t);
            if (pd.attempt_when_)
                pd.attempt_when_->subscribe(gate_sub, [&t](bool v) {
                    if (v) t.cancel();
                });
            auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
            (void)ec;
            stop_sub.reset();
            gate_sub.reset();
        } else {
            // Zero delay still yields, so a retry loop never starves the event loop.
            co_await asio::post(ex, asio::use_awaitable);
        }
    }
}

/// The same as a composed asynchronous operation taking any completion token.
///
/// Completion signature: void(retry_result_for<Attempt>). Executor: `ex` (use
/// a strand on a multi-threaded io_context). Cancellation: terminal, partial
/// and total, through the token's associated cancellation slot.
template <class Timer = boost::asio::steady_timer, class Executor, class Attempt,
          class CompletionToken = boost::asio::default_completion_token_t<Executor>>
auto async_retry(const Executor& ex, retry_policy policy, Attempt attempt, CompletionToken&& token = {}) {
    namespace asio = boost::asio;
    using result_t = retry_result_for<Attempt>;
    return asio::co_spawn(ex, retry<Timer>(std::move(policy), std::move(attempt)), asio::deferred)(
        asio::deferred([](std::exception_ptr e, result_t r) {
            // Only a failure outside the expected paths (bad_alloc, a throwing hook) lands here.
            if (e) std::rethrow_exception(e);
            return asio::deferred.values(std::move(r));
        }))(std::forward<CompletionToken>(token));
}

}  // namespace steadfast
