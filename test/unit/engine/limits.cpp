// concurrency_limit and rate_limit (steadfast/engine/limits.hpp): their
// decisions on made-up times (detail/limit_core.hpp: admission, the bounded
// queue, first come first served, the bucket's arithmetic), then the shared
// objects on virtual time: async_acquire's completion (never inline, queue
// full, every cancellation type), room() as a condition, and waiters of a
// limiter that ends. The two-thread case is in strands.cpp (TSan).
#include <steadfast/engine.hpp>
#include <steadfast/engine/manual_clock.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_allocator.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <steadfast_test/counting_allocator.hpp>
#include <steadfast_test/virtual_time.hpp>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;
using steadfast::detail::admission;
using steadfast::detail::bulkhead_core;
using steadfast::detail::sliding_window_core;
using steadfast::detail::token_bucket_core;
using steadfast_test::alloc_stats;
using steadfast_test::counting_allocator;
using steadfast_test::virtual_time;

namespace {
std::int64_t ms(std::chrono::nanoseconds d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}
}  // namespace

BOOST_AUTO_TEST_SUITE(engine_limits)

BOOST_AUTO_TEST_CASE(bulkhead_admits_queues_in_order_and_refuses) {
    bulkhead_core b(2, 2);
    BOOST_TEST((b.acquire(1) == admission::granted));
    BOOST_TEST((b.acquire(2) == admission::granted));
    BOOST_TEST(!b.room());
    BOOST_TEST((b.acquire(3) == admission::queued));
    BOOST_TEST((b.acquire(4) == admission::queued));
    BOOST_TEST((b.acquire(5) == admission::rejected));
    BOOST_TEST(!b.try_acquire());
    BOOST_TEST((b.release() == std::optional<std::uint64_t>(3)));  // first come, first served
    BOOST_TEST(b.in_use() == 2u);                                  // 3 took the place over
    BOOST_TEST(b.cancel(4));
    BOOST_TEST(!b.cancel(4));
    BOOST_TEST(!b.release().has_value());
    BOOST_TEST(b.in_use() == 1u);
    BOOST_TEST(b.room());
    BOOST_TEST(!b.release().has_value());
    BOOST_TEST(!b.release().has_value());  // nothing held: not below zero
    BOOST_TEST(b.in_use() == 0u);
    BOOST_CHECK_THROW(bulkhead_core(0, 1), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(a_bulkhead_without_a_queue_refuses_at_once) {
    bulkhead_core b(1, 0);
    BOOST_TEST((b.acquire(1) == admission::granted));
    BOOST_TEST((b.acquire(2) == admission::rejected));
}

BOOST_AUTO_TEST_CASE(token_bucket_arithmetic) {
    // 10 a second, 2 at once, 2 may wait.
    token_bucket_core t(10, 2, 2, 0ms);
    BOOST_TEST((t.acquire(1, 0ms) == admission::granted));
    BOOST_TEST((t.acquire(2, 0ms) == admission::granted));
    BOOST_TEST((t.acquire(3, 0ms) == admission::queued));
    BOOST_TEST((t.acquire(4, 0ms) == admission::queued));
    BOOST_TEST((t.acquire(5, 0ms) == admission::rejected));
    BOOST_TEST(ms(*t.next_due()) == 100);
    BOOST_TEST(ms(t.room_at(0ms)) == 300);  // two waiters' tokens first
    BOOST_TEST(t.due(99ms).empty());
    BOOST_TEST(t.due(100ms) == std::vector<std::uint64_t>{3}, boost::test_tools::per_element());
    BOOST_TEST(ms(*t.next_due()) == 200);
    BOOST_TEST(!t.try_acquire(250ms));  // a token is there, but 4 waits for it: no overtaking
    BOOST_TEST(t.cancel(4));
    BOOST_TEST(!t.next_due().has_value());
    BOOST_TEST(t.try_acquire(250ms));
    // A quiet time saves up to the burst, no more.
    BOOST_TEST(t.tokens(60s) == 2.0);
    BOOST_TEST(t.room(60s));
    BOOST_TEST(ms(t.room_at(60s)) == 60000);
}

BOOST_AUTO_TEST_CASE(token_bucket_keeps_for_waiters_what_came_in_late) {
    // 10 a second, 1 at once: three wait. A timer that fires late (350 ms,
    // not 100) must not cost them: 3.5 tokens came in, three are served.
    token_bucket_core t(10, 1, 3, 0ms);
    BOOST_TEST(t.try_acquire(0ms));
    for (std::uint64_t id = 1; id <= 3; ++id) BOOST_TEST((t.acquire(id, 0ms) == admission::queued));
    BOOST_TEST(t.due(350ms) == (std::vector<std::uint64_t>{1, 2, 3}), boost::test_tools::per_element());
    BOOST_TEST(t.tokens(350ms) == 0.5);  // and what is left is capped again
}

BOOST_AUTO_TEST_CASE(a_tiny_rate_saturates_instead_of_overflowing) {
    token_bucket_core t(1e-12, 1, 2, 0ms);
    BOOST_TEST(t.try_acquire(0ms));
    BOOST_TEST((t.acquire(1, 0ms) == admission::queued));
    BOOST_TEST((t.next_due() == std::optional<std::chrono::nanoseconds>(std::chrono::nanoseconds::max())));
    BOOST_TEST((t.room_at(0ms) == std::chrono::nanoseconds::max()));
}

BOOST_AUTO_TEST_CASE(token_bucket_refuses_bad_settings_by_name) {
    try {
        token_bucket_core t(0, 1, 0, 0ms);
        BOOST_FAIL("a rate of 0 was accepted");
    } catch (const std::invalid_argument& e) {
        BOOST_TEST(std::string(e.what()).find("per_second") != std::string::npos);
    }
    BOOST_CHECK_THROW(token_bucket_core(std::numeric_limits<double>::infinity(), 1, 0, 0ms), std::invalid_argument);
    BOOST_CHECK_THROW(token_bucket_core(5, 0, 0, 0ms), std::invalid_argument);
}

BOOST_AUTO_TEST_CASE(sliding_window_arithmetic) {
    // 3 calls in any second, the window sliding in steps of 250 ms; 2 may wait.
    sliding_window_core w(3, 1s, 4, 2, 0ms);
    BOOST_TEST(w.tokens(0ms) == 3.0);
    BOOST_TEST((w.acquire(1, 0ms) == admission::granted));    // step 0
    BOOST_TEST((w.acquire(2, 100ms) == admission::granted));  // step 0
    BOOST_TEST((w.acquire(3, 300ms) == admission::granted));  // step 1
    BOOST_TEST((w.acquire(4, 400ms) == admission::queued));   // full
    BOOST_TEST((w.acquire(5, 400ms) == admission::queued));
    BOOST_TEST((w.acquire(6, 400ms) == admission::rejected));  // the queue too
    BOOST_TEST(w.tokens(400ms) == 0.0);
    // Step 0's two calls leave the window when step 4 begins, at 1 s: both
    // waiters come in then, and count in step 4.
    BOOST_TEST(ms(*w.next_due()) == 1000);
    BOOST_TEST(w.due(999ms).empty());
    BOOST_TEST(w.due(1000ms) == (std::vector<std::uint64_t>{4, 5}), boost::test_tools::per_element());
    BOOST_TEST(!w.next_due().has_value());
    BOOST_TEST(w.tokens(1000ms) == 0.0);  // step 1's call and the two just let in
    BOOST_TEST(!w.room(1000ms));
    BOOST_TEST(ms(w.room_at(1000ms)) == 1250);  // step 1's call leaves at 1.25 s
    BOOST_TEST(!w.room(1249ms));
    BOOST_TEST(w.tokens(1250ms) == 1.0);
    BOOST_TEST(w.room(1250ms));
    BOOST_TEST(w.tokens(1999ms) == 1.0);
    BOOST_TEST(w.tokens(2000ms) == 3.0);  // step 4's calls leave at 2 s
    // A quiet time longer than the window: everything has left.
    BOOST_TEST(w.try_acquire(60s));
    BOOST_TEST(w.tokens(60s) == 2.0);
}

BOOST_AUTO_TEST_CASE(a_sliding_window_holds_its_limit_in_any_window_less_one_step) {
    // 5 calls in any 10 steps of 100 ms; callers at random milliseconds
    // (fixed seed) for 20 s, each one try_acquire. Any stretch of 900 ms (the
    // window less one step), at any offset, holds at most 5 of those let in.
    // A token bucket of the same average (5 a second, burst 5) lets more into
    // some stretch of 900 ms; the window does not.
    auto most_in_900ms = [](const std::vector<std::int64_t>& in) {
        std::size_t most = 0;
        for (std::size_t i = 0; i < in.size(); ++i) {
            std::size_t j = i;
            while (j < in.size() && in[j] < in[i] + 900) ++j;
            most = std::max(most, j - i);
        }
        return most;
    };
    std::mt19937 rng(29);
    std::vector<std::int64_t> arrivals;
    for (std::int64_t t = 0; t < 20000; ++t)
        if (rng() % 20 == 0) arrivals.push_back(t);  // about 50 a second: most are refused
    sliding_window_core w(5, 1s, 10, 0, 0ms);
    token_bucket_core b(5, 5, 0, 0ms);
    std::vector<std::int64_t> in_window, in_bucket;
    for (const std::int64_t t : arrivals) {
        if (w.try_acquire(std::chrono::milliseconds(t))) in_window.push_back(t);
        if (b.try_acquire(std::chrono::milliseconds(t))) in_bucket.push_back(t);
    }
    BOOST_TEST(in_window.size() >= 80u);  // it lets calls in: about 5 a second
    BOOST_TEST(most_in_900ms(in_window) <= 5u);
    BOOST_TEST(most_in_900ms(in_bucket) > 5u);
    // Every step's calls are at most what the 9 steps before it left room for.
    for (std::int64_t step = 0; step < 200; ++step) {
        const auto n = std::count_if(in_window.begin(), in_window.end(),
                                     [&](std::int64_t t) { return t >= (step - 9) * 100 && t < (step + 1) * 100; });
        BOOST_TEST_REQUIRE(n <= 5, "steps " << step - 9 << " to " << step << " hold " << n);
    }
}

BOOST_AUTO_TEST_CASE(a_sliding_window_waiter_cancelled_gives_its_turn_to_the_next) {
    sliding_window_core w(1, 100ms, 2, 3, 0ms);
    BOOST_TEST(w.try_acquire(0ms));
    BOOST_TEST((w.acquire(1, 0ms) == admission::queued));
    BOOST_TEST((w.acquire(2, 0ms) == admission::queued));
    BOOST_TEST(w.cancel(1));
    BOOST_TEST(!w.cancel(1));  // gone already
    BOOST_TEST(w.waiting() == 1u);
    BOOST_TEST(w.due(100ms) == std::vector<std::uint64_t>{2}, boost::test_tools::per_element());
    BOOST_TEST(w.cancel(3) == false);
    BOOST_TEST(!w.next_due().has_value());
}

BOOST_AUTO_TEST_CASE(a_sliding_window_whose_clock_goes_back_counts_in_the_step_it_left) {
    // 1 call in any 20 ms, steps of 10 ms. A read of the clock that goes back
    // (to before the origin, even) is the step already reached, not an
    // earlier one that would have room again.
    sliding_window_core w(1, 20ms, 2, 0, 5ms);
    BOOST_TEST(w.try_acquire(15ms));   // step 1
    BOOST_TEST(!w.try_acquire(0ms));   // before the origin: still step 1
    BOOST_TEST(!w.try_acquire(10ms));  // back to step 0's time: still step 1
    BOOST_TEST(w.tokens(0ms) == 0.0);
    BOOST_TEST(!w.try_acquire(25ms));  // step 2: step 1's call still in the window
    BOOST_TEST(w.try_acquire(35ms));   // step 3: it has left
}

BOOST_AUTO_TEST_CASE(a_sliding_window_after_a_long_quiet_time_is_empty_and_quick) {
    // A year of quiet in steps of 100 ns: the window is empty at once (its
    // steps are not walked one by one).
    sliding_window_core w(2, 1us, 10, 1, 0ms);
    BOOST_TEST(w.try_acquire(0ms));
    BOOST_TEST(w.try_acquire(0ms));
    BOOST_TEST((w.acquire(1, 0ms) == admission::queued));
    const auto later = std::chrono::nanoseconds(std::chrono::hours(24 * 365));
    BOOST_TEST(w.due(later) == std::vector<std::uint64_t>{1}, boost::test_tools::per_element());
    BOOST_TEST(w.tokens(later) == 1.0);
    BOOST_TEST(w.try_acquire(later));
    BOOST_TEST(!w.room(later));
    BOOST_TEST((w.room_at(later) == later + 1us));
}

BOOST_AUTO_TEST_CASE(a_newcomer_that_moves_the_window_on_leaves_the_waiters_their_turn) {
    // 1 call in any 100 ms, steps of 50 ms; a caller waits for step 0's call
    // to leave (at 100 ms). A newcomer comes at 180 ms, before the waiter's
    // turn was taken: asking moves the window on (the room is back), but it
    // queues behind the waiter, whose turn is now, not at a next release
    // (there is none: the window is empty).
    sliding_window_core w(1, 100ms, 2, 2, 0ms);
    BOOST_TEST(w.try_acquire(0ms));
    BOOST_TEST((w.acquire(1, 10ms) == admission::queued));
    BOOST_TEST(ms(*w.next_due()) == 100);
    BOOST_TEST((w.acquire(2, 180ms) == admission::queued));
    BOOST_REQUIRE(w.next_due().has_value());
    BOOST_TEST(ms(*w.next_due()) <= 180);
    BOOST_TEST(w.due(180ms) == std::vector<std::uint64_t>{1}, boost::test_tools::per_element());
    BOOST_TEST(ms(*w.next_due()) == 250);  // the waiter's call (step 3) leaves at 250 ms
}

BOOST_AUTO_TEST_CASE(sliding_window_refuses_bad_settings_by_name) {
    auto refused = [](auto make, const char* name) {
        try {
            make();
        } catch (const std::invalid_argument& e) {
            return std::string(e.what()).find(name) != std::string::npos;
        }
        return false;
    };
    BOOST_TEST(refused([] { sliding_window_core(0, 1s, 10, 0, 0ms); }, "limit"));
    BOOST_TEST(refused([] { sliding_window_core(1, 1s, 0, 0, 0ms); }, "segments"));
    BOOST_TEST(refused([] { sliding_window_core(1, 1s, 1001, 0, 0ms); }, "segments"));
    BOOST_TEST(refused([] { sliding_window_core(1, 0s, 10, 0, 0ms); }, "window"));
    BOOST_TEST(refused([] { sliding_window_core(1, -1s, 10, 0, 0ms); }, "window"));
    BOOST_TEST(refused([] { sliding_window_core(1, std::chrono::hours(24 * 367), 10, 0, 0ms); }, "window"));
    BOOST_TEST(refused([] { sliding_window_core(1, std::chrono::nanoseconds(5), 10, 0, 0ms); }, "window"));
    BOOST_CHECK_NO_THROW(sliding_window_core(1, std::chrono::hours(24 * 366), 1, 0, 0ms));
    BOOST_CHECK_NO_THROW(sliding_window_core(1, std::chrono::nanoseconds(10), 10, 0, 0ms));
}

BOOST_AUTO_TEST_CASE(concurrency_limit_completes_never_inline_and_in_order) {
    asio::io_context ioc;
    auto limit = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1, .queue = 1});
    std::vector<std::string> got;
    std::optional<concurrency_limit::permit> first, second;
    limit->async_acquire(ioc.get_executor(), [&](error_code ec, concurrency_limit::permit p) {
        got.push_back("1:" + ec.message());
        first.emplace(std::move(p));
    });
    limit->async_acquire(ioc.get_executor(), [&](error_code ec, concurrency_limit::permit p) {
        got.push_back("2:" + ec.message());
        second.emplace(std::move(p));
    });
    limit->async_acquire(ioc.get_executor(), [&](error_code ec, concurrency_limit::permit p) {
        BOOST_TEST(!p);
        BOOST_TEST((ec == error::queue_full));
        got.push_back("3:full");
    });
    BOOST_TEST(got.empty());  // never inside async_acquire
    ioc.poll();               // (a waiter keeps the io_context busy, as a pending timer would)
    BOOST_TEST(got == (std::vector<std::string>{"1:Success", "3:full"}), boost::test_tools::per_element());
    BOOST_TEST(limit->in_use() == 1u);
    BOOST_TEST(limit->waiting() == 1u);
    first->release();  // the place passes to the waiter
    ioc.restart();
    ioc.poll();
    BOOST_TEST(got.size() == 3u);
    BOOST_TEST(static_cast<bool>(*second));
    BOOST_TEST(limit->in_use() == 1u);
    second.reset();
    BOOST_TEST(limit->in_use() == 0u);
    BOOST_TEST(static_cast<bool>(limit->try_acquire()));
}

BOOST_AUTO_TEST_CASE(the_handler_runs_on_its_own_executor_not_the_one_passed) {
    asio::io_context ioc, handlers;
    auto limit = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1, .queue = 1});
    auto held = limit->try_acquire();
    bool ran = false;
    limit->async_acquire(ioc.get_executor(),
                         asio::bind_executor(handlers.get_executor(), [&](error_code ec, concurrency_limit::permit p) {
                             BOOST_TEST(!ec);
                             BOOST_TEST(static_cast<bool>(p));
                             BOOST_TEST(handlers.get_executor().running_in_this_thread());
                             ran = true;
                         }));
    held.release();  // lets it in
    ioc.poll();
    BOOST_TEST(!ran);  // not on `ex`
    handlers.poll();
    BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(cancelling_a_waiter_of_every_type_frees_its_place_in_the_queue) {
    for (auto type :
         {asio::cancellation_type::terminal, asio::cancellation_type::partial, asio::cancellation_type::total}) {
        asio::io_context ioc;
        auto limit = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1, .queue = 1});
        auto held = limit->try_acquire();
        BOOST_REQUIRE(held);
        asio::cancellation_signal cancel;
        std::optional<error_code> out;
        limit->async_acquire(ioc.get_executor(), asio::bind_cancellation_slot(
                                                     cancel.slot(), [&](error_code ec, concurrency_limit::permit p) {
                                                         BOOST_TEST(!p);
                                                         out = ec;
                                                     }));
        ioc.poll();
        BOOST_TEST(limit->waiting() == 1u);
        cancel.emit(type);
        ioc.restart();
        ioc.poll();
        BOOST_REQUIRE(out.has_value());
        BOOST_TEST((*out == asio::error::operation_aborted));
        BOOST_TEST(limit->waiting() == 0u);
        BOOST_TEST(limit->in_use() == 1u);  // the holder still holds
        held.release();
        BOOST_TEST(limit->in_use() == 0u);  // and nobody took the cancelled waiter's turn
    }
}

BOOST_AUTO_TEST_CASE(a_waiter_keeps_its_handler_in_the_handlers_allocator_and_frees_it_before_running) {
    // Let in, cancelled, refused, and a rate limit's waiter: the handler is
    // kept in memory from its associated allocator, given back before it runs.
    for (int way = 0; way < 4; ++way) {
        BOOST_TEST_CONTEXT("way " << way) {
            asio::io_context ioc;
            auto limit = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1, .queue = 1});
            // The next token comes 500 ms after the first is taken: the
            // waiter still waits at the poll below on a loaded machine (at
            // 1,000 a second, 1 ms, a slow ASan run saw it let in at once).
            auto rate = std::make_shared<rate_limit>(ioc.get_executor(),
                                                     rate_limit::options{.per_second = 2, .burst = 1, .queue = 1});
            auto held = limit->try_acquire();
            BOOST_REQUIRE(held);
            BOOST_REQUIRE(rate->try_acquire());
            if (way == 2)  // the queue's one place taken: the next is refused
                limit->async_acquire(ioc.get_executor(), [](error_code, concurrency_limit::permit) {});
            alloc_stats stats;
            asio::cancellation_signal cancel;
            bool ran = false;
            auto check = [&](error_code ec) {
                BOOST_TEST(stats.live == 0);  // given back before the handler runs
                BOOST_TEST(((way == 0 || way == 3) ? !ec : !!ec));
                ran = true;
            };
            if (way == 3) {
                rate->async_acquire(ioc.get_executor(), asio::bind_allocator(counting_allocator<void>(&stats),
                                                                             [&](error_code ec) { check(ec); }));
            } else {
                limit->async_acquire(
                    ioc.get_executor(),
                    asio::bind_cancellation_slot(
                        cancel.slot(),
                        asio::bind_allocator(counting_allocator<void>(&stats),
                                             [&](error_code ec, concurrency_limit::permit) { check(ec); })));
            }
            ioc.poll();
            BOOST_TEST(stats.allocations >= 1);
            BOOST_TEST(stats.live == (way == 2 ? 0 : 1));  // kept while it waits
            if (way == 0) held.release();
            if (way == 1) cancel.emit(asio::cancellation_type::terminal);
            ioc.restart();
            ioc.run_for(std::chrono::seconds(way == 3 ? 2 : 1));  // (way 2's first waiter never goes)
            BOOST_TEST(ran);
            BOOST_TEST(stats.live == 0);
        }
    }
}

BOOST_AUTO_TEST_CASE(concurrency_room_is_a_condition) {
    asio::io_context ioc;
    auto limit = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1});
    auto room = limit->room(ioc.get_executor());
    BOOST_TEST(room->value());
    std::vector<bool> seen;
    watchable::subscription sub;
    room->subscribe(sub, [&](bool v) { seen.push_back(v); });
    auto p = limit->try_acquire();
    ioc.poll();
    BOOST_TEST(!room->value());
    p.release();
    ioc.restart();
    ioc.poll();
    BOOST_TEST(room->value());
    BOOST_TEST(seen == (std::vector<bool>{false, true}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_reader_that_saw_no_room_is_told_when_room_is_back) {
    // The room went and came back before the condition's executor ran; a
    // gate read "no room" in between (live) and waits: it must be told.
    asio::io_context ioc;
    auto limit = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1});
    auto room = limit->room(ioc.get_executor());
    ioc.poll();
    auto p = limit->try_acquire();
    BOOST_TEST(!room->value());  // read live, as retry_fsm reads a gate
    std::vector<bool> seen;
    watchable::subscription sub;
    room->subscribe(sub, [&](bool v) { seen.push_back(v); });
    p.release();
    ioc.restart();
    ioc.poll();
    BOOST_TEST(seen == (std::vector<bool>{true}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_waiter_whose_io_context_ends_leaves_the_queue) {
    // One limit shared by two io_contexts: the second is destroyed while its
    // coroutine waits. The waiter leaves the queue, its frame destroyed
    // uncalled (as Asio does with its own operations); releasing the place
    // later posts into nothing (ASan would see a freed scheduler).
    auto limit = std::make_shared<concurrency_limit>(concurrency_limit::options{.limit = 1, .queue = 4});
    auto held = limit->try_acquire();
    bool resumed = false, frame_gone = false;
    {
        asio::io_context other;
        struct on_exit {
            bool* flag;
            ~on_exit() { *flag = true; }
        };
        asio::co_spawn(
            other,
            [&]() -> asio::awaitable<void> {
                on_exit guard{&frame_gone};
                auto [ec, p] = co_await limit->async_acquire(co_await asio::this_coro::executor,
                                                             asio::as_tuple(asio::use_awaitable));
                resumed = true;
            },
            asio::detached);
        other.poll();
        BOOST_TEST(limit->waiting() == 1u);
    }
    BOOST_TEST(limit->waiting() == 0u);
    BOOST_TEST(frame_gone);
    held.release();
    BOOST_TEST(limit->in_use() == 0u);
    BOOST_TEST(!resumed);
}

BOOST_AUTO_TEST_CASE(rate_room_comes_back_after_its_last_waiter_left_with_its_io_context) {
    // While callers wait, room() sets no timer of its own (letting them in
    // tells it). The only waiter leaves because its io_context ends: room()
    // must be told, or a gate on it waits for good.
    virtual_time vt;
    asio::io_context ioc;
    auto rate = std::make_shared<basic_rate_limit<manual_timer>>(
        ioc.get_executor(), basic_rate_limit<manual_timer>::options{.per_second = 4, .burst = 1, .queue = 1});
    auto room = rate->room(ioc.get_executor());
    std::vector<std::pair<bool, std::int64_t>> seen;
    watchable::subscription sub;
    room->subscribe(sub, [&](bool v) { seen.emplace_back(v, ms(virtual_time::now())); });
    BOOST_TEST(rate->try_acquire());
    {
        asio::io_context other;
        rate->async_acquire(other.get_executor(), [](error_code) { BOOST_ERROR("its handler ran"); });
        ioc.poll();  // room() reads "no room, a caller waits": no timer
        BOOST_TEST(rate->waiting() == 1u);
    }
    BOOST_TEST(rate->waiting() == 0u);
    ioc.restart();
    steadfast::run_virtual(ioc);
    BOOST_TEST((seen == std::vector<std::pair<bool, std::int64_t>>{{false, 0}, {true, 250}}));
}

BOOST_AUTO_TEST_CASE(try_acquire_on_a_limit_not_owned_by_a_shared_ptr_throws_and_takes_nothing) {
    concurrency_limit limit(concurrency_limit::options{.limit = 1});
    BOOST_CHECK_THROW(limit.try_acquire(), std::bad_weak_ptr);
    BOOST_TEST(limit.in_use() == 0u);
}

BOOST_AUTO_TEST_CASE(waiters_of_a_rate_limit_that_ends_are_told) {
    // (A concurrency_limit cannot end with waiters: they wait for a permit,
    // and every permit keeps its limit alive.)
    virtual_time vt;
    asio::io_context ioc;
    std::optional<error_code> out;
    {
        auto rate = std::make_shared<basic_rate_limit<manual_timer>>(
            ioc.get_executor(), basic_rate_limit<manual_timer>::options{.per_second = 1, .burst = 1, .queue = 1});
        BOOST_TEST(rate->try_acquire());
        rate->async_acquire(ioc.get_executor(), [&](error_code ec) { out = ec; });
        ioc.poll();
        BOOST_TEST(rate->waiting() == 1u);
    }
    ioc.restart();
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(out.has_value());
    BOOST_TEST((*out == asio::error::operation_aborted));
    BOOST_TEST(ms(virtual_time::now()) == 0);  // told at the end, not when a token would have come
}

BOOST_AUTO_TEST_CASE(rate_limit_lets_waiters_in_as_tokens_come) {
    virtual_time vt;
    asio::io_context ioc;
    auto rate = std::make_shared<basic_rate_limit<manual_timer>>(
        ioc.get_executor(), basic_rate_limit<manual_timer>::options{.per_second = 10, .burst = 1, .queue = 2});
    std::vector<std::int64_t> at;
    std::vector<error_code> ecs;
    for (int i = 0; i < 4; ++i)
        rate->async_acquire(ioc.get_executor(), [&](error_code ec) {
            ecs.push_back(ec);
            at.push_back(ms(virtual_time::now()));
        });
    BOOST_TEST(at.empty());
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(ecs.size() == 4u);
    // The first at once, the fourth refused (two wait), then one each 100 ms.
    BOOST_TEST(!ecs[0]);
    BOOST_TEST((ecs[1] == error::queue_full));
    BOOST_TEST(!ecs[2]);
    BOOST_TEST(!ecs[3]);
    BOOST_TEST(at == (std::vector<std::int64_t>{0, 0, 100, 200}), boost::test_tools::per_element());
    BOOST_TEST(rate->waiting() == 0u);
}

BOOST_AUTO_TEST_CASE(rate_room_turns_true_when_the_next_token_comes) {
    virtual_time vt;
    asio::io_context ioc;
    auto rate = std::make_shared<basic_rate_limit<manual_timer>>(
        ioc.get_executor(), basic_rate_limit<manual_timer>::options{.per_second = 4, .burst = 1});
    auto room = rate->room(ioc.get_executor());
    std::vector<std::pair<bool, std::int64_t>> seen;
    watchable::subscription sub;
    room->subscribe(sub, [&](bool v) { seen.emplace_back(v, ms(virtual_time::now())); });
    BOOST_TEST(rate->try_acquire());
    BOOST_TEST(!rate->try_acquire());
    steadfast::run_virtual(ioc);
    BOOST_TEST((seen == std::vector<std::pair<bool, std::int64_t>>{{false, 0}, {true, 250}}));
}

BOOST_AUTO_TEST_CASE(a_cancelled_rate_waiter_gives_its_turn_to_the_next) {
    virtual_time vt;
    asio::io_context ioc;
    auto rate = std::make_shared<basic_rate_limit<manual_timer>>(
        ioc.get_executor(), basic_rate_limit<manual_timer>::options{.per_second = 1, .burst = 1, .queue = 2});
    BOOST_TEST(rate->try_acquire());
    asio::cancellation_signal cancel;
    std::optional<error_code> first;
    std::optional<std::int64_t> second_at;
    rate->async_acquire(ioc.get_executor(),
                        asio::bind_cancellation_slot(cancel.slot(), [&](error_code ec) { first = ec; }));
    rate->async_acquire(ioc.get_executor(), [&](error_code ec) {
        BOOST_TEST(!ec);
        second_at = ms(virtual_time::now());
    });
    steadfast::run_virtual(ioc, manual_clock::now() + 500ms);
    cancel.emit(asio::cancellation_type::terminal);
    ioc.restart();
    steadfast::run_virtual(ioc);
    BOOST_TEST((first.has_value() && *first == asio::error::operation_aborted));
    BOOST_REQUIRE(second_at.has_value());
    BOOST_TEST(*second_at == 1000);  // the first token after the start, not the second
}

BOOST_AUTO_TEST_CASE(a_sliding_window_lets_waiters_in_as_its_steps_give_room_back) {
    virtual_time vt;
    asio::io_context ioc;
    using vrate = basic_rate_limit<manual_timer>;
    // 2 calls in any 400 ms, in steps of 100 ms; 2 may wait.
    auto rate = std::make_shared<vrate>(ioc.get_executor(),
                                        vrate::window_options{.limit = 2, .window = 400ms, .segments = 4, .queue = 2});
    auto room = rate->room(ioc.get_executor());
    std::vector<std::pair<bool, std::int64_t>> seen;
    watchable::subscription sub;
    room->subscribe(sub, [&](bool v) { seen.emplace_back(v, ms(virtual_time::now())); });
    BOOST_TEST(rate->try_acquire());  // step 0
    manual_clock::advance(150ms);
    BOOST_TEST(rate->try_acquire());  // step 1: full until 400 ms
    BOOST_TEST(!rate->try_acquire());
    std::vector<std::int64_t> at;
    std::vector<error_code> ecs;
    for (int i = 0; i < 3; ++i)
        rate->async_acquire(ioc.get_executor(), [&](error_code ec) {
            ecs.push_back(ec);
            at.push_back(ms(virtual_time::now()));
        });
    steadfast::run_virtual(ioc);
    BOOST_REQUIRE(ecs.size() == 3u);
    BOOST_TEST((ecs[0] == error::queue_full));  // two wait already: the third is refused, at once
    BOOST_TEST(!ecs[1]);
    BOOST_TEST(!ecs[2]);
    // Step 0's call leaves at 400 ms (one waiter in), step 1's at 500 ms.
    BOOST_TEST(at == (std::vector<std::int64_t>{150, 400, 500}), boost::test_tools::per_element());
    BOOST_TEST(rate->waiting() == 0u);
    // room(): false from the second call; true again when the waiters' own
    // calls leave the window (800 and 900 ms): the first at 800.
    BOOST_TEST((seen == std::vector<std::pair<bool, std::int64_t>>{{false, 150}, {true, 800}}));
    BOOST_TEST(rate->tokens() == 1.0);
    BOOST_CHECK_THROW(vrate(ioc.get_executor(), vrate::window_options{.limit = 1, .window = 0s}),
                      std::invalid_argument);
}

BOOST_AUTO_TEST_SUITE_END()
