// Hedging (gRPC A6, Polly v8): one call, up to N attempts in flight.
//
// The first attempt starts at once; while it has not answered, the next
// starts after the hedging delay, up to `max_attempts` in all. A retryable
// failure starts the next one at once; the first success wins and every
// other attempt still in flight receives every type of cancellation
// (terminal, partial and total), its late result dropped; a permanent
// failure ends the call the same way. A server's pushback (a retryable
// failure with a delay hint, such as Retry-After) stops further hedges; each
// hedge draws on the retry budget. Attempts see their number and whether
// they are hedges (attempt_context::hedge).
//
// The decisions are detail::hedge_fsm's (detail/hedge_fsm.hpp, tested on
// made-up times); this file carries them out for one hedged call, which a
// pipeline (pipeline.hpp) runs as one attempt of its retry. Structured: the
// call ends only when every attempt it started has ended, so nothing it
// started outlives it.
#pragma once

#include <steadfast/engine/detail/hedge_fsm.hpp>
#include <steadfast/engine/error.hpp>
#include <steadfast/engine/policy.hpp>
#include <steadfast/engine/retry.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <utility>

namespace steadfast {

/// How a pipeline hedges each of its attempts (basic_pipeline::with_hedging).
struct hedging_options {
    /// In all, the first attempt included: 1 (no hedge) to 8.
    std::uint32_t max_attempts = 2;
    /// Since the attempt before, while it has not answered. >= 0.
    nanoseconds delay = std::chrono::milliseconds(100);
};

namespace detail {

inline constexpr std::uint32_t max_hedged_attempts = 8;

// What one hedged call needs from its pipeline: the settings, the
// per-attempt timeout, the budget hedges draw on and the policy that
// classifies thrown exceptions. Points into the pipeline, which the driver
// keeps alive.
struct hedge_config {
    hedging_options options;
    std::optional<nanoseconds> timeout;  // each attempt's, hedges included
    const retry_policy* policy = nullptr;
};

// The attempts of one hedged call, in the call's frame: each one's
// cancellation signal, outcome and deadline, and the order they ended in.
template <class Timer, class R>
struct hedge_group {
    using clock = typename Timer::clock_type;
    struct slot {
        boost::asio::cancellation_signal signal;
        attempt_outcome<R> out;
        classification how;
        typename clock::time_point deadline = clock::time_point::max();
        bool running = false;
        bool timed_out = false;
    };
    explicit hedge_group(const boost::asio::any_io_executor& ex) : timer(ex) {}

    // An attempt ended (its completion handler, on the call's executor):
    // kept, queued, and the call woken.
    void ended(std::uint32_t k, std::exception_ptr e, attempt_outcome<R>&& out) {
        slot& s = slots[k - 1];
        s.out = std::move(out);
        if (e) s.out.error = e;
        s.running = false;
        --running;
        arrived[arrivals++] = static_cast<unsigned char>(k);
        timer.cancel();
    }

    Timer timer;  // the hedging delay and the attempts' timeouts, whichever comes first
    std::array<slot, max_hedged_attempts> slots;
    std::array<unsigned char, max_hedged_attempts> arrived{};  // attempt numbers, in the order they ended
    std::uint32_t arrivals = 0, seen = 0, running = 0;
};

template <class R, class Classifier>
classification classify_outcome(const attempt_outcome<R>& out, const Classifier& classify, const retry_policy& p) {
    if (out.error) return p.classify(out.error);
    if (out.value) return classify(*out.value);
    return classification::retryable(error::exception_thrown);
}

// One hedged call: returns (or throws) what the winning attempt returned (or
// threw), or else the last one to fail; an attempt cut short by its own
// timeout ends the call, if it is the last, with
// system_error(error::attempt_timeout) (retryable). Cancelled from outside
// (the retry's cancellation, timeout or stop-when, any type), it cancels
// every attempt and returns once they have all ended (whichever types of
// cancellation the calling coroutine's filter lets through: in a pipeline's
// retry, all three whenever the attempt is watched).
template <class Timer, class Raw, class Fn, class Classifier>
boost::asio::awaitable<Raw> run_hedged(const hedge_config& cfg, Fn& fn, const Classifier& classify,
                                       attempt_context ctx) {
    namespace asio = boost::asio;
    using R = stored_t<Raw>;
    using clock = typename Timer::clock_type;
    // It waits for its attempts whatever happens, so its waits must not
    // throw once cancelled. (The setting belongs to the whole coroutine
    // stack: it is put back before returning. The cancellation filter is
    // left as the caller set it: in retry()'s fast path this runs inline in
    // the caller's coroutine; in a watched attempt, guarded_attempt lets all
    // three types through.)
    const bool throws = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    const auto cs = co_await asio::this_coro::cancellation_state;
    const asio::any_io_executor ex = co_await asio::this_coro::executor;
    hedge_group<Timer, R> g(ex);
    // (The retry around the call refunds its success: not twice.)
    hedge_fsm fsm({cfg.options.max_attempts, cfg.options.delay, false}, cfg.policy->budget().get());
    const auto t0 = clock::now();
    std::optional<nanoseconds> hedge_at;  // since t0
    std::uint32_t last = 0;               // the last attempt to end
    bool cancel_seen = false;
    const auto since = [&t0] { return std::chrono::duration_cast<nanoseconds>(clock::now() - t0); };
    const auto start_one = [&](std::uint32_t k) {
        auto& s = g.slots[k - 1];
        attempt_context c = ctx;
        c.hedge = k - 1;
        if (cfg.timeout) {
            s.deadline = saturating_deadline(clock::now(), *cfg.timeout);
            if (!c.timeout || *cfg.timeout < *c.timeout) c.timeout = cfg.timeout;
        }
        asio::co_spawn(
            ex, guarded_attempt<Raw>(fn, c),
            asio::bind_cancellation_slot(s.signal.slot(), [&g, k](std::exception_ptr e, attempt_outcome<R> out) {
                g.ended(k, e, std::move(out));
            }));
        // (After co_spawn, which may throw, and never completes inline.)
        s.running = true;
        ++g.running;
    };
    // Carries out a step: cancel the others, start one, (re)arm or disarm.
    const auto apply = [&](const hedge_step& st) {
        if (st.cancel_others)
            for (auto& s : g.slots)
                if (s.running) s.signal.emit(asio::cancellation_type::all);
        if (st.timer_at)
            hedge_at = st.timer_at;
        else if (st.disarm_timer)
            hedge_at.reset();
        if (st.start) start_one(st.start);
    };

    // One turn of decisions: the outcomes that came, the caller's
    // cancellation, the hedging timer, the attempts' timeouts; `wake` is
    // when the next turn is due if nothing comes first.
    enum class next { finished, again, wait };
    auto wake = clock::time_point::max();
    const auto decide = [&]() -> next {
        while (g.seen < g.arrivals) {
            const std::uint32_t k = g.arrived[g.seen++];
            auto& s = g.slots[k - 1];
            s.how = classify_outcome(s.out, classify, *cfg.policy);
            if (s.timed_out && s.how.kind != verdict::success)
                s.how = classification::retryable(error::attempt_timeout);
            last = k;
            apply(fsm.on_outcome(k, s.how, since()));
        }
        if (!cancel_seen && is_cancelled(cs)) {
            cancel_seen = true;
            apply(fsm.cancel());
        }
        if (fsm.finished() && g.running == 0) return next::finished;
        const auto now = clock::now();
        if (!fsm.finished() && hedge_at && t0 + *hedge_at <= now) {
            hedge_at.reset();
            apply(fsm.on_timer(since()));
            return next::again;
        }
        wake = clock::time_point::max();
        if (!fsm.finished() && hedge_at) wake = t0 + *hedge_at;
        for (auto& s : g.slots) {
            if (!s.running || s.timed_out) continue;
            if (s.deadline <= now) {
                s.timed_out = true;  // its outcome, when it comes, is a timeout
                s.signal.emit(asio::cancellation_type::all);
            } else if (s.deadline < wake) {
                wake = s.deadline;
            }
        }
        return next::wait;
    };
    // What user code threw (a classifier), or an attempt that could not
    // start: every attempt is cancelled and waited for, then it is rethrown
    // (the attempts' completions refer to this frame).
    std::exception_ptr failure;
    try {
        apply(fsm.start(since()));
    } catch (...) {
        failure = std::current_exception();
    }
    for (;;) {
        next n = next::wait;
        if (!failure) {
            try {
                n = decide();
            } catch (...) {
                failure = std::current_exception();
            }
        }
        if (failure) {
            for (auto& s : g.slots)
                if (s.running) s.signal.emit(asio::cancellation_type::all);
            if (g.running == 0) break;
            wake = clock::time_point::max();
            n = next::wait;
        }
        if (n == next::finished) break;
        if (n == next::again) continue;
        g.timer.expires_at(wake);
        co_await g.timer.async_wait(asio::as_tuple(asio::use_awaitable));
    }
    co_await asio::this_coro::throw_if_cancelled(throws);
    if (failure) std::rethrow_exception(failure);
    // The winner, or else the last to fail.
    auto& s = g.slots[(fsm.result_of() ? fsm.result_of() : last) - 1];
    if (s.timed_out && s.how.kind != verdict::success)
        throw boost::system::system_error(make_error_code(error::attempt_timeout));
    if (s.out.error) std::rethrow_exception(s.out.error);
    if constexpr (!std::is_void_v<Raw>) co_return std::move(*s.out.value);
}

// The attempt a pipeline's retry makes when it hedges: one hedged call of
// the user's attempt. Its results are classified by the user's classifier
// (see the attempt_parts specialisation below).
template <class Timer, class Attempt>
struct hedged_fn {
    using parts = attempt_parts<Attempt>;
    using classifier_type = typename parts::classifier_type;

    hedged_fn(const hedge_config* c, Attempt a) : cfg(c), attempt(std::move(a)), classify(parts::classifier(attempt)) {}

    auto operator()(const attempt_context& ctx) {
        return run_hedged<Timer, attempt_raw_t<Attempt>>(*cfg, parts::fn(attempt), classify, ctx);
    }

    const hedge_config* cfg;
    Attempt attempt;
    classifier_type classify;
};

template <class Timer, class A>
struct attempt_parts<hedged_fn<Timer, A>> {
    using fn_type = hedged_fn<Timer, A>;
    using classifier_type = typename hedged_fn<Timer, A>::classifier_type;
    static fn_type& fn(fn_type& a) noexcept { return a; }
    static const classifier_type& classifier(fn_type& a) noexcept { return a.classify; }
};

}  // namespace detail

}  // namespace steadfast
