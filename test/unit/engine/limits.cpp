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

#include <memory>
#include <optional>
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
            auto rate = std::make_shared<rate_limit>(ioc.get_executor(),
                                                     rate_limit::options{.per_second = 1000, .burst = 1, .queue = 1});
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
            ioc.run_for(std::chrono::seconds(1));
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

BOOST_AUTO_TEST_SUITE_END()
