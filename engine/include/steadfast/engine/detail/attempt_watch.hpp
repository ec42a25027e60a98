// The per-attempt cancellation signal of an attempt that has a timeout or a
// stop-when condition, and the one timer per execution context that serves
// every attempt timeout on it.
//
// The caller's cancellation, the stop-when subscription and the timeout all
// emit on the attempt's own signal, so no coroutine or parallel group races
// the attempt. Attempt timeouts are kept in one ordered set per execution
// context (and clock), served by one timer armed for the earliest: starting
// an attempt whose deadline is later than the armed one (the usual case: the
// next attempt of any retry) sets no OS timer, so a timeout costs a lock and
// a tree insertion, not a system call.
//
// The timer never keeps run() from returning once no timeout is pending. On
// an io_context its wait does not count as outstanding work (taken off with
// the executor's on_work_finished() as it starts, put back as its handler
// runs) and the service counts one unit of work itself while any deadline is
// pending: an armed timer left behind by the last timeout costs nothing and
// is re-armed, or fires and finds nothing due. On any other context the
// timer is cancelled once no timeout is pending, from a handler posted when
// the set empties (a post a call: what the counting saves).
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/execution/context.hpp>
#include <boost/asio/execution/outstanding_work.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/prefer.hpp>
#include <boost/asio/query.hpp>
#include <boost/asio/strand.hpp>
#include <boost/intrusive/set.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

// Counting an io_context's work by hand needs its executor's
// on_work_started/on_work_finished (not with BOOST_ASIO_NO_TS_EXECUTORS), and
// a timer wait that Asio counts once: with BOOST_ASIO_NO_TYPEID (no RTTI) its
// handler_work tracks an any_io_executor's io_context as well. Otherwise the
// posted check serves every context.
#if !defined(BOOST_ASIO_NO_TS_EXECUTORS) && !defined(BOOST_ASIO_NO_TYPEID)
#define STEADFAST_DETAIL_COUNTS_IO_CONTEXT_WORK 1
#else
#define STEADFAST_DETAIL_COUNTS_IO_CONTEXT_WORK 0
#endif

namespace steadfast::detail {

template <class Timer>
class attempt_timeouts;

// A cancellation handler that does nothing: put in a slot in place of one
// that must go, it keeps the slot's memory for the next handler (a slot's
// clear() gives it back, and the next emplace allocates again).
struct ignore_cancellation {
    void operator()(boost::asio::cancellation_type) const noexcept {}
};

template <class Timer>
struct attempt_watch : std::enable_shared_from_this<attempt_watch<Timer>>,
                       boost::intrusive::set_base_hook<boost::intrusive::link_mode<boost::intrusive::safe_link>> {
    using time_point = typename Timer::time_point;

    explicit attempt_watch(boost::asio::any_io_executor e) : ex(std::move(e)) {}
    attempt_watch(const attempt_watch&) = delete;
    attempt_watch& operator=(const attempt_watch&) = delete;
    ~attempt_watch();

    boost::asio::cancellation_signal signal;  // the attempt in flight's
    boost::asio::any_io_executor ex;          // the operation's: where the signal is emitted
    std::uint64_t attempt = 0;                // the attempt in flight (0: none); on `ex` only
    bool timed_out = false;                   // on `ex` only
    // Guarded by the service's mutex:
    time_point deadline{};
    std::uint64_t timing = 0;  // the attempt the deadline is for
    attempt_timeouts<Timer>* service = nullptr;

    friend bool operator<(const attempt_watch& a, const attempt_watch& b) noexcept { return a.deadline < b.deadline; }
};

template <class Timer>
class attempt_timeouts final : public boost::asio::execution_context::service {
public:
    using watch = attempt_watch<Timer>;
    using time_point = typename Timer::time_point;
    static inline boost::asio::execution_context::id id;

    explicit attempt_timeouts(boost::asio::execution_context& ctx) : service(ctx) {}

    /// The service of `ex`'s execution context. The last one a thread asked
    /// for is remembered (use_service takes the context's registry lock):
    /// valid until any context's service shuts down, which bumps
    /// `generation()` (a context destroyed and another made at its address
    /// must not find the old service).
    static attempt_timeouts& of(const boost::asio::any_io_executor& ex) {
        boost::asio::execution_context& ctx = boost::asio::query(ex, boost::asio::execution::context);
        struct last_used {
            boost::asio::execution_context* ctx = nullptr;
            attempt_timeouts* service = nullptr;
            std::uint64_t generation = 0;
        };
        thread_local last_used last;
        const std::uint64_t g = generation().load(std::memory_order_acquire);
        if (last.ctx == &ctx && last.generation == g) return *last.service;
        attempt_timeouts& s = boost::asio::use_service<attempt_timeouts>(ctx);
        last = {&ctx, &s, g};
        return s;
    }

    /// A watch for an operation on `ex`: one given back by an earlier
    /// operation (its signal's memory already there), or a new one. It keeps
    /// `ex` without counting as outstanding work: a pooled watch or the
    /// service's timer must never keep io_context::run() from returning.
    std::shared_ptr<watch> lease(const boost::asio::any_io_executor& ex) {
        boost::asio::any_io_executor plain =
            boost::asio::prefer(ex, boost::asio::execution::outstanding_work.untracked);
        {
            std::lock_guard lock(mu_);
            if (!free_.empty()) {
                auto w = std::move(free_.back());
                free_.pop_back();
                w->ex = std::move(plain);
                return w;
            }
        }
        auto w = std::make_shared<watch>(std::move(plain));
        w->service = this;
        return w;
    }

    /// The operation is done with `w`: kept for another one, unless
    /// something else still holds it (a timeout's emission on its way).
    void give_back(std::shared_ptr<watch> w) {
        // The last attempt's handler goes, and the executor it holds; its
        // memory stays for the next operation's attempt. An empty slot stays
        // empty: nothing to keep, and nothing allocated here (the hedging
        // deadline's release is noexcept).
        if (auto slot = w->signal.slot(); slot.has_handler()) slot.template emplace<ignore_cancellation>();
        {
            std::lock_guard lock(mu_);
            unlink(*w);
            if (w.use_count() == 1 && free_.size() < max_free) {
                w->attempt = 0;
                w->timed_out = false;
                w->ex = {};
                free_.push_back(std::move(w));
                return;
            }
        }
        // Released here, outside the lock (its destructor takes it).
    }

    /// Attempt `n` of `w` times out at `deadline`: then its signal is emitted
    /// on its executor. A deadline at the clock's end never comes: nothing to do.
    /// add() and remove() are called from a handler running on the context
    /// (the engine's steps are): where its work is counted by hand, the last
    /// deadline's unit taken off outside any handler would stop a run() that
    /// has nothing else to do before the next add().
    void add(watch& w, time_point deadline, std::uint64_t n) {
        std::lock_guard lock(mu_);
        if (deadline == time_point::max()) return unlink(w);
        if (w.is_linked()) set_.erase(set_.iterator_to(w));  // replaced at once
        w.deadline = deadline;
        w.timing = n;
        set_.insert(w);
        if (!timer_) {
            ioc_ = io_context_of(w.ex);
            timer_.emplace(ioc_ ? boost::asio::any_io_executor(ioc_->get_executor()) : w.ex);
        }
        settle();  // before the wait below is taken off the count
        if (deadline < armed_) arm(deadline);
    }

    /// The attempt ended: its timeout goes.
    void remove(watch& w) {
        std::lock_guard lock(mu_);
        unlink(w);
    }

    /// Whether this context's work is counted by hand (an io_context, once a
    /// first deadline has come), rather than the timer cancelled by a posted
    /// check. For tests.
    bool counts_work_by_hand() {
        std::lock_guard lock(mu_);
        return ioc_ != nullptr;
    }

private:
    // The io_context `ex` runs on (plainly or through a strand), whose work
    // the service counts by hand (its executor's on_work_started and
    // on_work_finished); null for any other executor.
    template <std::uintptr_t... Bits>
    static boost::asio::io_context* io_context_of(const boost::asio::any_io_executor& ex,
                                                  std::integer_sequence<std::uintptr_t, Bits...>) noexcept {
        boost::asio::io_context* found = nullptr;
        auto plain = [&](auto* e) {
            if (e) found = &boost::asio::query(*e, boost::asio::execution::context);
            return found != nullptr;
        };
        auto stranded = [&](auto* s) {
            if (s) found = &boost::asio::query(s->get_inner_executor(), boost::asio::execution::context);
            return found != nullptr;
        };
        using boost::asio::io_context;
        using boost::asio::strand;
        (void)((plain(ex.target<io_context::basic_executor_type<std::allocator<void>, Bits>>()) ||
                stranded(ex.target<strand<io_context::basic_executor_type<std::allocator<void>, Bits>>>())) ||
               ...);
        return found;
    }
    static boost::asio::io_context* io_context_of(const boost::asio::any_io_executor& ex) noexcept {
#if STEADFAST_DETAIL_COUNTS_IO_CONTEXT_WORK
        // The executor bits other than outstanding_work.tracked (a watch's
        // executor is untracked): blocking.never, relationship.continuation.
        return io_context_of(ex, std::integer_sequence<std::uintptr_t, 0, 1, 2, 3>{});
#else
        (void)ex;
        return nullptr;
#endif
    }
    // The io_context's count of outstanding work, up or down by one.
    static void count_work(boost::asio::io_context* ioc, bool started) noexcept {
#if STEADFAST_DETAIL_COUNTS_IO_CONTEXT_WORK
        if (started)
            ioc->get_executor().on_work_started();
        else
            ioc->get_executor().on_work_finished();
#else
        (void)ioc;
        (void)started;
#endif
    }

    static std::atomic<std::uint64_t>& generation() noexcept {
        static std::atomic<std::uint64_t> g{0};
        return g;
    }

    void shutdown() override {
        generation().fetch_add(1, std::memory_order_acq_rel);  // no thread's remembered service is this one now
        std::vector<std::shared_ptr<watch>> drop;              // destroyed outside the lock
        std::lock_guard lock(mu_);
        set_.clear();
        settle();
        drop.swap(free_);
        armed_ = time_point::max();
        timer_.reset();
    }

    // With mu_ held: where the context's work is counted by hand, one unit
    // while any deadline is pending. Called after each change of the set
    // (in add, after the insertion: a deadline replaced by another is never
    // counted down between, and the unit is there before arm() takes the
    // timer's wait off the count).
    void settle() {
        if (!ioc_ || counting_ == !set_.empty()) return;
        counting_ = !set_.empty();
        count_work(ioc_, counting_);
    }

    // With mu_ held.
    void unlink(watch& w) {
        if (!w.is_linked()) return;
        set_.erase(set_.iterator_to(w));
        settle();
        if (ioc_) return;  // the armed timer holds no work: left as it is
        if (set_.empty() && armed_ != time_point::max() && !idle_check_) {
            // Cancel the timer if nothing comes in the meantime (a retry that
            // starts its next attempt at once keeps the timer as it is).
            idle_check_ = true;
            boost::asio::post(timer_->get_executor(), [this] {
                std::lock_guard later(mu_);
                idle_check_ = false;
                if (set_.empty() && armed_ != time_point::max()) {
                    armed_ = time_point::max();
                    timer_->cancel();
                }
            });
        }
    }

    // With mu_ held; `at` is never the clock's end.
    void arm(time_point at) {
        armed_ = at;
        timer_->expires_at(at);  // a wait pending ends with operation_aborted
        timer_->async_wait([this, at, ioc = ioc_](const boost::system::error_code& ec) {
            if (ioc) count_work(ioc, true);  // counted down as this returns
            if (!ec) fire(at);
        });
        // The wait just counted itself: taken off. The unit settle() holds
        // for the deadline being armed keeps the count above zero.
        if (ioc_) count_work(ioc_, false);
    }

    void fire(time_point at) {
        struct emission {
            std::shared_ptr<watch> w;
            std::uint64_t attempt;
            boost::asio::any_io_executor ex;
        };
        std::vector<emission> due;
        {
            std::lock_guard lock(mu_);
            if (at != armed_) return;  // re-armed since
            struct settle_on_exit {    // whatever throws below (push_back, arm)
                attempt_timeouts& s;
                ~settle_on_exit() { s.settle(); }
            } settled{*this};
            armed_ = time_point::max();
            const auto now = Timer::clock_type::now();
            while (!set_.empty() && set_.begin()->deadline <= now) {
                watch& w = *set_.begin();
                set_.erase(set_.begin());
                if (auto sp = w.weak_from_this().lock()) due.push_back({std::move(sp), w.timing, w.ex});
            }
            if (!set_.empty()) arm(set_.begin()->deadline);
        }
        // Outside the lock, and posted rather than run here: the attempt's
        // cancellation may end it, which removes timeouts under the lock.
        for (auto& [sp, n, ex] : due) {
            boost::asio::post(ex, [sp = std::move(sp), n = n] {
                if (sp->attempt != n) return;  // that attempt has ended
                sp->timed_out = true;
                sp->signal.emit(boost::asio::cancellation_type::all);
            });
        }
    }

    using timer_type = typename Timer::template rebind_executor<boost::asio::any_io_executor>::other;
    std::mutex mu_;
    boost::intrusive::multiset<watch> set_;
    std::optional<timer_type> timer_;  // made on first use
    static constexpr std::size_t max_free = 64;
    std::vector<std::shared_ptr<watch>> free_;  // given back, for the next operations
    time_point armed_ = time_point::max();      // the pending wait's expiry (max: none)
    bool idle_check_ = false;                   // (contexts whose work is not counted by hand)
    boost::asio::io_context* ioc_ = nullptr;    // io_context_of() the first timeout's executor (set with timer_)
    bool counting_ = false;                     // a unit of the context's work held: set_ is not empty
};

template <class Timer>
attempt_watch<Timer>::~attempt_watch() {
    if (service) service->remove(*this);
}

}  // namespace steadfast::detail
