// Conditions benchmarks (Google Benchmark). Run: bash test/bench/run-engine.sh
//
//  flip_to_attempt      a retry gated by a closed flag; the flag is set, and
//                       the time until the gated attempt starts is measured on
//                       the real clock. Median goal < 50 us. Variants: set on
//                       the executor's thread, and from another thread.
//  waiting_memory       100,000 operations waiting on one condition: gated
//                       async_retry operations, and bare async_wait_until waits.
#include "alloc_counter.hpp"

#include <steadfast/conditions.hpp>
#include <steadfast/engine.hpp>

#include <benchmark/benchmark.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;
using steadfast::attempt_context;
using steadfast::error_code;

namespace {
double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

void flip_to_attempt(benchmark::State& state) {
    const bool other_thread = state.range(0) != 0;
    std::vector<double> samples;
    for (auto _ : state) {
        asio::io_context ioc(1);
        auto gate = steadfast::make_flag(ioc.get_executor(), "secondary-online", false);
        auto policy = steadfast::retry_policy{}.with_attempt_when(gate).with_stop(steadfast::stop::max_attempts(1));
        std::atomic<clk::time_point::rep> flipped_at{0};
        constexpr int rounds = 200;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                asio::steady_timer pause(co_await asio::this_coro::executor);
                for (int i = 0; i < rounds; ++i) {
                    gate->set(false);
                    if (other_thread) {
                        std::thread([&] {
                            std::this_thread::sleep_for(200us);
                            flipped_at = clk::now().time_since_epoch().count();
                            gate->set(true);
                        }).detach();
                    } else {
                        pause.expires_after(100us);
                        pause.async_wait([&](error_code) {
                            flipped_at = clk::now().time_since_epoch().count();
                            gate->set(true);
                        });
                    }
                    co_await steadfast::retry(policy, [&](const attempt_context&) -> asio::awaitable<error_code> {
                        samples.push_back(
                            static_cast<double>(clk::now().time_since_epoch().count() - flipped_at.load()));
                        co_return error_code{};
                    });
                }
            },
            asio::detached);
        ioc.run();
    }
    state.counters["median_us"] = percentile(samples, 0.5) / 1000.0;
    state.counters["p99_us"] = percentile(samples, 0.99) / 1000.0;
    state.counters["samples"] = static_cast<double>(samples.size());
}
BENCHMARK(flip_to_attempt)->Arg(0)->Arg(1)->ArgNames({"other_thread"})->Iterations(5)->Unit(benchmark::kMillisecond);

void waiting_memory(benchmark::State& state) {
    const bool bare = state.range(0) != 0;
    constexpr int ops = 100'000;
    for (auto _ : state) {
        asio::io_context ioc(1);
        auto gate = steadfast::make_flag(ioc.get_executor(), "secondary-online", false);
        auto policy = steadfast::retry_policy{}.with_attempt_when(gate);
        auto send = [](const attempt_context&) -> asio::awaitable<error_code> { co_return error_code{}; };
        int done = 0;
        const auto heap0 = static_cast<long long>(mallinfo2().uordblks);
        for (int i = 0; i < ops; ++i) {
            if (bare)
                gate->async_wait_until(true, [&](error_code) { ++done; });
            else
                steadfast::async_retry(ioc.get_executor(), policy, send,
                                       [&](steadfast::retry_result<error_code>) { ++done; });
            if (i % 100 == 99) ioc.poll();
        }
        ioc.poll();
        const auto heap1 = static_cast<long long>(mallinfo2().uordblks);
        state.counters["heap_bytes_per_op"] = static_cast<double>(heap1 - heap0) / ops;
        state.counters["waiting"] = static_cast<double>(bare ? gate->waiter_count() : gate->subscriber_count());
        const auto t0 = clk::now();
        gate->set(true);  // wakes all of them
        ioc.run();
        state.counters["wake_all_ms"] = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
        state.counters["completed"] = done;
    }
}
BENCHMARK(waiting_memory)->Arg(0)->Arg(1)->ArgNames({"bare_waits"})->Iterations(1)->Unit(benchmark::kMillisecond);
}  // namespace

BENCHMARK_MAIN();
