// async_retry keeps Asio's rules for composed operations (issue 9, findings 1-3):
// it never completes inside its initiating call, every step runs on the
// executor it was given, and partial and total cancellation reach the attempt.
#include <steadfast/conditions.hpp>
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
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <steadfast_test/counting_allocator.hpp>
#include <steadfast_test/virtual_time.hpp>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using namespace steadfast;
namespace asio = boost::asio;
using steadfast_test::alloc_stats;
using steadfast_test::counting_allocator;
using steadfast_test::virtual_time;

namespace {
// A stop-when condition that always holds: the retry stops before any attempt.
struct always_true final : watchable {
    always_true() : watchable("always") {}
    bool value() const override { return true; }
};

auto succeed = [](const attempt_context&) -> asio::awaitable<error_code> { co_return error_code{}; };
using result_t = retry_result<error_code>;

// Starts the next retry from inside the previous one's completion handler.
struct chain {
    asio::any_io_executor ex;
    retry_policy policy;
    int left;
    int* done;
    void operator()(result_t r) {
        BOOST_REQUIRE((r.reason() == stop_reason::condition));
        ++*done;
        if (--left > 0) steadfast::async_retry(ex, policy, succeed, std::move(*this));
    }
};
}  // namespace

BOOST_AUTO_TEST_SUITE(engine_asio_rules)

// Finding 1: a retry that stops at once used to complete inside async_retry();
// 100,000 of them in a row overflowed the stack.
BOOST_AUTO_TEST_CASE(never_completes_inside_the_initiating_call) {
    const auto stop_at_once = retry_policy{}.with_stop_when(std::make_shared<always_true>());
    asio::io_context ioc;

    bool called = false;
    steadfast::async_retry(ioc.get_executor(), stop_at_once, succeed, [&](result_t) { called = true; });
    BOOST_TEST(!called);  // not inside the call
    ioc.run();
    BOOST_TEST(called);

    int sequential = 0;
    ioc.restart();
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            for (int i = 0; i < 100000; ++i) {
                auto r = co_await steadfast::async_retry(co_await asio::this_coro::executor, stop_at_once, succeed,
                                                         asio::use_awaitable);
                if (r.reason() == stop_reason::condition) ++sequential;
            }
        },
        asio::detached);
    ioc.run();
    BOOST_TEST(sequential == 100000);

    int chained = 0;
    ioc.restart();
    steadfast::async_retry(ioc.get_executor(), stop_at_once, succeed,
                           chain{ioc.get_executor(), stop_at_once, 100000, &chained});
    ioc.run();
    BOOST_TEST(chained == 100000);
}

// Finding 2: steps ran on the completion handler's executor (the first one
// inline, on the caller's thread), not on the strand the operation was given.
// Every kind of step: a zero-delay yield, a sleep, an attempt raced against
// its timeout and a stop-when condition, a gate wait.
BOOST_AUTO_TEST_CASE(every_step_runs_on_the_given_executor) {
    for (int variant = 0; variant < 2; ++variant) {
        asio::io_context ioc;
        auto work_strand = asio::make_strand(ioc);
        auto handler_strand = asio::make_strand(ioc);
        int hooks = 0, hooks_off = 0, attempts_off = 0;
        auto policy = retry_policy{}
                          .with_backoff(backoff::fixed(0ms))
                          .with_stop(stop::max_attempts(3))
                          .with_hooks({.before_attempt = [&](const attempt_context&) {
                              ++hooks;
                              if (!work_strand.running_in_this_thread()) ++hooks_off;
                          }});
        std::shared_ptr<flag> gate;
        if (variant == 1) {
            // Sleeps of 1 ms, a timeout and a stop-when on every attempt, and a
            // gate that opens from a timer on another strand.
            gate = make_flag(asio::any_io_executor(work_strand), "gate");
            policy = policy.with_backoff(backoff::fixed(1ms))
                         .with_attempt_timeout(10s)
                         .with_stop_when(make_flag(asio::any_io_executor(work_strand), "never"))
                         .with_attempt_when(gate);
            auto t = std::make_shared<asio::steady_timer>(handler_strand, 5ms);
            t->async_wait([t, gate](error_code) { gate->set(); });
        }
        auto failing = [&](const attempt_context&) -> asio::awaitable<error_code> {
            if (!work_strand.running_in_this_thread()) ++attempts_off;
            co_return asio::error::host_unreachable;
        };
        bool on_handler_strand = false, done = false;
        steadfast::async_retry(asio::any_io_executor(work_strand), policy, failing,
                               asio::bind_executor(handler_strand, [&](result_t r) {
                                   on_handler_strand = handler_strand.running_in_this_thread();
                                   done = true;
                                   BOOST_TEST(r.attempts() == 3u);
                               }));
        BOOST_TEST(hooks == 0);  // nothing ran inside the call
        ioc.run();
        BOOST_TEST_CONTEXT("variant " << variant) {
            BOOST_TEST(done);
            BOOST_TEST(hooks == 3);
            BOOST_TEST(hooks_off == 0);
            BOOST_TEST(attempts_off == 0);
            BOOST_TEST(on_handler_strand);
        }
    }
}

// Finding 3: partial and total cancellation did not reach an attempt in flight
// (its coroutine let only terminal cancellation through): an attempt asleep
// for 10 h went on sleeping, and its success was then thrown away.
BOOST_AUTO_TEST_CASE(partial_and_total_cancellation_reach_the_attempt) {
    for (auto type :
         {asio::cancellation_type::partial, asio::cancellation_type::total, asio::cancellation_type::terminal}) {
        // 0: async_retry, plain; 1: async_retry with a timeout (the attempt's own signal);
        // 2: co_await retry(), plain (the attempt inline); 3: co_await retry() with a timeout.
        for (int form = 0; form < 4; ++form) {
            virtual_time vt;
            asio::io_context ioc;
            asio::cancellation_signal sig;
            int aborted = 0;
            auto sleepy = [&](const attempt_context&) -> asio::awaitable<error_code> {
                manual_timer t(co_await asio::this_coro::executor, 10h);
                auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
                if (ec == asio::error::operation_aborted) ++aborted;
                co_return ec;
            };
            std::optional<result_t> out;
            const auto policy = form % 2 ? retry_policy{}.with_attempt_timeout(20h) : retry_policy{};
            if (form < 2) {
                steadfast::async_retry<manual_timer>(
                    ioc.get_executor(), policy, sleepy,
                    asio::bind_cancellation_slot(sig.slot(), [&](result_t r) { out = std::move(r); }));
            } else {
                asio::co_spawn(
                    ioc,
                    [&]() -> asio::awaitable<result_t> {
                        co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
                        co_return co_await steadfast::retry<manual_timer>(policy, sleepy);
                    },
                    asio::bind_cancellation_slot(sig.slot(), [&](std::exception_ptr e, result_t r) {
                        BOOST_REQUIRE(!e);
                        out = std::move(r);
                    }));
            }
            manual_timer at(ioc, manual_clock::time_point(1s));
            at.async_wait([&](error_code) { sig.emit(type); });
            steadfast::run_virtual(ioc, manual_clock::time_point(1h));
            BOOST_TEST_CONTEXT("cancellation type " << static_cast<int>(type) << ", form " << form) {
                BOOST_REQUIRE(out.has_value());
                BOOST_TEST((out->reason() == stop_reason::cancelled));
                BOOST_TEST(aborted == 1);
                BOOST_TEST(std::chrono::duration_cast<std::chrono::seconds>(out->elapsed()).count() == 1);
            }
        }
    }
}

// Two threads run the io_context; each retry has its own strand, its gate and
// stop-when conditions live there, its handler is bound to another strand, and
// the gates are opened from a third thread. Under TSan this is where steps off
// the strand showed as data races on the conditions' subscriptions.
BOOST_AUTO_TEST_CASE(strands_threads_and_conditions_set_from_elsewhere) {
    asio::io_context ioc(2);
    constexpr int n = 200;
    std::atomic<int> done{0}, off{0};
    std::vector<std::shared_ptr<flag>> gates;
    for (int i = 0; i < n; ++i) {
        auto strand = asio::make_strand(ioc);
        auto elsewhere = asio::make_strand(ioc);
        auto gate = make_flag(asio::any_io_executor(strand), "gate");
        gates.push_back(gate);
        auto policy = retry_policy{}
                          .with_backoff(backoff::fixed(1ms))
                          .with_stop(stop::max_attempts(5))
                          .with_attempt_when(gate)
                          .with_stop_when(make_flag(asio::any_io_executor(strand), "stop"))
                          .with_hooks({.before_attempt = [strand, &off](const attempt_context&) {
                              if (!strand.running_in_this_thread()) ++off;
                          }});
        // Every other one has an attempt timeout, which its first attempt
        // overruns: the shared timeout timer fires from either thread and
        // the cancellation is delivered on the operation's strand.
        const bool timed = i % 2 == 1;
        if (timed) policy = policy.with_attempt_timeout(5ms);
        auto attempt = [strand, &off, timed](const attempt_context& c) -> asio::awaitable<error_code> {
            if (!strand.running_in_this_thread()) ++off;
            if (timed && c.number == 1) {
                asio::steady_timer t(co_await asio::this_coro::executor, 10s);
                auto [ec] = co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
                if (!strand.running_in_this_thread()) ++off;
                co_return ec;
            }
            co_return c.number < 3 ? error_code(asio::error::host_unreachable) : error_code{};
        };
        auto check = [&done, elsewhere](result_t r) {
            if (r.ok() && r.attempts() == 3u && elsewhere.running_in_this_thread()) ++done;
        };
        if (i % 4 < 2) {
            steadfast::async_retry(asio::any_io_executor(strand), policy, attempt,
                                   asio::bind_executor(elsewhere, check));
        } else {
            // The coroutine driver on the strand.
            asio::co_spawn(strand, steadfast::retry(policy, attempt),
                           asio::bind_executor(elsewhere, [check](std::exception_ptr e, result_t r) {
                               if (!e) check(std::move(r));
                           }));
        }
    }
    std::thread setter([&] {
        for (auto& g : gates) g->set();
    });
    std::thread second([&] { ioc.run(); });
    ioc.run();
    setter.join();
    second.join();
    BOOST_TEST(done.load() == n);
    BOOST_TEST(off.load() == 0);
}

// The operation's state comes from the handler's associated allocator, and
// is given back before the handler runs.
BOOST_AUTO_TEST_CASE(the_state_comes_from_the_handlers_allocator) {
    virtual_time vt;
    asio::io_context ioc;
    alloc_stats stats;
    int live_at_completion = -1;
    auto failing = [](const attempt_context&) -> asio::awaitable<error_code> {
        co_return asio::error::connection_refused;
    };
    const auto policy = retry_policy{}.with_backoff(backoff::fixed(1s)).with_stop(stop::max_attempts(3));
    steadfast::async_retry<manual_timer>(ioc.get_executor(), policy, failing,
                                         asio::bind_allocator(counting_allocator<void>(&stats), [&](result_t r) {
                                             BOOST_TEST((r.reason() == stop_reason::attempts_exhausted));
                                             live_at_completion = stats.live;
                                         }));
    BOOST_TEST(stats.live >= 1);  // the state, from the start
    steadfast::run_virtual(ioc, manual_clock::time_point(1h));
    BOOST_TEST(stats.allocations >= 1);
    BOOST_TEST(live_at_completion == 0);
    BOOST_TEST(stats.live == 0);
}

BOOST_AUTO_TEST_SUITE_END()
