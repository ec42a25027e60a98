// Many retrying operations from two threads, each on its own strand, sharing
// one budget and hooks that count. Run under TSan by the test command.
#include <steadfast/engine.hpp>
#include <steadfast/engine/detail/attempt_watch.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <steadfast_test/hooked_executor.hpp>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;

namespace {
// Runs `ioc` on this thread and one more until it runs out of work.
void run_on_two_threads(asio::io_context& ioc) {
    std::thread other([&] { ioc.run(); });
    ioc.run();
    other.join();
}

// 300 callers of `rate`, each on a strand of its own, asking before `ioc`
// runs or (from_the_threads) from the two threads that run it: every one is
// let in once (the queue, 1,000, never fills), none refused, none left
// waiting.
void every_caller_let_in_once(asio::io_context& ioc, const std::shared_ptr<rate_limit>& rate, bool from_the_threads) {
    std::atomic<int> in{0}, refused{0};
    constexpr int ops = 300;
    for (int i = 0; i < ops; ++i) {
        auto strand = asio::make_strand(ioc);
        auto ask = [&, strand] {
            rate->async_acquire(strand, asio::bind_executor(strand, [&](error_code ec) {
                                    if (ec)
                                        refused.fetch_add(1);
                                    else
                                        in.fetch_add(1);
                                }));
        };
        if (from_the_threads)
            asio::post(strand, ask);
        else
            ask();
    }
    run_on_two_threads(ioc);
    BOOST_TEST(in.load() == ops);
    BOOST_TEST(refused.load() == 0);
    BOOST_TEST(rate->waiting() == 0u);
}
}  // namespace

BOOST_AUTO_TEST_SUITE(engine_strands)

BOOST_AUTO_TEST_CASE(two_threads_many_operations) {
    asio::io_context ioc(2);
    auto budget = std::make_shared<retry_budget>(retry_budget::options{.capacity = 1'000'000, .retry_cost = 1});
    std::atomic<int> attempts{0}, retries{0}, done{0}, ok{0};
    auto policy =
        retry_policy{}
            .with_backoff(backoff::exponential(50us, 2.0, 1ms).with_jitter(jitter::full))
            .with_stop(stop::max_attempts(20))
            .with_budget(budget)
            .with_hooks({.after_attempt = [&](const attempt_context&, const classification&, const decision& d) {
                if (d.what == decision::action::retry) retries.fetch_add(1, std::memory_order_relaxed);
            }});
    constexpr int ops = 400;
    for (int i = 0; i < ops; ++i) {
        auto strand = asio::make_strand(ioc);
        // State shared by attempts of one operation, touched only on its strand.
        auto failures_left = std::make_shared<int>(i % 4);
        steadfast::async_retry(
            strand, policy,
            [&, failures_left](const attempt_context&) -> asio::awaitable<error_code> {
                attempts.fetch_add(1, std::memory_order_relaxed);
                if ((*failures_left)-- > 0) co_return asio::error::connection_refused;
                co_return error_code{};
            },
            [&](retry_result<error_code> r) {
                ok += r.ok();
                done.fetch_add(1);
            });
    }
    run_on_two_threads(ioc);
    BOOST_TEST(done.load() == ops);
    BOOST_TEST(ok.load() == ops);
    BOOST_TEST(retries.load() == ops / 4 * (0 + 1 + 2 + 3));
    BOOST_TEST(attempts.load() == ops + retries.load());
    BOOST_TEST(budget->available() <= 1'000'000u);
}

// Attempt timeouts on two threads, on strands and on a thread_pool: the
// shared timer (one a context) is armed and re-armed from both threads, its
// deadlines counted as the io_context's work by hand (an io_context) or
// cancelled once none is pending (a thread_pool: not counted by hand). Each
// run ends: no deadline left keeps the threads, none is lost before it fires.
BOOST_AUTO_TEST_CASE(attempt_timeouts_from_two_threads) {
    std::atomic<int> timed_out{0}, ok{0};
    // Every third operation's attempt outlasts its 2-5 ms timeout; the
    // others end at once under a timeout of an hour.
    auto start = [&](const asio::any_io_executor& ex, int i) {
        const bool slow = i % 3 == 0;
        const auto p = retry_policy{}
                           .with_stop(stop::max_attempts(1))
                           .with_attempt_timeout(slow ? std::chrono::milliseconds(2 + i % 4) : 1h);
        steadfast::async_retry(
            ex, p,
            [slow](const attempt_context&) -> asio::awaitable<error_code> {
                if (!slow) co_return error_code{};
                asio::steady_timer t(co_await asio::this_coro::executor, 1h);
                auto [e] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
                co_return e;  // operation_aborted: cut by the timeout
            },
            [&](retry_result<error_code> r) {
                if (r.last_error() == error_code(steadfast::error::attempt_timeout)) ++timed_out;
                ok += r.ok();
            });
    };
    constexpr int ops = 300;
    {
        asio::io_context ioc(2);
        for (int i = 0; i < ops; ++i) start(asio::make_strand(ioc), i);
        run_on_two_threads(ioc);
        BOOST_TEST(
            steadfast::detail::attempt_timeouts<asio::steady_timer>::of(ioc.get_executor()).counts_work_by_hand());
        BOOST_TEST(timed_out.load() == ops / 3);
        BOOST_TEST(ok.load() == ops - ops / 3);
    }
    timed_out = 0;
    ok = 0;
    {
        asio::thread_pool pool(2);
        for (int i = 0; i < ops; ++i) start(asio::make_strand(pool), i);
        pool.join();  // (would wait an hour if the shared timer stayed armed)
        BOOST_TEST(
            !steadfast::detail::attempt_timeouts<asio::steady_timer>::of(pool.get_executor()).counts_work_by_hand());
        BOOST_TEST(timed_out.load() == ops / 3);
        BOOST_TEST(ok.load() == ops - ops / 3);
    }
}

// async_retry started from a thread that does not run the strand its
// stop-when condition lives on, while that strand flips the condition: the
// initiation must not touch the condition's subscribers (TSan flagged a race
// with notify() when it subscribed there; found by a review).
BOOST_AUTO_TEST_CASE(started_from_another_thread_while_stop_when_flips) {
    struct strand_flag final : watchable {  // changed on its strand only, as the rules say
        strand_flag() : watchable("stop") {}
        bool value() const override { return v_.load(); }
        void set(bool v) {
            if (v_.exchange(v) != v) notify(v);
        }
        std::atomic<bool> v_{false};
    };
    asio::io_context ioc;
    auto strand = asio::make_strand(ioc);
    auto stop = std::make_shared<strand_flag>();
    auto work = asio::make_work_guard(ioc);
    std::atomic<bool> quit{false};
    std::function<void()> flip = [&] {
        stop->set(true);
        stop->set(false);
        if (!quit) asio::post(strand, flip);
    };
    asio::post(strand, flip);
    std::thread runner([&] { ioc.run(); });
    const auto policy = retry_policy{}.with_stop_when(stop).with_stop(stop::max_attempts(1));
    constexpr int ops = 200;
    std::atomic<int> done{0}, ended{0};
    for (int i = 0; i < ops; ++i)
        steadfast::async_retry(
            strand, policy, [](const attempt_context&) -> asio::awaitable<error_code> { co_return error_code{}; },
            [&](retry_result<error_code> r) {
                // Either it ran before a flip, or a flip since its start stopped it.
                if (r.ok() || r.reason() == stop_reason::condition) ended.fetch_add(1);
                done.fetch_add(1);
            });
    while (done.load() < ops) std::this_thread::sleep_for(1ms);
    quit = true;
    work.reset();
    runner.join();
    BOOST_TEST(ended.load() == ops);
    BOOST_TEST(stop->subscriber_count() == 0u);
}

// One breaker shared by operations on two threads: every permit is counted
// once (an outcome, a permit given back, or too late to count), whatever the
// interleaving; the breaker opens under the load and is not left wedged.
BOOST_AUTO_TEST_CASE(two_threads_share_a_breaker) {
    asio::io_context ioc(2);
    breaker_options o;
    o.window_size = 20;
    o.minimum_calls = 10;
    o.failure_rate = 0.5;
    o.break_duration = [](std::uint32_t) { return std::chrono::nanoseconds(200us); };
    o.half_open_calls = 2;
    std::atomic<int> moves{0};
    o.on_transition = [&](const breaker_transition&) { moves.fetch_add(1, std::memory_order_relaxed); };
    auto breaker = std::make_shared<circuit_breaker>(o);
    auto policy = retry_policy{}
                      .with_backoff(backoff::exponential(20us, 2.0, 200us))
                      .with_stop(stop::max_attempts(6))
                      .with_breaker(breaker);
    constexpr int ops = 400;
    std::atomic<int> done{0}, attempts{0};
    for (int i = 0; i < ops; ++i) {
        steadfast::async_retry(
            asio::make_strand(ioc), policy,
            [&, i](const attempt_context& ctx) -> asio::awaitable<error_code> {
                attempts.fetch_add(1, std::memory_order_relaxed);
                // Two operations in three fail on their first two attempts.
                if (i % 3 != 0 && ctx.number <= 2) co_return asio::error::connection_refused;
                co_return error_code{};
            },
            [&](retry_result<error_code>) { done.fetch_add(1); });
    }
    run_on_two_threads(ioc);
    BOOST_TEST(done.load() == ops);
    const auto s = breaker->get_stats();
    BOOST_TEST(s.permitted == static_cast<std::uint64_t>(attempts.load()));
    BOOST_TEST(s.permitted == s.successes + s.failures + s.released + s.stale);
    BOOST_TEST(s.opened >= 1u);
    BOOST_TEST(s.rejected >= 1u);
    BOOST_TEST(static_cast<int>(s.opened + s.half_opened + s.closed) == moves.load());
    // Not wedged: once the last break is over, a call goes through (no
    // half-open trial was lost on the way).
    std::this_thread::sleep_for(2ms);
    BOOST_TEST(static_cast<bool>(breaker->try_acquire()));
}

// One concurrency limit shared by operations on two threads: never more
// holders than the limit, every caller let in or refused once.
BOOST_AUTO_TEST_CASE(two_threads_share_a_concurrency_limit) {
    asio::io_context ioc(2);
    auto limit = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 3, .queue = 1000});
    std::atomic<int> holding{0}, most{0}, done{0};
    constexpr int ops = 400;
    for (int i = 0; i < ops; ++i) {
        auto strand = asio::make_strand(ioc);
        asio::co_spawn(
            strand,
            [&, strand]() -> asio::awaitable<void> {
                auto [ec, permit] = co_await limit->async_acquire(strand, asio::as_tuple(asio::use_awaitable));
                if (ec || !permit) co_return;
                const int now = holding.fetch_add(1) + 1;
                int seen = most.load();
                while (now > seen && !most.compare_exchange_weak(seen, now)) {
                }
                co_await asio::post(strand, asio::use_awaitable);  // hold it across a turn of the loop
                holding.fetch_sub(1);
                done.fetch_add(1);
            },
            asio::detached);
    }
    run_on_two_threads(ioc);
    BOOST_TEST(done.load() == ops);
    BOOST_TEST(most.load() <= 3);
    BOOST_TEST(most.load() >= 1);
    BOOST_TEST(limit->in_use() == 0u);
    BOOST_TEST(limit->waiting() == 0u);
}

// One rate limit shared by operations on two threads: its timer is set under
// the limit's lock from both while its handler lets waiters in; every caller
// is let in once, none twice, and nothing is left waiting.
BOOST_AUTO_TEST_CASE(two_threads_share_a_rate_limit) {
    asio::io_context ioc(2);
    every_caller_let_in_once(
        ioc,
        std::make_shared<rate_limit>(ioc.get_executor(),
                                     rate_limit::options{.per_second = 20000, .burst = 5, .queue = 1000}),
        false);
}

// The same with a sliding window, its callers asking from both threads
// while its timer lets earlier ones in (300 callers, 50 in any 5 ms, in
// steps of 1 ms): every caller is let in once, none twice, none stranded.
BOOST_AUTO_TEST_CASE(two_threads_share_a_sliding_window) {
    asio::io_context ioc(2);
    every_caller_let_in_once(
        ioc,
        std::make_shared<rate_limit>(
            ioc.get_executor(), rate_limit::window_options{.limit = 50, .window = 5ms, .segments = 5, .queue = 1000}),
        true);
}

// An executor that dawdles in execute() (as a thread preempted there would):
// it says when it has begun, then waits 20 ms before posting into its
// io_context.
static test::hooked_executor dawdling_executor(asio::io_context& ctx, std::atomic<bool>* begun) {
    return {ctx.get_executor(),
            [begun] {
                begun->store(true);
                std::this_thread::sleep_for(20ms);
            },
            {}};
}

// A waiter's io_context destroyed on one thread while another thread lets
// it in (a permit given back) or ends the rate limit it waits on, the
// completion's post under way: the context must stand until the post is
// done (then the completion goes with it). Were the post not ordered with
// the context's shutdown (the waiter's own lock), the context would be gone
// under it (ASan: a freed scheduler).
BOOST_AUTO_TEST_CASE(a_waiter_let_in_while_its_io_context_is_destroyed) {
    {
        auto limit = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1, .queue = 1});
        auto held = limit->try_acquire();
        auto other = std::make_unique<asio::io_context>();
        std::atomic<bool> begun{false};
        limit->async_acquire(other->get_executor(), asio::bind_executor(dawdling_executor(*other, &begun),
                                                                        [](error_code, concurrency_limit::permit) {
                                                                            BOOST_ERROR("its handler ran");
                                                                        }));
        std::thread giver([&] { held.release(); });
        while (!begun.load()) std::this_thread::yield();
        other.reset();  // while the giver posts
        giver.join();
        BOOST_TEST(limit->waiting() == 0u);
        BOOST_TEST(limit->in_use() == 0u);  // the waiter's permit went with its context
    }
    for (const bool plain_first : {false, true}) {
        // Two waiters as the rate limit ends: one on a plain (tracked)
        // executor of `other`, one on a dawdling executor of `d`. While the
        // second's post dawdles, `other` is destroyed: what the first's
        // completion kept of `other` (its tracked executor) must be gone by
        // then, whatever order the waiters are told in.
        asio::io_context timers, d;
        auto rate = std::make_shared<rate_limit>(timers.get_executor(),
                                                 rate_limit::options{.per_second = 1, .burst = 1, .queue = 2});
        BOOST_TEST(rate->try_acquire());
        auto other = std::make_unique<asio::io_context>();
        std::atomic<bool> begun{false};
        auto dawdler = [&] {
            rate->async_acquire(d.get_executor(), asio::bind_executor(dawdling_executor(d, &begun), [](error_code) {}));
        };
        auto plain = [&] {
            rate->async_acquire(other->get_executor(), [](error_code) { BOOST_ERROR("its handler ran"); });
        };
        if (plain_first) {
            plain();
            dawdler();
        } else {
            dawdler();
            plain();
        }
        std::thread ender([&] { rate.reset(); });  // its waiters told operation_aborted
        while (!begun.load()) std::this_thread::yield();
        other.reset();
        ender.join();
    }
}

// An io_context destroyed while its waiters wait: a strand made after the
// limiter's registry was (shut down before it: what is posted to it then is
// destroyed at once), one waiter's handler on that strand, another's holding
// the limit's only place. Dropping the second gives the place back and lets
// the first in, whose completion the strand destroys as it is posted (its
// permit given back): no lock of the limit may be held meanwhile.
BOOST_AUTO_TEST_CASE(waiters_of_an_io_context_with_a_strand_shut_down_first) {
    auto first = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1});
    auto limit = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1, .queue = 2});
    bool ran = false;
    {
        asio::io_context x;
        first->async_acquire(x.get_executor(), [](error_code, concurrency_limit::permit) {});  // the registry
        auto held = limit->try_acquire();
        limit->async_acquire(
            x.get_executor(),
            asio::bind_executor(asio::make_strand(x), [&](error_code, concurrency_limit::permit) { ran = true; }));
        limit->async_acquire(x.get_executor(),
                             [held = std::move(held), &ran](error_code, concurrency_limit::permit) { ran = true; });
        BOOST_TEST(limit->waiting() == 2u);
    }
    BOOST_TEST(!ran);
    BOOST_TEST(limit->in_use() == 0u);
    BOOST_TEST(limit->waiting() == 0u);
    BOOST_TEST(first->in_use() == 0u);
}

// An acquire started while its io_context is being destroyed (by the
// destructor of a handler the context destroys): nothing is queued, the
// handler is destroyed uncalled, and the place given back later never
// reaches the gone context (ASan).
BOOST_AUTO_TEST_CASE(an_acquire_started_as_its_io_context_ends_is_dropped) {
    auto limit = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1, .queue = 2});
    auto held = limit->try_acquire();
    bool ran = false;
    {
        auto x = std::make_unique<asio::io_context>();
        limit->async_acquire(x->get_executor(), [](error_code, concurrency_limit::permit) {});  // the registry
        struct late {
            std::shared_ptr<concurrency_limit> limit;
            asio::io_context* x;
            bool* ran;
            late(std::shared_ptr<concurrency_limit> l, asio::io_context* c, bool* r)
                : limit(std::move(l)), x(c), ran(r) {}
            late(late&& o) noexcept : limit(std::move(o.limit)), x(o.x), ran(o.ran) {}
            ~late() {
                if (limit)  // destroyed uncalled by the ending context: acquires on it
                    limit->async_acquire(x->get_executor(),
                                         [r = ran](error_code, concurrency_limit::permit) { *r = true; });
            }
            void operator()() {}
        };
        asio::post(*x, late{limit, x.get(), &ran});
        x.reset();
    }
    BOOST_TEST(limit->waiting() == 0u);
    held.release();  // (before: let in a waiter of the gone context, and posted there)
    BOOST_TEST(limit->in_use() == 0u);
    BOOST_TEST(!ran);
}

// An executor whose execute() posts, then takes 100 ms to return: the
// handler can run (and be done) before the thread that let it in has left
// the limiter's code.
static test::hooked_executor slow_return_executor(asio::io_context& ctx) {
    return {ctx.get_executor(), {}, [] { std::this_thread::sleep_for(100ms); }};
}

// A handler that holds a permit of the limit it waits on, run and done on
// its own thread while the thread that let it in is still in give_back():
// it must be destroyed where it ran, not by the releasing thread under the
// limit's lock (giving its permit back there would take that lock again).
BOOST_AUTO_TEST_CASE(a_handler_holding_a_permit_is_not_destroyed_under_the_limits_lock) {
    asio::io_context b;
    auto guard = asio::make_work_guard(b);
    std::thread runner([&] { b.run(); });
    auto limit = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 2, .queue = 1});
    auto p0 = limit->try_acquire();
    auto p1 = limit->try_acquire();
    auto kept = std::make_shared<concurrency_limit::permit>();
    std::atomic<bool> ran{false};
    limit->async_acquire(b.get_executor(), asio::bind_executor(slow_return_executor(b),
                                                               [p0 = std::move(p0), kept, &ran](
                                                                   error_code, concurrency_limit::permit p) mutable {
                                                                   *kept = std::move(p);
                                                                   ran = true;
                                                               }));
    p1.release();  // lets the waiter in, on this thread
    while (!ran) std::this_thread::yield();
    guard.reset();
    runner.join();
    BOOST_TEST(limit->in_use() == 1u);  // the waiter's permit, kept; p0 went with the handler
    kept->release();
    BOOST_TEST(limit->in_use() == 0u);
}

// A whole pipeline shared by operations on two threads, each on its own
// strand: one rate limit, one bulkhead, one breaker, hedged attempts that
// stall one time in four (the hedge, started 1 ms later on the same strand,
// wins and cancels them). Every call ends once, the hedges' signals and
// outcomes stay on their call's strand, and every permit comes back.
BOOST_AUTO_TEST_CASE(two_threads_share_a_pipeline) {
    asio::io_context ioc(2);
    auto rate = std::make_shared<rate_limit>(ioc.get_executor(),
                                             rate_limit::options{.per_second = 50000, .burst = 10, .queue = 1000});
    auto bulkhead = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 8, .queue = 1000});
    breaker_options bo;
    bo.consecutive_failures = 1000;
    auto breaker = std::make_shared<circuit_breaker>(bo);
    const auto p = pipeline{}
                       .with_rate_limit(rate)
                       .with_concurrency_limit(bulkhead)
                       .with_breaker(breaker)
                       .with_hedging({.max_attempts = 2, .delay = 1ms})
                       .with_timeout(5s);
    std::atomic<int> ok{0}, failed{0}, hedges{0}, cut_short{0};
    constexpr int ops = 200;
    for (int i = 0; i < ops; ++i) {
        auto strand = asio::make_strand(ioc);
        auto attempt = [&, i](const attempt_context& ctx) -> asio::awaitable<error_code> {
            if (ctx.hedge > 0) hedges.fetch_add(1);
            asio::steady_timer t(co_await asio::this_coro::executor, ctx.hedge == 0 && i % 4 == 0 ? 10s : 0s);
            auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
            if (ec == asio::error::operation_aborted) cut_short.fetch_add(1);
            co_return ec;
        };
        async_execute(strand, p, attempt, [&](retry_result<error_code> r) {
            if (r.ok() && !r.value())
                ok.fetch_add(1);
            else
                failed.fetch_add(1);
        });
    }
    run_on_two_threads(ioc);
    BOOST_TEST(ok.load() == ops);
    BOOST_TEST(failed.load() == 0);
    BOOST_TEST(hedges.load() >= ops / 4);     // every stalled first attempt was hedged...
    BOOST_TEST(cut_short.load() >= ops / 4);  // ...and cancelled once its hedge won
    BOOST_TEST(bulkhead->in_use() == 0u);
    BOOST_TEST(bulkhead->waiting() == 0u);
    BOOST_TEST(rate->waiting() == 0u);
    BOOST_TEST(breaker->get_stats().successes == static_cast<std::uint64_t>(ops));
}

BOOST_AUTO_TEST_SUITE_END()
