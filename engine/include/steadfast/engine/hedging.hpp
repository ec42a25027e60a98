// Hedging (gRPC A6, Polly v8): one call, up to N attempts in flight.
//
// The first attempt starts at once; while it has not answered, the next
// starts after the hedging delay, up to `max_attempts` in all. A retryable
// failure starts the next one at once; the first success wins and every
// other attempt still in flight receives every type of cancellation
// (terminal, partial and total), its late result dropped; a permanent
// failure ends the call the same way. The caller's own cancellation reaches
// the attempts in flight as the type it came as, and no hedge starts after
// it. A server's pushback (a retryable failure with a delay hint, such as
// Retry-After) stops further hedges; each hedge draws on the retry budget.
// Attempts see their number and whether they are hedges
// (attempt_context::hedge).
//
// The decisions are detail::hedge_fsm's (detail/hedge_fsm.hpp, tested on
// made-up times); this file carries them out for one hedged call, which a
// pipeline (pipeline.hpp) runs as one attempt of its retry. Structured: the
// call ends only when every attempt it started has ended, so nothing it
// started outlives it.
//
// What a call costs when its first attempt answers in time: that attempt in
// a coroutine of its own (co_spawn: its completion ends the call) and one
// deadline in the per-context timeout service of detail/attempt_watch.hpp (a
// lock and a tree insertion, no system call). The call itself is an
// asynchronous operation with no coroutine of its own (only Asio's small
// initiation frame, recycled): its state lives in the driver's frame
// (hedged_fn), and hedges, their completions, the deadlines and the
// caller's cancellation are callbacks on the call's executor.
//
// Every piece runs on the call's executor: on a multi-threaded io_context,
// run the call on a strand.
#pragma once

#include <steadfast/engine/detail/attempt_watch.hpp>
#include <steadfast/engine/detail/hedge_fsm.hpp>
#include <steadfast/engine/error.hpp>
#include <steadfast/engine/policy.hpp>
#include <steadfast/engine/retry.hpp>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/post.hpp>
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

// The state of one hedged call and every decision's carrying out: an
// asynchronous operation with no coroutine frame of its own, run from
// callbacks on the call's executor. It lives in the driver's hedged_fn (in
// the retry's frame or state), made afresh for each call.
//
// Who holds the awaiting coroutine's handler, so that nothing holds itself:
// while the first attempt runs, that attempt's completion; after it, if
// hedges still run, the block the hedges share (`shared`, which the call only
// points to). At io_context shutdown the last of these destroyed takes the
// handler, and with it the coroutine that holds this call; the hedges still
// pending then find the call gone.
template <class Timer, class Raw, class Fn, class Classifier>
class hedged_call {
public:
    using R = stored_t<Raw>;
    using clock = typename Timer::clock_type;
    using time_point = typename clock::time_point;
    using watch = attempt_watch<Timer>;
    using handler_type = typename boost::asio::async_result<boost::asio::use_awaitable_t<>, void()>::handler_type;

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
    // Normally every attempt has ended by now. Destroyed with hedges still
    // running (the awaiting coroutine destroyed at io_context shutdown), they
    // complete into nothing. (Not cancelled from here: at shutdown their
    // signals may already be gone.)
    ~hedged_call() {
        if (auto s = shared_.lock()) s->call = nullptr;
        release_deadline();
    }

    // Starts the call for the coroutine whose handler is `h`. Completes it
    // (never inside this function) once every attempt has ended.
    void start(handler_type& h) {
        namespace asio = boost::asio;
        ++depth_;  // (the first attempt may end inside co_spawn: not to end the call in here)
        try {
            // Cancelled already (a caller that does not throw when cancelled):
            // nothing starts.
            if (h.get_cancellation_state().cancelled() != asio::cancellation_type::none)
                throw boost::system::system_error(make_error_code(asio::error::operation_aborted));
            apply(fsm_.start(nanoseconds::zero()));  // attempt 1 recorded (t0_ was read just now)
            if (!slots_[0].running) throw std::logic_error("hedging: the first attempt did not start");
            caller_ = asio::get_associated_cancellation_slot(h);
            if (caller_.is_connected())
                caller_.assign(
                    [this](asio::cancellation_type t) { from_outside([this, t] { cancel_from_caller(t); }); });
        } catch (...) {
            --depth_;
            not_started(std::current_exception());
            return resume_later(h);
        }
        try {
            // The first attempt's completion holds the handler (see above).
            asio::co_spawn(ex_, guarded_attempt<Raw>(fn_, context_for(1)),
                           asio::bind_cancellation_slot(first_signal_.slot(), first_done{this, std::move(h)}));
        } catch (...) {
            // Out of memory: the handler went with co_spawn's state, and Asio
            // unwinds the awaiting coroutine (as for any operation whose
            // initiation fails after taking its handler).
            --depth_;
            throw;
        }
        --depth_;
    }

    // The call's outcome: the winner's, or else the last to end's, or the
    // failure that ended it; whether that attempt was cut short by its own
    // timeout goes to `timed_out` (the retry reads it as it reads its own
    // attempt timeouts).
    attempt_outcome<R> take(bool& timed_out) {
        timed_out = false;
        if (failure_) return {std::nullopt, failure_};
        slot& s = slots_[(fsm_.result_of() ? fsm_.result_of() : last_) - 1];
        timed_out = s.timed_out && !s.succeeded;
        return std::move(s.out);
    }

private:
    struct slot {
        boost::asio::cancellation_signal* signal = nullptr;  // while running
        attempt_outcome<R> out;
        time_point deadline = time_point::max();
        bool running = false;
        bool timed_out = false;
        boost::asio::cancellation_type cancel_sent = boost::asio::cancellation_type::none;
        bool succeeded = false;
    };
    // Shared by the running hedges: see the class comment.
    struct shared {
        hedged_call* call;
        std::optional<handler_type> handler;  // parked once the first attempt has ended
    };
    // The first attempt's completion.
    struct first_done {
        hedged_call* call;
        handler_type handler;
        void operator()(std::exception_ptr e, attempt_outcome<R> out) {
            hedged_call& c = *call;  // (alive: this handler owns the coroutine that owns it)
            c.step([&] { c.ended(1, e, std::move(out)); });
            if (!c.done()) {
                // Hedges still run: the last to end ends the call.
                if (auto s = c.shared_.lock()) {
                    s->handler.emplace(std::move(handler));
                    return;
                }
                // Nothing in flight and no end (the fsm never leaves a call
                // so): ended here rather than left waiting.
                c.fail(std::make_exception_ptr(std::logic_error("hedging: nothing in flight and no end")));
            }
            if (c.depth_ == 0) return c.resume(handler);
            c.resume_later(handler);  // ended inside start(): the call ends after it, never inside
        }
    };

    nanoseconds since() const { return std::chrono::duration_cast<nanoseconds>(clock::now() - t0_); }
    bool done() const noexcept { return running_ == 0 && (fsm_.finished() || failure_); }

    // Runs one step of the call from one of its entry points (a completion,
    // the caller's cancellation, a deadline); a step inside another (a
    // hedge ending inside its co_spawn) leaves the ending to the outer one.
    template <class F>
    void step(F&& f) {
        ++depth_;
        try {
            f();
        } catch (...) {
            fail(std::current_exception());
        }
        --depth_;
    }
    // A step from outside the attempts (the caller's cancellation, a
    // deadline), after which the call may end. (A member, not the slot
    // handler's body: the step may clear the slot, destroying that handler.)
    template <class F>
    void from_outside(F&& f) {
        step(std::forward<F>(f));
        if (std::shared_ptr<shared> sh = shared_.lock()) end_if_done(this, *sh);
    }

    // After a step outside any other: the call ends if it is done and its
    // handler is parked with the hedges. Nothing of `this` is touched after.
    static void end_if_done(hedged_call* c, shared& s) {
        if (c && c->depth_ == 0 && c->done() && s.handler) {
            handler_type h = std::move(*s.handler);
            s.handler.reset();
            c->resume(h);
        }
    }
    void resume(handler_type& h) {
        finish();
        handler_type local = std::move(h);
        std::move(local)();  // may destroy this call
    }
    // The same from the executor, after the current step.
    void resume_later(handler_type& h) {
        finish();
        boost::asio::post(ex_, [h = std::move(h)]() mutable { std::move(h)(); });
    }
    void finish() noexcept {
        if (caller_.is_connected()) caller_.clear();
        caller_ = {};
        release_deadline();
    }

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

    // Attempt k ended.
    void ended(std::uint32_t k, std::exception_ptr e, attempt_outcome<R>&& out) {
        slot& s = slots_[k - 1];
        s.out = std::move(out);
        if (e) s.out.error = e;
        s.running = false;
        s.signal = nullptr;
        --running_;
        last_ = k;
        if (failure_) return;
        classification how = classify_outcome(s.out, classify_, *cfg_.policy);
        s.succeeded = how.kind == verdict::success;
        if (s.timed_out && !s.succeeded) how = classification::retryable(error::attempt_timeout);
        // (The time matters only for a hedge this outcome starts.)
        apply(fsm_.on_outcome(k, how, how.kind == verdict::retryable ? since() : nanoseconds::zero()));
    }
    // Attempt 1 could not be started (it may have been recorded already).
    void not_started(std::exception_ptr e) {
        if (slots_[0].running) {
            slots_[0].running = false;
            slots_[0].signal = nullptr;
            --running_;
        }
        fail(std::move(e));
    }
    // The caller's cancellation reaches the attempts in flight as the type
    // it came as (a total cancellation asks for no side effects: widened to
    // terminal, a hedged write could stop halfway); no hedge starts after it.
    // Losers of a race, a failure and a timeout send every type.
    void cancel_from_caller(boost::asio::cancellation_type t) {
        if (cancelled_ || failure_) return cancel_all(t);  // (another type after the first: passed on too)
        cancelled_ = true;
        struct restore {  // (also if apply() throws: the losers of a later race get every type)
            boost::asio::cancellation_type& f;
            ~restore() { f = boost::asio::cancellation_type::all; }
        } r{forward_};
        forward_ = t;
        apply(fsm_.cancel());
    }
    void fail(std::exception_ptr e) {
        if (!failure_) failure_ = std::move(e);
        cancel_all();
        hedge_at_.reset();
        release_deadline();
    }

    // Carries out a step: cancel the others, start one, (re)arm or disarm.
    void apply(const hedge_step& st) {
        if (st.cancel_others) cancel_all(forward_);
        if (st.timer_at)
            hedge_at_ = st.timer_at;
        else if (st.disarm_timer)
            hedge_at_.reset();
        if (st.start) start_attempt(st.start);
        rearm();
    }

    void start_attempt(std::uint32_t k) {
        namespace asio = boost::asio;
        slot& s = slots_[k - 1];
        if (cfg_.timeout) s.deadline = saturating_deadline(k == 1 ? t0_ : clock::now(), *cfg_.timeout);
        if (k == 1) {  // start() spawns it, on first_signal_
            s.signal = &first_signal_;
            s.running = true;
            ++running_;
            return;
        }
        // A hedge reaches the call through the shared block, which the call
        // empties when it goes.
        std::shared_ptr<shared> sh = shared_.lock();
        if (!sh) {
            sh = std::make_shared<shared>(shared{this, std::nullopt});
            shared_ = sh;
        }
        std::shared_ptr<watch> w = attempt_timeouts<Timer>::of(ex_).lease(ex_);
        asio::cancellation_signal* sig = &w->signal;
        // Recorded before co_spawn: the hedge may run, and even end, inside it.
        s.signal = sig;
        s.running = true;
        ++running_;
        try {
            asio::co_spawn(
                ex_, owned_attempt<Raw>(fn_, context_for(k)),
                asio::bind_cancellation_slot(sig->slot(), [sh = std::move(sh), k, w = std::move(w)](
                                                              std::exception_ptr e, attempt_outcome<R> out) mutable {
                    hedged_call* c = sh->call;
                    if (c) c->step([&] { c->ended(k, e, std::move(out)); });
                    w->service->give_back(std::move(w));
                    end_if_done(c, *sh);
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

    // Emits `t` to a running attempt, unless every type in it went already.
    void cancel(slot& s, boost::asio::cancellation_type t = boost::asio::cancellation_type::all) {
        if (!s.running || (t & ~s.cancel_sent) == boost::asio::cancellation_type::none) return;
        s.cancel_sent |= t;
        s.signal->emit(t);
    }
    void cancel_all(boost::asio::cancellation_type t = boost::asio::cancellation_type::all) {
        for (slot& s : slots_) cancel(s, t);
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
            deadline_->signal.slot().assign(
                [this](boost::asio::cancellation_type) { from_outside([this] { on_deadline(); }); });
        }
        deadline_->attempt = ++tag_;
        deadline_->service->add(*deadline_, wake, tag_);
        armed_ = wake;
    }

    void on_deadline() {
        armed_ = time_point::max();
        if (failure_) return;
        const auto now = clock::now();
        if (!fsm_.finished() && hedge_at_ && saturating_deadline(t0_, *hedge_at_) <= now) {
            hedge_at_.reset();
            apply(fsm_.on_timer(since()));
            if (failure_) return;  // (a hedge that ended inside failed the call)
        }
        for (slot& s : slots_) {
            if (s.running && !s.timed_out && s.deadline <= now) {
                s.timed_out = true;  // its outcome, when it comes, is a timeout
                cancel(s);
            }
        }
        rearm();
    }

    void release_deadline() noexcept {
        if (!deadline_) return;
        armed_ = time_point::max();
        deadline_->service->give_back(std::move(deadline_));  // its slot (this) cleared
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
    boost::asio::cancellation_slot caller_;  // the awaiting coroutine's, while the call runs
    std::shared_ptr<watch> deadline_;        // leased on the first deadline
    time_point armed_ = time_point::max();
    std::uint64_t tag_ = 0;
    std::exception_ptr failure_;    // user code threw, or an attempt could not start
    std::weak_ptr<shared> shared_;  // the running hedges' block: made at the first hedge
    std::uint32_t running_ = 0, last_ = 0;
    int depth_ = 0;  // inside a step
    bool cancelled_ = false;
    // The type a step's cancel_others sends: the caller's while its
    // cancellation is being carried out, else every type.
    boost::asio::cancellation_type forward_ = boost::asio::cancellation_type::all;
};

// The attempt a pipeline's retry makes when it hedges: one hedged call of
// the user's attempt. The drivers await async_call() and take() the outcome
// (see direct_attempt in retry.hpp): the call needs no coroutine of its own.
// Its results are classified by the user's classifier (each hedge's
// outcome, then the call's result once more by the retry: a classifier with
// side effects sees the result twice), and a hedge that timed out is told to
// the retry as its own attempt timeouts are (see the attempt_parts
// specialisation below). A hedge's context points at the retry's previous
// outcome, as the first attempt's does: valid while the hedge runs (not in
// destructors run when an io_context is destroyed).
template <class Timer, class Attempt>
struct hedged_fn {
    using parts = attempt_parts<Attempt>;
    using classifier_type = typename parts::classifier_type;
    using raw_type = attempt_raw_t<Attempt>;
    using call_type = hedged_call<Timer, raw_type, typename parts::fn_type, classifier_type>;
    using is_direct_attempt = void;  // (retry.hpp's direct_attempt)
    static_assert(std::is_copy_constructible_v<typename parts::fn_type>,
                  "hedging runs a copy of the attempt for each hedge: the attempt must be copyable");

    hedged_fn(const hedge_config* c, Attempt a) : cfg(c), attempt(std::move(a)), classify(parts::classifier(attempt)) {}
    // (Moved only before its first call.)
    hedged_fn(hedged_fn&& o) : cfg(o.cfg), attempt(std::move(o.attempt)), classify(std::move(o.classify)) {}

    // One hedged call: completes once every attempt it started has ended;
    // take() then gives its outcome. Awaited by a coroutine on the call's
    // executor (the hedges run there).
    boost::asio::awaitable<void> async_call(const attempt_context& ctx) {
        namespace asio = boost::asio;
        timed_out = false;  // (also if the call cannot start)
        return asio::async_initiate<const asio::use_awaitable_t<>&, void()>(
            [this, ctx](typename call_type::handler_type h) {
                unmade = nullptr;
                call.reset();  // (the last call's, ended)
                const auto ex = asio::get_associated_executor(h);
                try {
                    call.emplace(*cfg, parts::fn(attempt), classify, ctx, ex);
                } catch (...) {
                    unmade = std::current_exception();
                    asio::post(ex, [h = std::move(h)]() mutable { std::move(h)(); });
                    return;
                }
                call->start(h);
            },
            asio::use_awaitable);
    }
    attempt_outcome<stored_t<raw_type>> take() {
        if (unmade) return {std::nullopt, unmade};
        return call->take(timed_out);
    }

    // The same as an attempt callable (for any other caller).
    boost::asio::awaitable<raw_type> operator()(const attempt_context& ctx) {
        co_await async_call(ctx);
        auto out = take();
        if (out.error) std::rethrow_exception(out.error);
        if constexpr (!std::is_void_v<raw_type>) co_return std::move(*out.value);
    }

    const hedge_config* cfg;
    Attempt attempt;
    classifier_type classify;
    std::optional<call_type> call;
    std::exception_ptr unmade;  // the last call's state could not be made
    bool timed_out = false;     // the last call's result was cut short by its own timeout
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
