// retry(): turn an attempt-producing callable into a retrying operation.
//
//   auto r = co_await steadfast::retry(policy, [&](const steadfast::attempt_context& ctx)
//                                               -> asio::awaitable<result<reply>> { ... });
//
// The attempt is called with its context and returns asio::awaitable<R>. Each
// outcome is classified (see classify.hpp); every decision comes from one
// decision loop, detail::retry_fsm (plain code, see detail/retry_fsm.hpp), and
// this file only carries out its actions: start an attempt, wait on the timer
// (backoff, gate, per-attempt timeout), yield, finish. It has two drivers:
// retry(), a coroutine, and async_retry(), a composed operation.
#pragma once

#include <steadfast/engine/classify.hpp>
#include <steadfast/engine/detail/attempt_watch.hpp>
#include <steadfast/engine/detail/retry_fsm.hpp>
#include <steadfast/engine/policy.hpp>
#include <steadfast/engine/result.hpp>
#include <steadfast/engine/watchable.hpp>

#include <boost/asio/append.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/compose.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/execution/executor.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/is_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <array>
#include <chrono>
#include <exception>
#include <memory>
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
    // Whether the attempt that just ended was cut short by a timeout of its
    // own making (a hedged call's hedges: see hedging.hpp), as the retry's
    // per-attempt timeout would be.
    static bool timed_out(const A&) noexcept { return false; }
};
template <class F, class C>
struct attempt_parts<classified_attempt<F, C>> {
    using fn_type = F;
    using classifier_type = C;
    static fn_type& fn(classified_attempt<F, C>& a) noexcept { return a.fn; }
    static const classifier_type& classifier(classified_attempt<F, C>& a) noexcept { return a.classify; }
    static bool timed_out(const classified_attempt<F, C>&) noexcept { return false; }
};

template <class A>
using attempt_raw_t =
    typename awaitable_value<std::invoke_result_t<typename attempt_parts<A>::fn_type&, const attempt_context&>>::type;

template <class T>
using stored_t = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <class R>
struct attempt_outcome {
    std::optional<R> value;
    std::exception_ptr error;
};

// An attempt that runs as an asynchronous operation of its own and keeps its
// outcome (a hedged call: hedging.hpp). The drivers await async_call(ctx)
// and take() the outcome, with no coroutine of their own in between. Opted
// into by name (is_direct_attempt), not detected by shape.
template <class Fn>
concept direct_attempt = requires(Fn& f, const attempt_context& c) {
    typename Fn::is_direct_attempt;
    f.async_call(c);
    f.take();
};

// Clears what a wait put in the caller's slot (arm_watch's forwarder, a
// direct attempt's), however the wait ends (an exception, or the frame
// destroyed with its handler dropped): left there, it would point at a watch
// or a call that may be gone when the caller's signal is emitted later.
struct slot_clearer {
    boost::asio::cancellation_slot slot;
    ~slot_clearer() {
        if (slot.is_connected()) slot.clear();
    }
};

// Runs one attempt and turns a thrown exception into a value. It runs in a
// coroutine of its own (co_spawn), whose cancellation filter would let only
// terminal cancellation through: partial and total reach the attempt too.
// (Taking `fn` by reference is safe: the driver keeps it until this ends.)
template <class Raw, class Fn>
boost::asio::awaitable<attempt_outcome<stored_t<Raw>>> guarded_attempt(Fn& fn, attempt_context ctx) {
    co_await boost::asio::this_coro::reset_cancellation_state(boost::asio::enable_total_cancellation());
    attempt_outcome<stored_t<Raw>> out;
    try {
        if constexpr (direct_attempt<Fn>) {
            // (Two statements: g++ 12 cannot type a co_await in a braced initialiser.)
            const boost::asio::cancellation_state cs = co_await boost::asio::this_coro::cancellation_state;
            const slot_clearer forwarder{cs.slot()};
            co_await fn.async_call(ctx);
            out = fn.take();
        } else if constexpr (std::is_void_v<Raw>) {
            co_await fn(ctx);
            out.value.emplace();
        } else {
            out.value.emplace(co_await fn(ctx));
        }
    } catch (...) {
        out.error = std::current_exception();
    }
    // A cancelled attempt that ends without having suspended since (its own
    // code set stop-when, say) must not make co_spawn's entry point throw
    // from its closing post (Asio's throw_if_cancelled): that would escape
    // to std::terminate.
    co_await boost::asio::this_coro::throw_if_cancelled(false);
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

// Where stop-when turning true must reach, at any moment of the operation:
// the FSM (remembered, so a condition true only briefly, even during a
// zero-delay yield or before the first step, still stops the retry) and the
// one wait in flight, if any: the backoff sleep or gate wait (its timer is
// cancelled) or the watched attempt (its signal is emitted). The driver
// subscribes once for the whole operation (see subscribe_stop) and points
// `timer` or `attempt` at what it awaits.
template <class T>
struct stop_wake {
    retry_fsm* fsm = nullptr;
    T* timer = nullptr;
    boost::asio::cancellation_signal* attempt = nullptr;

    void operator()(bool v) const {
        if (!v) return;
        fsm->stop_seen();
        if (timer)
            timer->cancel();
        else if (attempt)
            attempt->emit(boost::asio::cancellation_type::all);
    }
};

// Subscribes `w` to the policy's stop-when condition, if it has one.
// (One pointer: the callback fits std::function's small buffer, so the
// subscription allocates nothing.)
template <class T>
void subscribe_stop(stop_wake<T>& w, watchable::subscription& sub) {
    if (watchable* c = w.fsm->stop_when()) c->subscribe(sub, [&w](bool v) { w(v); });
}

// Arms the watch (see detail/attempt_watch.hpp) for the attempt the FSM is
// about to start, leasing one on first use: its timeout and its stop-when
// condition (through `wake`, unless it lets the attempt finish) emit on its signal, and so does the caller's
// cancellation, through a forwarder on `caller` (the slot the driver's own
// cancellation state hands to children).
template <class Timer, class T>
void arm_watch(retry_fsm& fsm, std::shared_ptr<attempt_watch<Timer>>& watch, const boost::asio::any_io_executor& ex,
               stop_wake<T>& wake, boost::asio::cancellation_slot caller) {
    if (!watch) watch = attempt_timeouts<Timer>::of(ex).lease(ex);
    attempt_watch<Timer>& w = *watch;
    const attempt_context& ctx = fsm.context();
    w.attempt = ctx.number;
    w.timed_out = false;
    if (ctx.timeout) w.service->add(w, saturating_deadline(Timer::clock_type::now(), *ctx.timeout), ctx.number);
    // (Watched for its timeout alone, the attempt is not cut short by a
    // stop-when that lets it finish.)
    wake.attempt = fsm.stop_cancels_attempt() ? &w.signal : nullptr;
    if (caller.is_connected())
        caller.assign([sig = &w.signal](boost::asio::cancellation_type type) { sig->emit(type); });
}

// After the attempt: its timeout and stop-when's way to it go. Returns
// whether the timeout fired first.
template <class Timer, class T>
bool disarm_watch(attempt_watch<Timer>& w, stop_wake<T>& wake) {
    wake.attempt = nullptr;
    w.attempt = 0;
    w.service->remove(w);
    return w.timed_out;
}

// A timer wait (a backoff sleep or a gate wait) ends early when stop-when
// turns true (through `wake`) and, unless the action says otherwise, when the
// gate opens.
template <class Timer>
void wake_on_conditions(retry_fsm& fsm, const retry_action& act, Timer& t, stop_wake<Timer>& wake,
                        watchable::subscription& gate_sub) {
    wake.timer = &t;
    if (watchable* g = fsm.gate(); g && act.wake_on_gate)
        g->subscribe(gate_sub, [&t](bool v) {
            if (v) t.cancel();
        });
}

// Arms the timer for a sleep or a gate wait.
template <class Timer>
void expire_for(Timer& t, const retry_action& act, typename Timer::time_point start) {
    using dur = typename Timer::clock_type::duration;
    if (act.what == retry_action::type::sleep)
        t.expires_after(std::chrono::duration_cast<dur>(act.at));
    else
        t.expires_at(saturating_deadline(start, act.at));
}

// The event after an attempt: its outcome classified, the value kept in
// `value` (the next attempt and a custom backoff may look at it).
template <class R, class Classifier>
void outcome_event(retry_event& ev, const retry_fsm& fsm, const Classifier& classify, attempt_outcome<R>& out,
                   std::optional<R>& value) {
    if (out.error) {
        ev.outcome = fsm.classify(out.error);
        ev.exception = out.error;
    } else if (out.value) {
        ev.outcome = classify(*out.value);
    }
    value = std::move(out.value);
    if (value) {
        ev.value = &*value;
        ev.type = &typeid(R);
    }
}

template <class R>
retry_result<R> make_result(const retry_fsm& fsm, std::optional<R>&& value) {
    retry_result<R> res;
    result_access::summary(res) = fsm.summary();
    result_access::value(res) = std::move(value);
    result_access::exception(res) = fsm.last_exception();
    return res;
}

// The rare paths of retry() live in coroutines of their own, so their locals
// are not in the frame of every pending retry (g++ 12 does not overlap frame
// slots).

// A backoff sleep or a gate wait. Returns whether it ran out (not woken).
template <class Timer>
boost::asio::awaitable<bool> timed_wait(retry_fsm& fsm, std::optional<Timer>& timer, retry_action act,
                                        typename Timer::time_point start, stop_wake<Timer>& wake) {
    namespace asio = boost::asio;
    if (!timer) timer.emplace(co_await asio::this_coro::executor);  // made on the first wait
    Timer& t = *timer;
    expire_for(t, act, start);
    watchable::subscription gate_sub;
    wake_on_conditions(fsm, act, t, wake, gate_sub);
    auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
    wake.timer = nullptr;
    co_return !ec;
}

}  // namespace detail

/// Retries `attempt` under `policy` in the calling coroutine.
///
/// Completion: never throws for the expected failure paths; the result says
/// why it stopped. Executor: the calling coroutine's. Cancellation: the
/// calling coroutine's cancellation (whatever types its filter lets through:
/// terminal by default, partial and total after reset_cancellation_state)
/// ends the retry promptly with stop_reason::cancelled: the sleep or the
/// attempt in flight is cancelled and awaited; a success that arrives after
/// cancellation still reports cancelled, with the value kept; emitted from a
/// hook, a custom backoff or the random source, it ends the retry before the
/// step they belong to starts (nothing throws, and nothing of the retry stays
/// in the caller's slot). On a
/// multi-threaded io_context, run the calling coroutine on a strand, as for any
/// per-operation cancellation: a timeout or stop-when cancels the attempt from
/// the executor. `Timer` selects the clock, so tests run on
/// steadfast::manual_timer.
template <class Timer = boost::asio::steady_timer, class Attempt>
boost::asio::awaitable<retry_result_for<Attempt>> retry(retry_policy policy, Attempt attempt) {
    namespace asio = boost::asio;
    using parts = detail::attempt_parts<Attempt>;
    using raw_t = detail::attempt_raw_t<Attempt>;
    using R = detail::stored_t<raw_t>;
    using clock = typename Timer::clock_type;
    using act = detail::retry_action::type;

    const auto cs = co_await asio::this_coro::cancellation_state;
    const auto ex = co_await asio::this_coro::executor;
    const auto start = clock::now();
    detail::retry_fsm fsm(policy);
    std::optional<R> value;                               // the latest attempt's
    std::optional<Timer> timer;                           // made on the first wait: an instant success needs none
    std::shared_ptr<detail::attempt_watch<Timer>> watch;  // leased on the first watched attempt
    detail::stop_wake<Timer> wake{&fsm};
    watchable::subscription stop_sub;  // stop-when, for the whole operation
    detail::subscribe_stop(wake, stop_sub);
    detail::retry_event ev;
    for (;;) {
        ev.cancelled = detail::is_cancelled(cs);
        // (settle: user code run by resume() may have cancelled this or set
        // stop-when; a cancelled coroutine's next co_await would throw. Read
        // after resume() returns: as arguments of one call the two would be
        // evaluated in an order left to the compiler, and g++ reads the
        // cancellation first.)
        const detail::retry_action next = fsm.resume(ev);
        const detail::retry_action a = fsm.settle(next, detail::is_cancelled(cs), ev.elapsed);
        ev = {};
        if (a.what == act::done) break;
        if (a.what == act::attempt) {
            detail::attempt_outcome<R> out;
            if (fsm.watch_attempt()) {
                // The attempt gets its own cancellation signal (see
                // detail/attempt_watch.hpp), in a coroutine of its own; the
                // caller's cancellation reaches it through the same signal.
                // (Here rather than in a helper coroutine: a frame less.)
                const detail::slot_clearer forwarder{cs.slot()};
                detail::arm_watch(fsm, watch, ex, wake, forwarder.slot);
                auto [e, o] = co_await asio::co_spawn(
                    ex, detail::guarded_attempt<raw_t>(parts::fn(attempt), fsm.context()),
                    asio::bind_cancellation_slot(watch->signal.slot(), asio::as_tuple(asio::use_awaitable)));
                out = std::move(o);
                if (e) out.error = e;
                ev.timed_out = detail::disarm_watch(*watch, wake);
            } else {
                // The fast path: the attempt runs inline in this frame.
                try {
                    if constexpr (detail::direct_attempt<typename parts::fn_type>) {
                        const detail::slot_clearer forwarder{cs.slot()};
                        co_await parts::fn(attempt).async_call(fsm.context());
                        out = parts::fn(attempt).take();
                    } else if constexpr (std::is_void_v<raw_t>) {
                        co_await parts::fn(attempt)(fsm.context());
                        out.value.emplace();
                    } else {
                        out.value.emplace(co_await parts::fn(attempt)(fsm.context()));
                    }
                } catch (...) {
                    out.error = std::current_exception();
                }
            }
            ev.timed_out = ev.timed_out || parts::timed_out(attempt);
            detail::outcome_event(ev, fsm, parts::classifier(attempt), out, value);
        } else if (a.what == act::yield) {
            co_await asio::post(ex, asio::use_awaitable);
        } else {
            ev.expired = co_await detail::timed_wait(fsm, timer, a, start, wake);
        }
        ev.elapsed = std::chrono::duration_cast<nanoseconds>(clock::now() - start);
    }
    if (watch) watch->service->give_back(std::move(watch));
    co_return detail::make_result(fsm, std::move(value));
}

namespace detail {

// async_retry as a composed operation driving the same FSM: between attempts
// only this state and the timer's wait exist (no coroutine frame), so many
// pending retries stay small. Each attempt runs in a coroutine spawned for
// its duration.
//
// Asio's rules for a composed operation: the first step is posted to `ex`, so
// the operation never completes inside its initiating function (a loop of
// retries that stop at once does not grow the stack); every intermediate step
// is bound to `ex` (a strand stays a strand whatever the handler is bound
// to); the state is allocated with the handler's associated allocator and
// freed before the completion, which is dispatched to the handler's
// associated executor. A stopped io_context does not complete the operation:
// its pending wait is destroyed with the context, and the state with it.
template <class Timer, class Executor, class Attempt, class Alloc>
class retry_op {
    using parts = attempt_parts<Attempt>;
    using raw_t = attempt_raw_t<Attempt>;
    using R = stored_t<raw_t>;
    using clock = typename Timer::clock_type;
    using act = retry_action::type;
    // The timer on the executor's own type: an io_context's executor is one
    // pointer, an any_io_executor seven.
    using timer_t = typename Timer::template rebind_executor<Executor>::other;

public:
    struct data {
        data(const Executor& ex, retry_policy p, Attempt a)
            : policy(std::move(p)), attempt(std::move(a)), fsm(policy), timer(ex), wake{&fsm} {}
        retry_policy policy;
        Attempt attempt;
        retry_fsm fsm;
        std::optional<R> value;  // the latest attempt's
        timer_t timer;
        typename clock::time_point start = clock::time_point::min();  // min(): not started
        std::shared_ptr<attempt_watch<Timer>> watch;                  // made on the first watched attempt
        stop_wake<timer_t> wake;
        watchable::subscription stop_sub;  // stop-when, from the first step to the end
        std::uint64_t rises = 0;           // stop-when's rises() at the initiation
        watchable::subscription gate_sub;  // the gate, during a timer wait
    };
    using data_alloc = typename std::allocator_traits<Alloc>::template rebind_alloc<data>;

    static data* make(const Alloc& alloc, const Executor& ex, retry_policy p, Attempt a) {
        data_alloc da(alloc);
        data* d = std::allocator_traits<data_alloc>::allocate(da, 1);
        try {
            std::allocator_traits<data_alloc>::construct(da, d, ex, std::move(p), std::move(a));
        } catch (...) {
            std::allocator_traits<data_alloc>::deallocate(da, d, 1);
            throw;
        }
        return d;
    }

    retry_op(data* d, const Alloc& alloc) noexcept : d_(d), alloc_(alloc) {}
    retry_op(retry_op&& o) noexcept : d_(std::exchange(o.d_, nullptr)), alloc_(o.alloc_) {}
    retry_op(const retry_op&) = delete;
    retry_op& operator=(const retry_op&) = delete;
    retry_op& operator=(retry_op&&) = delete;
    ~retry_op() { release(); }

    template <class Self>
    void operator()(Self& self) {  // start; the first step; after a zero-delay yield
        data& d = *d_;
        if (d.start == clock::time_point::min()) {  // in the initiating function, on any thread
            self.reset_cancellation_state(boost::asio::enable_total_cancellation());
            d.start = clock::now();
            // A stop-when true only briefly before the posted first step still
            // stops the retry: that step (on `ex`, where the condition lives)
            // subscribes and compares the condition's count of rises with this.
            if (watchable* c = d.fsm.stop_when()) d.rises = c->rises();
            return on_ex(self, [](auto&& h) { boost::asio::post(std::move(h)); });
        }
        if (watchable* c = d.fsm.stop_when(); c && !d.stop_sub.active()) {
            // The first step, on `ex`: subscribe here, and count a rise since
            // the start as seen.
            subscribe_stop(d.wake, d.stop_sub);
            if (c->rises() != d.rises) d.fsm.stop_seen();
        }
        step(self, event(self));
    }

    template <class Self>
    void operator()(Self& self, error_code ec) {  // the timer: a gate wait or a backoff sleep
        d_->wake.timer = nullptr;
        d_->gate_sub.reset();
        retry_event ev = event(self);
        ev.expired = !ec;
        step(self, ev);
    }

    template <class Self>
    void operator()(Self& self, std::exception_ptr e, attempt_outcome<R> out) {  // an attempt
        data& d = *d_;
        if (e) out.error = e;
        retry_event ev;
        if (d.fsm.watch_attempt()) ev.timed_out = disarm_watch(*d.watch, d.wake);
        ev.timed_out = ev.timed_out || parts::timed_out(d.attempt);
        outcome_event(ev, d.fsm, parts::classifier(d.attempt), out, d.value);
        // Read after the classifiers ran (they may cancel), as retry() does.
        ev.elapsed = elapsed();
        ev.cancelled = cancelled(self);
        step(self, ev);
    }

    template <class Self>
    void operator()(Self& self, retry_result<R> res) {  // on the handler's executor: complete
        self.complete(std::move(res));
    }

private:
    template <class Self>
    static bool cancelled(Self& self) {
        return self.get_cancellation_state().cancelled() != boost::asio::cancellation_type::none;
    }
    template <class Self>
    retry_event event(Self& self) const {
        retry_event ev;
        ev.elapsed = elapsed();
        ev.cancelled = cancelled(self);
        return ev;
    }
    nanoseconds elapsed() const { return std::chrono::duration_cast<nanoseconds>(clock::now() - d_->start); }

    // Starts `op` with the operation as its handler, on `ex`: bound to it when
    // the handler's executor is another (a bound handler costs a copy of the
    // executor in every pending wait, so only then).
    // (An unbound handler's executor is `ex` with outstanding work tracked:
    // the same executor for this purpose.)
    template <class Self, class Op>
    void on_ex(Self& self, Op&& op) const {
        namespace asio = boost::asio;
        const auto ex = d_->timer.get_executor();
        const asio::any_io_executor assoc = asio::get_associated_executor(self, ex);
        if (assoc == asio::any_io_executor(ex) ||
            assoc == asio::any_io_executor(asio::prefer(ex, asio::execution::outstanding_work.tracked)))
            std::forward<Op>(op)(std::move(self));
        else
            std::forward<Op>(op)(asio::bind_executor(ex, std::move(self)));
    }

    // Carries out what the FSM decides.
    template <class Self>
    void step(Self& self, const retry_event& ev) {
        namespace asio = boost::asio;
        data& d = *d_;
        // (settle: user code run by resume() may have cancelled this or set
        // stop-when; read after resume() returns, as in retry().)
        const retry_action next = d.fsm.resume(ev);
        const retry_action a = d.fsm.settle(next, cancelled(self), ev.elapsed);
        switch (a.what) {
            case act::done:
                return finish(self);
            case act::yield:
                return on_ex(self, [](auto&& h) { asio::post(std::move(h)); });
            case act::sleep:
            case act::wait_gate:
                expire_for(d.timer, a, d.start);
                wake_on_conditions(d.fsm, a, d.timer, d.wake, d.gate_sub);
                return on_ex(self, [&d](auto&& h) { d.timer.async_wait(std::move(h)); });
            case act::attempt:
                break;
        }
        // The attempt's completion is this operation, bound to `ex` and to
        // the slot the attempt listens on: the operation's own, or its
        // watch's signal (which the operation's slot reaches through the
        // watch). Always both binders, even where the handler's executor is
        // `ex` already: one completion type, so one instantiation of
        // co_spawn's entry point for each operation type rather than four (a
        // program's compile time grows with its async_retry call sites).
        // (The attempt's frame first, before the watch is armed: if that
        // allocation fails, no forwarder is left in the caller's slot.)
        auto attempt = guarded_attempt<raw_t>(parts::fn(d.attempt), d.fsm.context());
        const auto ex = d.timer.get_executor();
        asio::cancellation_slot slot = self.get_cancellation_state().slot();
        if (d.fsm.watch_attempt()) {
            arm_watch(d.fsm, d.watch, ex, d.wake, slot);
            slot = d.watch->signal.slot();
        }
        asio::co_spawn(ex, std::move(attempt),
                       asio::bind_cancellation_slot(slot, asio::bind_executor(ex, std::move(self))));
    }

    template <class Self>
    void finish(Self& self) {
        retry_result<R> res = make_result(d_->fsm, std::move(d_->value));
        if (d_->watch) d_->watch->service->give_back(std::move(d_->watch));
        auto slot = self.get_cancellation_state().slot();
        if (slot.is_connected()) slot.clear();
        release();  // before the handler runs, as Asio does
        // Steps run on `ex`; the handler runs on its own associated executor
        // (at once when that is where this step runs).
        boost::asio::dispatch(boost::asio::append(std::move(self), std::move(res)));
    }

    void release() noexcept {
        if (!d_) return;
        data_alloc da(alloc_);
        std::allocator_traits<data_alloc>::destroy(da, d_);
        std::allocator_traits<data_alloc>::deallocate(da, d_, 1);
        d_ = nullptr;
    }

    data* d_;
    [[no_unique_address]] Alloc alloc_;
};

// Allocates the operation's state with the handler's associated allocator.
template <class Timer, class Executor, class Attempt, class Result>
struct initiate_retry {
    template <class Handler>
    // (`ex` by value: it may refer into the handler, which is moved from below.)
    void operator()(Handler&& handler, Executor ex, retry_policy p, Attempt a) const {
        std::decay_t<Handler> h(std::forward<Handler>(handler));  // a const or lvalue handler is copied
        auto alloc = boost::asio::get_associated_allocator(h);
        using op = retry_op<Timer, Executor, Attempt, decltype(alloc)>;
        auto* d = op::make(alloc, ex, std::move(p), std::move(a));
        boost::asio::async_compose<std::decay_t<Handler>, void(Result)>(op(d, alloc), h, ex);
    }
};

}  // namespace detail

/// The same as a composed asynchronous operation taking any completion token.
///
/// Completion signature: void(retry_result_for<Attempt>). Executor: every step
/// (attempts, hooks, condition checks) runs on `ex` (use a strand on a
/// multi-threaded io_context), the first one posted, so the operation never
/// completes inside this call; the completion handler runs on its associated
/// executor (default: `ex`). Allocator: the operation's state comes from the
/// handler's associated allocator. Cancellation: terminal, partial and total,
/// through the token's associated cancellation slot, passed on to the attempt
/// in flight (whose coroutine lets all three through). Emit it on `ex`: the
/// steps it races with run there; emitted from a hook, a custom backoff or
/// the random source, it ends the operation before the step they belong to
/// starts. Conditions: stop-when is watched from this call on (a condition
/// true only briefly before the first step still stops the retry); the call
/// itself may come from any thread. Between attempts the operation holds only
/// its state and a timer wait (no coroutine frame).
template <class Timer = boost::asio::steady_timer, class Executor, class Attempt,
          class CompletionToken = boost::asio::default_completion_token_t<Executor>>
requires(boost::asio::execution::is_executor<Executor>::value ||
         boost::asio::is_executor<Executor>::value) auto async_retry(const Executor& ex, retry_policy policy,
                                                                     Attempt attempt, CompletionToken&& token = {}) {
    using result_t = retry_result_for<Attempt>;
    return boost::asio::async_initiate<CompletionToken, void(result_t)>(
        detail::initiate_retry<Timer, Executor, Attempt, result_t>{}, token, ex, std::move(policy), std::move(attempt));
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
