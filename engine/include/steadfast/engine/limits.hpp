// concurrency_limit (a bulkhead) and rate_limit (a token bucket or a sliding
// window): shared by the operations that call one dependency, safe from any
// thread.
//
//   auto bulkhead = std::make_shared<steadfast::concurrency_limit>(
//       steadfast::concurrency_limit::options{.limit = 8, .queue = 100});
//   auto [ec, permit] = co_await bulkhead->async_acquire(ex, asio::as_tuple(asio::use_awaitable));
//   // ec: error::queue_full (the queue is full), operation_aborted (cancelled)
//
//   auto rate = std::make_shared<steadfast::rate_limit>(
//       ex, steadfast::rate_limit::options{.per_second = 100, .burst = 20, .queue = 1000});
//   auto [ec2] = co_await rate->async_acquire(ex, asio::as_tuple(asio::use_awaitable));
//   auto quota = std::make_shared<steadfast::rate_limit>(    // 100 a minute, a sliding window
//       ex, steadfast::rate_limit::window_options{.limit = 100, .window = std::chrono::minutes(1)});
//
// async_acquire keeps Asio's rules: any completion token (default
// `deferred`), the handler's associated executor (else `ex`) and never
// inline; a waiting handler is kept in memory from its associated allocator
// and given back before it runs (the queue's own bookkeeping, a few small
// blocks a waiter, comes from the heap); per-operation cancellation of every type (terminal, partial, total)
// takes a waiting caller out of the queue and completes it with
// operation_aborted (a caller already let in is not undone). Waiters are let
// in first come, first served (the order in which places or tokens are
// given); a caller that finds others waiting queues behind them. Two waiters
// let in at once by two threads may have their handlers posted, and run, in
// the other order. room(ex) is a condition: true while a caller would be let
// in at once (for with_attempt_when, a gate, all_of).
//
// One limit may serve several execution contexts; a context destroyed while
// its callers wait drops them (their handlers destroyed uncalled) and is
// never posted into afterwards. One known gap, in Asio's strands: a waiter
// whose handler is bound to a strand made after the context's first
// async_acquire, let in by another thread while that context is being
// destroyed, can race with the strand service's shutdown (which runs first).
// Make such strands before acquiring, or end the waiters first.
//
// The decisions are detail::bulkhead_core's, token_bucket_core's and
// sliding_window_core's (detail/limit_core.hpp), tested on made-up times.
#pragma once

#include <steadfast/engine/detail/change_listener.hpp>
#include <steadfast/engine/detail/limit_core.hpp>
#include <steadfast/engine/detail/timed_condition.hpp>
#include <steadfast/engine/error.hpp>
#include <steadfast/engine/watchable.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

namespace steadfast {

namespace detail {

// The waiters of a limiter, by id, until each is let in, refused or
// cancelled: guarded by the limiter's lock, and called outside it (see
// start_acquire).
class waiter_table {
public:
    using finish = std::function<void(error_code)>;
    std::uint64_t next_id() noexcept { return last_.fetch_add(1, std::memory_order_relaxed) + 1; }
    void add(std::uint64_t id, finish f) { table_.emplace(id, std::move(f)); }
    finish take(std::uint64_t id) {
        auto it = table_.find(id);
        if (it == table_.end()) return {};
        finish f = std::move(it->second);
        table_.erase(it);
        return f;
    }
    std::vector<finish> take_all() {
        std::vector<finish> all;
        for (auto& [id, f] : table_) all.push_back(std::move(f));
        table_.clear();
        return all;
    }

private:
    std::atomic<std::uint64_t> last_{0};
    std::unordered_map<std::uint64_t, finish> table_;
};

// Waiters by the execution context their handler runs in. When that context
// shuts down (an io_context destroyed while a caller waits), its waiters
// leave their limiters and their handlers are destroyed uncalled, as Asio
// does with its own pending operations: a limiter that outlives the context
// (shared by several) never posts into it.
class waiter_registry final : public boost::asio::execution_context::service {
public:
    static inline boost::asio::execution_context::id id;
    explicit waiter_registry(boost::asio::execution_context& ctx) : service(ctx) {}

    /// `drop` takes the waiter out of its limiter (if still queued). 0: the
    /// context is shutting down or gone (an acquire started by a destructor
    /// it runs): the caller destroys the handler uncalled, as Asio does with
    /// work posted to it then.
    std::uint64_t add(std::function<void()> drop) {
        std::lock_guard l(m_);
        if (shut_) return 0;
        entries_.emplace(++last_, std::move(drop));
        return last_;
    }
    void remove(std::uint64_t entry) {
        std::function<void()> gone;  // destroyed outside the lock
        std::lock_guard l(m_);
        if (auto it = entries_.find(entry); it != entries_.end()) {
            gone = std::move(it->second);
            entries_.erase(it);
        }
    }

private:
    void shutdown() override {
        std::unordered_map<std::uint64_t, std::function<void()>> all;
        {
            std::lock_guard l(m_);
            shut_ = true;
            all.swap(entries_);
        }
        for (auto& [entry, drop] : all) drop();
    }
    std::mutex m_;
    bool shut_ = false;
    std::uint64_t last_ = 0;
    std::unordered_map<std::uint64_t, std::function<void()>> entries_;
};

// async_acquire for both limiters. `Limiter` gives: std::mutex m_, waiters_
// (a waiter_table), admit(id) -> admission (under the lock), withdraw(id) ->
// bool (under the lock, a waiter cancelled), after_change() (outside it),
// and make_result() building what the handler receives when let in (called
// where it is let in, so that what it holds is given back if the handler
// never runs). Result void: the handler takes the error code alone.
//
// A waiter's completion (its handler and the tracked executor of its
// context) lives in a small shared part of its own, with a mutex. Whoever
// completes it (the thread that lets it in, cancels it or ends the limiter)
// does so outside the limiter's lock, under that mutex: it posts, lets go of
// the completion, and leaves the context's registry, in that order. A
// context shutting down takes the completion out under the same mutex (and
// destroys it uncalled), so it either waits for a completion under way or
// leaves nothing of itself to it. Nothing of the handler is destroyed under
// the limiter's lock: a handler holding a permit of the same limiter gives
// it back there, and a strand shutting down destroys what is posted to it
// at once.
template <class Limiter, class Result, class Handler>
void start_acquire(const std::shared_ptr<Limiter>& self, Handler handler, boost::asio::any_io_executor ex) {
    namespace asio = boost::asio;
    constexpr bool bare = std::is_void_v<Result>;
    using payload = std::conditional_t<bare, bool, Result>;
    auto slot = asio::get_associated_cancellation_slot(handler);
    auto work = asio::prefer(asio::get_associated_executor(handler, ex), asio::execution::outstanding_work.tracked);
    // The handler is kept in memory from its associated allocator (Asio's
    // rule for an operation's state), given back before it runs.
    using handler_allocator = typename std::allocator_traits<
        asio::associated_allocator_t<Handler>>::template rebind_alloc<std::optional<Handler>>;
    auto h = std::allocate_shared<std::optional<Handler>>(handler_allocator(asio::get_associated_allocator(handler)),
                                                          std::move(handler));
    // Completes on the handler's executor: the slot is cleared there first,
    // and the handler's memory is given back there before it runs (the
    // completion is made once, and hands `h` to what it posts: nothing else
    // holds it then).
    auto complete = [h = std::move(h), work, slot](error_code ec, payload r) mutable {
        asio::post(work, [h = std::move(h), slot, ec, r = std::move(r)]() mutable {
            if (slot.is_connected()) slot.clear();
            Handler run = std::move(**h);
            h.reset();
            if constexpr (bare)
                std::move(run)(ec);
            else
                std::move(run)(ec, std::move(r));
        });
    };
    auto result = [](Limiter* l) -> payload {
        if constexpr (bare) {
            return true;
        } else {
            return l->make_result();
        }
    };
    auto& registry = asio::use_service<waiter_registry>(asio::query(work, asio::execution::context));
    using completion = decltype(complete);
    struct waiter {
        std::mutex m;
        std::optional<completion> pending;  // empty: completed, or its context ended
    };
    auto w = std::make_shared<waiter>();
    w->pending.emplace(std::move(complete));
    std::weak_ptr<Limiter> weak = self;
    const std::uint64_t id = self->waiters_.next_id();
    // Registered with the handler's context before it can queue.
    const std::uint64_t key = registry.add([weak, w, id] {
        std::optional<completion> gone;
        {
            std::lock_guard l(w->m);
            if (w->pending) {
                gone.emplace(std::move(*w->pending));
                w->pending.reset();
            }
        }
        gone.reset();  // the handler destroyed uncalled, while its context stands
        if (auto s = weak.lock()) {
            waiter_table::finish f;  // (holds nothing of the context any more)
            bool left = false;
            {
                std::lock_guard l(s->m_);
                left = s->withdraw(id);
                if (left) f = s->waiters_.take(id);
            }
            if (left) s->after_change();
        }
    });
    if (key == 0) return;  // its context is ending: nothing queued, the handler destroyed uncalled
    // Completes the waiter: let in (its result made here), refused or
    // cancelled. Called outside the limiter's lock.
    auto finish = [w, weak, result, &registry, key](error_code ec) {
        auto s = weak.lock();
        [[maybe_unused]] payload unused{};  // let in after its context ended: what it was given goes back
        {
            std::lock_guard l(w->m);
            if (w->pending) {
                struct leave {  // the registry, whatever the post does
                    waiter_registry& r;
                    std::uint64_t key;
                    ~leave() { r.remove(key); }
                } out{registry, key};
                auto c = std::move(*w->pending);
                w->pending.reset();
                c(ec, !ec && s ? result(s.get()) : payload{});
            } else if (!ec && s) {
                unused = result(s.get());
            }
        }
    };
    std::unique_lock lock(self->m_);
    const admission a = self->admit(id);
    if (a != admission::queued) {
        lock.unlock();
        if (a == admission::granted) {
            finish(error_code{});
            self->after_change();
        } else {
            finish(make_error_code(error::queue_full));
        }
        return;
    }
    try {
        self->waiters_.add(id, std::move(finish));
    } catch (...) {
        self->withdraw(id);  // (out of memory) not left queued without a way to tell it
        lock.unlock();
        registry.remove(key);
        throw;
    }
    if (slot.is_connected()) {
        slot.assign([weak, id](asio::cancellation_type type) {
            if (type == asio::cancellation_type::none) return;
            auto s = weak.lock();
            if (!s) return;
            waiter_table::finish f;
            {
                std::lock_guard l(s->m_);
                if (s->withdraw(id)) f = s->waiters_.take(id);
            }
            if (f) {
                f(asio::error::operation_aborted);
                s->after_change();
            }
        });
    }
    lock.unlock();
    self->after_change();
}

}  // namespace detail

/// A bulkhead: at most `limit` callers hold a permit at once; up to `queue`
/// wait for one (0: none wait, a caller without room is refused at once).
class concurrency_limit : public std::enable_shared_from_this<concurrency_limit> {
public:
    struct options {
        std::size_t limit = 0;  // >= 1
        std::size_t queue = 0;
    };
    /// Throws std::invalid_argument for a zero limit.
    /// (It cannot end with waiters: they wait for a permit, and every permit
    /// keeps its limit alive.)
    explicit concurrency_limit(options o) : core_(o.limit, o.queue) {}
    concurrency_limit(const concurrency_limit&) = delete;
    concurrency_limit& operator=(const concurrency_limit&) = delete;

    /// A place, given back when destroyed (or by release()).
    class permit {
    public:
        permit() = default;
        permit(permit&& o) noexcept : owner_(std::move(o.owner_)) {}
        permit& operator=(permit&& o) noexcept {
            if (this != &o) {
                release();
                owner_ = std::move(o.owner_);
            }
            return *this;
        }
        ~permit() { release(); }
        explicit operator bool() const noexcept { return owner_ != nullptr; }
        void release() noexcept {
            if (auto o = std::move(owner_)) o->give_back();
        }

    private:
        friend class concurrency_limit;
        explicit permit(std::shared_ptr<concurrency_limit> o) : owner_(std::move(o)) {}
        std::shared_ptr<concurrency_limit> owner_;
    };

    /// A permit now, or an empty one (no room, or others wait first). Never queues.
    /// (The limit must be owned by a shared_ptr: std::bad_weak_ptr otherwise,
    /// before anything is taken.)
    permit try_acquire() {
        auto self = shared_from_this();
        {
            std::lock_guard l(m_);
            if (!core_.try_acquire()) return {};
        }
        after_change();
        return permit(std::move(self));
    }

    /// Completion signature void(error_code, permit): a permit, or
    /// error::queue_full, or operation_aborted (cancelled while waiting).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_acquire(boost::asio::any_io_executor ex, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code, permit)>(
            [self = shared_from_this()](auto handler, boost::asio::any_io_executor e) {
                detail::start_acquire<concurrency_limit, permit>(self, std::move(handler), std::move(e));
            },
            token, std::move(ex));
    }

    std::size_t in_use() const {
        std::lock_guard l(m_);
        return core_.in_use();
    }
    std::size_t waiting() const {
        std::lock_guard l(m_);
        return core_.waiting();
    }

    /// True while a caller would be let in at once.
    template <class Timer = boost::asio::steady_timer, class Executor>
    std::shared_ptr<watchable> room(const Executor& ex, std::string name = "concurrency_room") {
        auto self = shared_from_this();
        auto c = std::make_shared<detail::timed_condition<Timer, Executor>>(
            std::move(name), ex, self, [l = self.get()]() -> detail::condition_reading {
                std::lock_guard lock(l->m_);
                return {l->core_.room(), std::nullopt};
            });
        c->start(listeners_);
        return c;
    }

private:
    template <class L, class R, class H>
    friend void detail::start_acquire(const std::shared_ptr<L>&, H, boost::asio::any_io_executor);
    detail::admission admit(std::uint64_t id) { return core_.acquire(id); }
    bool withdraw(std::uint64_t id) { return core_.cancel(id); }
    permit make_result() { return permit(shared_from_this()); }
    void after_change() { listeners_.tell(); }
    void give_back() noexcept {
        detail::waiter_table::finish next;
        {
            std::lock_guard l(m_);
            if (auto id = core_.release()) next = waiters_.take(*id);
        }
        if (next) next(error_code{});  // the place passes to it
        after_change();
    }

    mutable std::mutex m_;
    detail::bulkhead_core core_;
    detail::waiter_table waiters_;
    detail::listener_list listeners_;
};

/// A rate limit, of one of two kinds chosen when it is made:
/// - a token bucket (`options`): `per_second` calls a second on average,
///   `burst` at once after a quiet time;
/// - a sliding window (`window_options`): at most `limit` calls in any
///   `segments` steps of window/segments in a row (the calls of a step give
///   their room back `segments` steps later), as .NET's
///   SlidingWindowRateLimiter (which Polly v8's rate limiter wraps)
///   counts: any stretch of `window` less one step holds at most `limit`,
///   where a bucket of the same average (`limit` a window, burst `limit`)
///   lets nearly twice as many into it. Use it for a quota ("100 a minute").
/// Up to `queue` callers wait for their turn (0: a caller without one is
/// refused at once). `Timer` (on the executor given at construction) lets
/// waiters in when their turn comes, and its clock is the limit's
/// (manual_timer in tests).
template <class Timer = boost::asio::steady_timer>
class basic_rate_limit : public std::enable_shared_from_this<basic_rate_limit<Timer>> {
    using clock = typename Timer::clock_type;
    static std::chrono::nanoseconds now() {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch());
    }

public:
    struct options {
        double per_second = 0;    // > 0
        std::uint32_t burst = 1;  // >= 1
        std::size_t queue = 0;
    };
    struct window_options {
        std::uint32_t limit = 0;             // >= 1: calls in any `segments` steps in a row
        std::chrono::nanoseconds window{0};  // > 0, at most a year
        std::uint32_t segments = 10;         // 1 to 1000, at most one a nanosecond of the window
        std::size_t queue = 0;
    };
    /// Throws std::invalid_argument for a rate that is not positive and
    /// finite, or a zero burst. Starts with `burst` tokens.
    basic_rate_limit(boost::asio::any_io_executor ex, options o)
        : core_(detail::token_bucket_core(o.per_second, o.burst, o.queue, now())), timer_(std::move(ex)) {}
    /// Throws std::invalid_argument naming a setting out of range. Starts
    /// with an empty window, its steps counted from now.
    basic_rate_limit(boost::asio::any_io_executor ex, window_options o)
        : core_(detail::sliding_window_core(o.limit, o.window, o.segments, o.queue, now())), timer_(std::move(ex)) {}
    basic_rate_limit(const basic_rate_limit&) = delete;
    basic_rate_limit& operator=(const basic_rate_limit&) = delete;
    /// Waiters still queued complete with operation_aborted.
    ~basic_rate_limit() {
        for (auto& f : waiters_.take_all()) f(boost::asio::error::operation_aborted);
    }

    /// Takes a token now if there is one and nobody waits. Never queues.
    bool try_acquire() {
        {
            std::lock_guard l(m_);
            if (!core_.try_acquire(now())) return false;
        }
        after_change();
        return true;
    }

    /// Completion signature void(error_code): a token was taken, or
    /// error::queue_full, or operation_aborted (cancelled while waiting).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_acquire(boost::asio::any_io_executor ex, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(error_code)>(
            [self = this->shared_from_this()](auto handler, boost::asio::any_io_executor e) {
                detail::start_acquire<basic_rate_limit, void>(self, std::move(handler), std::move(e));
            },
            token, std::move(ex));
    }

    std::size_t waiting() const {
        std::lock_guard l(m_);
        return core_.waiting();
    }
    /// Calls that would be let in now: a bucket's tokens (fractions
    /// included), a window's room.
    double tokens() const {
        std::lock_guard l(m_);
        return core_.tokens(now());
    }

    /// True while a caller would be let in at once (a token or room there,
    /// nobody waiting); a timer on `ex` turns it true when the next token
    /// comes (or a step of the window gives room back).
    template <class Executor>
    std::shared_ptr<watchable> room(const Executor& ex, std::string name = "rate_room") {
        auto self = this->shared_from_this();
        auto c = std::make_shared<detail::timed_condition<Timer, Executor>>(
            std::move(name), ex, self, [l = self.get()]() -> detail::condition_reading {
                std::lock_guard lock(l->m_);
                const auto t = now();
                if (l->core_.room(t)) return {true, std::nullopt};
                // With callers waiting, letting them in tells the condition
                // (after_change); a timer of its own would only race that.
                if (l->core_.waiting() > 0) return {false, std::nullopt};
                return {false, l->core_.room_at(t) - t};
            });
        c->start(listeners_);
        return c;
    }

private:
    template <class L, class R, class H>
    friend void detail::start_acquire(const std::shared_ptr<L>&, H, boost::asio::any_io_executor);
    detail::admission admit(std::uint64_t id) {
        const auto a = core_.acquire(id, now());
        if (a == detail::admission::queued) arm();
        return a;
    }
    bool withdraw(std::uint64_t id) {
        if (!core_.cancel(id)) return false;
        arm();
        return true;
    }
    void after_change() { listeners_.tell(); }

    // Under the lock: the timer set for the first waiter's token.
    void arm() {
        const auto due = core_.next_due();
        if (!due) {
            timer_.cancel();
            return;
        }
        // Rounded up: a clock coarser than nanoseconds must not fire before
        // the token is there (due() would find none and arm again at once).
        timer_.expires_after(std::chrono::ceil<typename Timer::duration>(*due - now()));
        timer_.async_wait([w = this->weak_from_this()](const error_code& ec) {
            if (ec) return;
            if (auto s = w.lock()) s->let_in();
        });
    }
    void let_in() {
        std::vector<detail::waiter_table::finish> in;
        {
            std::lock_guard l(m_);
            for (const std::uint64_t id : core_.due(now()))
                if (auto f = waiters_.take(id)) in.push_back(std::move(f));
            arm();
        }
        // Every one told, even if a post throws (the first throw is passed on).
        std::exception_ptr failed;
        for (auto& f : in) try {
                f(error_code{});
            } catch (...) {
                if (!failed) failed = std::current_exception();
            }
        after_change();
        if (failed) std::rethrow_exception(failed);
    }

    mutable std::mutex m_;
    detail::rate_core core_;
    Timer timer_;
    detail::waiter_table waiters_;
    detail::listener_list listeners_;
};

using rate_limit = basic_rate_limit<>;

}  // namespace steadfast
