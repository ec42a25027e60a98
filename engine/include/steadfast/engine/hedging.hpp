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
//
// What a call costs when its first attempt answers in time: that attempt in
// a coroutine of its own (awaited directly: its completion resumes the call,
// nothing is posted) and one deadline in the per-context timeout service of
// detail/attempt_watch.hpp (a lock and a tree insertion, no system call).
// Hedges, their completions and the deadlines are handled by callbacks on
// the call's executor while it waits; only a call that has to wait for
// hedges after its first attempt ended waits on a timer of its own.
//
// Every piece runs on the call's executor: on a multi-threaded io_context,
// run the call on a strand.
#pragma once

#include <steadfast/engine/detail/attempt_watch.hpp>
#include <steadfast/engine/detail/hedge_fsm.hpp>
#include <steadfast/engine/error.hpp>
#include <steadfast/engine/policy.hpp>
#include <steadfast/engine/retry.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/cancellation_state.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <type_traits>
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

template <class R, class Classifier>
classification classify_outcome(const attempt_outcome<R>& out, const Classifier& classify, const retry_policy& p) {
    if (out.error) return p.classify(out.error);
    if (out.value) return classify(*out.value);
    return classification::retryable(error::exception_thrown);
}

// A hedge runs a copy of the attempt callable in its own frame: at
// io_context shutdown, Asio destroys pending operations in no set order, so
// a hedge may be destroyed after the call (and the retry holding the
// callable) are gone. (The first attempt uses the callable in place: the
// call awaits it, so its handler owns the call.)
template <class Raw, class Fn>
boost::asio::awaitable<attempt_outcome<stored_t<Raw>>> owned_attempt(Fn fn, attempt_context ctx) {
    co_return co_await guarded_attempt<Raw>(fn, ctx);
}

// The state of one hedged call and every decision's carrying out. Lives in
// run_hedged's frame; everything here runs on the call's executor.
template <class Timer, class Raw, class Fn, class Classifier>
class hedged_call {
public:
    using R = stored_t<Raw>;
    using clock = typename Timer::clock_type;
    using time_point = typename clock::time_point;
    using watch = attempt_watch<Timer>;

    hedged_call(const hedge_config& cfg, Fn& fn, const Classifier& classify, const attempt_context& ctx,
                boost::asio::any_io_executor ex)
        : cfg_(cfg),
          fn_(fn),
          classify_(classify),
          ctx_(ctx),
          ex_(std::move(ex)),
          fsm_({cfg.options.max_attempts, cfg.options.delay, false}, cfg.policy->budget().get()),
          t0_(clock::now()) {}
    hedged_call(const hedged_call&) = delete;
    hedged_call& operator=(const hedged_call&) = delete;
    // Normally every attempt has ended by now. If the call's frame goes
    // while hedges still run (its first attempt's handler destroyed
    // uncalled: at io_context shutdown, where the hedges go too in no set
    // order, or an operation that drops its handler), they complete into
    // nothing. (Not cancelled from here: at shutdown their signals may
    // already be gone. The one path that leaves them running on a live
    // context, a wait that cannot start, cancels them first: fail().)
    ~hedged_call() {
        if (alive_) *alive_ = nullptr;
        release_deadline();
    }

    // Starts the call: attempt 1 is set up for the coroutine to start.
    void begin() {
        apply(fsm_.start(nanoseconds::zero()));  // (t0_ was read just now)
        if (!slots_[0].running) throw std::logic_error("hedging: the first attempt did not start");
    }

    boost::asio::cancellation_signal& first_signal() noexcept { return first_signal_; }
    attempt_context context_for(std::uint32_t k) const {
        attempt_context c = ctx_;
        c.hedge = k - 1;
        // A hedge starts later than the call: its context says so. (The
        // first starts with the call.)
        if (k > 1) {
            const nanoseconds late = since();
            c.elapsed += late;
            if (c.time_left) c.time_left = std::max(nanoseconds::zero(), *c.time_left - late);
            if (c.timeout) c.timeout = std::max(nanoseconds::zero(), *c.timeout - late);
        }
        if (cfg_.timeout && (!c.timeout || *cfg_.timeout < *c.timeout)) c.timeout = cfg_.timeout;
        return c;
    }

    // Attempt k ended (the first one from the coroutine, the others from
    // their completions).
    void ended(std::uint32_t k, std::exception_ptr e, attempt_outcome<R>&& out) {
        slot& s = slots_[k - 1];
        s.out = std::move(out);
        if (e) s.out.error = e;
        s.running = false;
        s.signal = nullptr;
        --running_;
        last_ = k;
        if (!failure_) {
            try {
                classification how = classify_outcome(s.out, classify_, *cfg_.policy);
                s.succeeded = how.kind == verdict::success;
                if (s.timed_out && !s.succeeded) how = classification::retryable(error::attempt_timeout);
                // (The time matters only for a hedge this outcome starts.)
                apply(fsm_.on_outcome(k, how, how.kind == verdict::retryable ? since() : nanoseconds::zero()));
            } catch (...) {
                fail(std::current_exception());
            }
        }
        poke();
    }
    // Attempt 1 could not be started (it may have been set up already).
    void not_started(std::exception_ptr e) {
        if (slots_[0].running) {
            slots_[0].running = false;
            --running_;
        }
        fail(std::move(e));
    }

    // The caller's cancellation (its forwarder, or seen by the coroutine).
    void cancel_from_caller() {
        if (cancelled_) return;
        cancelled_ = true;
        if (!failure_) {
            try {
                apply(fsm_.cancel());
            } catch (...) {
                fail(std::current_exception());
            }
        }
        poke();
    }
    void fail(std::exception_ptr e) {
        if (!failure_) failure_ = std::move(e);
        cancel_all();
        hedge_at_.reset();
        release_deadline();
    }

    bool done() const noexcept { return running_ == 0 && (fsm_.finished() || failure_); }
    const std::exception_ptr& failure() const noexcept { return failure_; }

    // The slow path's wait: until a callback pokes it.
    boost::asio::awaitable<void> wait() {
        namespace asio = boost::asio;
        if (!timer_) timer_.emplace(ex_);
        timer_->expires_at(time_point::max());
        waiting_ = true;
        // Not bound to the caller's slot: the forwarder stays there.
        co_await timer_->async_wait(
            asio::bind_cancellation_slot(asio::cancellation_slot(), asio::as_tuple(asio::use_awaitable)));
        waiting_ = false;
    }

    // The caller's cancellation, forwarded to the call while it waits.
    void forward_from(boost::asio::cancellation_slot caller) {
        if (caller.is_connected()) caller.assign([this](boost::asio::cancellation_type) { cancel_from_caller(); });
    }

    // The call's result: the winner, or else the last to end. Whether it
    // ended by its own timeout goes to `timed_out` (the retry reads it as it
    // reads its own attempt timeouts).
    attempt_outcome<R>& result(bool& timed_out) {
        slot& s = slots_[(fsm_.result_of() ? fsm_.result_of() : last_) - 1];
        timed_out = s.timed_out && !s.succeeded;
        return s.out;
    }

    void finish() noexcept { release_deadline(); }

private:
    struct slot {
        boost::asio::cancellation_signal* signal = nullptr;  // while running
        attempt_outcome<R> out;
        time_point deadline = time_point::max();
        bool running = false;
        bool timed_out = false;
        bool cancel_sent = false;
        bool succeeded = false;
    };

    nanoseconds since() const { return std::chrono::duration_cast<nanoseconds>(clock::now() - t0_); }

    // Carries out a step: cancel the others, start one, (re)arm or disarm.
    void apply(const hedge_step& st) {
        if (st.cancel_others) cancel_all();
        if (st.timer_at)
            hedge_at_ = st.timer_at;
        else if (st.disarm_timer)
            hedge_at_.reset();
        if (st.start) start(st.start);
        rearm();
    }

    void start(std::uint32_t k) {
        namespace asio = boost::asio;
        slot& s = slots_[k - 1];
        if (cfg_.timeout) s.deadline = saturating_deadline(k == 1 ? t0_ : clock::now(), *cfg_.timeout);
        if (k == 1) {  // the coroutine starts it, on first_signal()
            s.signal = &first_signal_;
            s.running = true;
            ++running_;
            return;
        }
        // A hedge reaches the call through `alive_`, which the call empties
        // when it goes: a hedge still running then (the call's frame
        // destroyed without its first attempt completing) completes into
        // nothing.
        if (!alive_) alive_ = std::make_shared<hedged_call*>(this);
        std::shared_ptr<watch> w = attempt_timeouts<Timer>::of(ex_).lease(ex_);
        asio::cancellation_signal* sig = &w->signal;
        // Recorded before co_spawn: the hedge may run, and even end, inside it.
        s.signal = sig;
        s.running = true;
        ++running_;
        try {
            asio::co_spawn(
                ex_, owned_attempt<Raw>(fn_, context_for(k)),
                asio::bind_cancellation_slot(sig->slot(), [alive = alive_, k, w = std::move(w)](
                                                              std::exception_ptr e, attempt_outcome<R> out) mutable {
                    if (hedged_call* call = *alive) call->ended(k, e, std::move(out));
                    w->service->give_back(std::move(w));
                }));
        } catch (...) {
            if (s.running) {  // it did not start
                s.running = false;
                s.signal = nullptr;
                --running_;
            }
            throw;
        }
    }

    void cancel(slot& s) {
        if (!s.running || s.cancel_sent) return;
        s.cancel_sent = true;
        s.signal->emit(boost::asio::cancellation_type::all);
    }
    void cancel_all() {
        for (slot& s : slots_) cancel(s);
    }

    // The earliest deadline (the next hedge, an attempt's timeout) goes to
    // the context's timeout service, which calls on_deadline() then.
    void rearm() {
        auto wake = time_point::max();
        if (!fsm_.finished() && hedge_at_) wake = saturating_deadline(t0_, *hedge_at_);
        for (const slot& s : slots_)
            if (s.running && !s.timed_out && s.deadline < wake) wake = s.deadline;
        if (wake == armed_) return;
        if (wake == time_point::max()) {
            if (deadline_) deadline_->service->remove(*deadline_);
            armed_ = wake;
            return;
        }
        if (!deadline_) {
            deadline_ = attempt_timeouts<Timer>::of(ex_).lease(ex_);
            deadline_->signal.slot().assign([this](boost::asio::cancellation_type) { on_deadline(); });
        }
        deadline_->attempt = ++tag_;
        deadline_->service->add(*deadline_, wake, tag_);
        armed_ = wake;
    }

    void on_deadline() {
        armed_ = time_point::max();
        if (failure_) return;
        try {
            const auto now = clock::now();
            if (!fsm_.finished() && hedge_at_ && saturating_deadline(t0_, *hedge_at_) <= now) {
                hedge_at_.reset();
                apply(fsm_.on_timer(since()));
                if (failure_) return poke();  // (a hedge that ended inside failed the call)
            }
            for (slot& s : slots_) {
                if (s.running && !s.timed_out && s.deadline <= now) {
                    s.timed_out = true;  // its outcome, when it comes, is a timeout
                    cancel(s);
                }
            }
            rearm();
        } catch (...) {
            fail(std::current_exception());
        }
        poke();
    }

    void release_deadline() noexcept {
        if (!deadline_) return;
        armed_ = time_point::max();
        deadline_->service->give_back(std::move(deadline_));  // its slot (this) cleared
    }

    void poke() {
        if (waiting_) timer_->cancel();
    }

    const hedge_config& cfg_;
    Fn& fn_;
    const Classifier& classify_;
    attempt_context ctx_;
    boost::asio::any_io_executor ex_;
    hedge_fsm fsm_;
    time_point t0_;
    std::optional<nanoseconds> hedge_at_;  // the next hedge, since t0_
    std::array<slot, max_hedged_attempts> slots_;
    boost::asio::cancellation_signal first_signal_;
    std::shared_ptr<watch> deadline_;  // leased on the first deadline
    time_point armed_ = time_point::max();
    std::uint64_t tag_ = 0;
    std::optional<Timer> timer_;           // the slow path's, made on first use
    std::exception_ptr failure_;           // user code threw, or an attempt could not start
    std::shared_ptr<hedged_call*> alive_;  // the hedges' way to this: made at the first hedge
    std::uint32_t running_ = 0, last_ = 0;
    bool cancelled_ = false, waiting_ = false;
};

// One hedged call: returns (or throws) what the winning attempt returned (or
// threw), or else what the last one to end did; `timed_out` says whether
// that one was cut short by its own timeout. Cancelled from outside (the
// retry's cancellation, timeout or stop-when: whichever types the calling
// coroutine's filter lets through; in a watched retry attempt, all three),
// it cancels every attempt and returns once they have all ended. What user
// code throws (a classifier) ends it the same way, then is rethrown.
template <class Timer, class Raw, class Fn, class Classifier>
boost::asio::awaitable<Raw> run_hedged(const hedge_config& cfg, Fn& fn, const Classifier& classify, attempt_context ctx,
                                       bool& timed_out) {
    namespace asio = boost::asio;
    // It waits for its attempts whatever happens, so its waits must not
    // throw once cancelled. (The setting belongs to the whole coroutine
    // stack: it is put back before returning. The cancellation filter is
    // left as the caller set it: in retry()'s fast path this runs inline in
    // the caller's coroutine.)
    const bool throws = co_await asio::this_coro::throw_if_cancelled();
    co_await asio::this_coro::throw_if_cancelled(false);
    const auto cs = co_await asio::this_coro::cancellation_state;
    const asio::any_io_executor ex = co_await asio::this_coro::executor;
    timed_out = false;
    hedged_call<Timer, Raw, Fn, Classifier> call(cfg, fn, classify, ctx, ex);
    try {
        if (is_cancelled(cs)) throw boost::system::system_error(make_error_code(boost::asio::error::operation_aborted));
        call.begin();
    } catch (...) {
        call.not_started(std::current_exception());  // before any attempt runs
    }
    if (!call.failure()) {
        // The first attempt, awaited here: when it answers in time this is
        // the whole call. The caller's cancellation reaches the call through
        // the forwarder (cleared again when the attempt's completion resumes
        // this coroutine).
        const slot_clearer forwarder{cs.slot()};
        bool spawned = false;
        try {
            call.forward_from(forwarder.slot);
            auto [e, out] = co_await asio::co_spawn(
                ex, guarded_attempt<Raw>(fn, call.context_for(1)),
                asio::bind_cancellation_slot(call.first_signal().slot(), asio::as_tuple(asio::use_awaitable)));
            spawned = true;
            call.ended(1, e, std::move(out));
        } catch (...) {
            if (!spawned) call.not_started(std::current_exception());
        }
    }
    // Hedges still running (or about to start): wait for them, woken by
    // their completions, the deadlines and the caller's cancellation (its
    // forwarder cleared however this ends).
    {
        const slot_clearer forwarder{cs.slot()};
        while (!call.done()) {
            try {
                call.forward_from(forwarder.slot);
                if (is_cancelled(cs)) call.cancel_from_caller();
                if (call.done()) break;
                co_await call.wait();
            } catch (...) {
                // No way to wait (out of memory): the hedges are cancelled
                // and left to complete into nothing (see ~hedged_call).
                call.fail(std::current_exception());
                break;
            }
        }
    }
    call.finish();
    co_await asio::this_coro::throw_if_cancelled(throws);
    if (call.failure()) std::rethrow_exception(call.failure());
    auto& out = call.result(timed_out);
    if (out.error) std::rethrow_exception(out.error);
    if constexpr (!std::is_void_v<Raw>) co_return std::move(*out.value);
}

// The attempt a pipeline's retry makes when it hedges: one hedged call of
// the user's attempt. Its results are classified by the user's classifier
// (each hedge's outcome, then the call's result once more by the retry: a
// classifier with side effects sees the result twice), and a hedge that
// timed out is told to the retry as its own attempt timeouts are (see the
// attempt_parts specialisation below). A hedge's context points at the
// retry's previous outcome, as the first attempt's does: valid while the
// hedge runs (not in destructors run when an io_context is destroyed).
template <class Timer, class Attempt>
struct hedged_fn {
    using parts = attempt_parts<Attempt>;
    using classifier_type = typename parts::classifier_type;
    static_assert(std::is_copy_constructible_v<typename parts::fn_type>,
                  "hedging runs a copy of the attempt for each hedge: the attempt must be copyable");

    hedged_fn(const hedge_config* c, Attempt a) : cfg(c), attempt(std::move(a)), classify(parts::classifier(attempt)) {}

    auto operator()(const attempt_context& ctx) {
        timed_out = false;  // (also when the call cannot start)
        return run_hedged<Timer, attempt_raw_t<Attempt>>(*cfg, parts::fn(attempt), classify, ctx, timed_out);
    }

    const hedge_config* cfg;
    Attempt attempt;
    classifier_type classify;
    bool timed_out = false;  // the last call's result was cut short by its own timeout
};

template <class Timer, class A>
struct attempt_parts<hedged_fn<Timer, A>> {
    using fn_type = hedged_fn<Timer, A>;
    using classifier_type = typename hedged_fn<Timer, A>::classifier_type;
    static fn_type& fn(fn_type& a) noexcept { return a; }
    static const classifier_type& classifier(fn_type& a) noexcept { return a.classify; }
    static bool timed_out(const fn_type& a) noexcept { return a.timed_out; }
};

}  // namespace detail

}  // namespace steadfast
