// Engine benchmarks (Google Benchmark). Run: bash test/bench/run-engine.sh
//
//  retry_overhead       co_await retry(op) vs co_await op() where op succeeds at
//                       once (one post through the io_context: the floor)
//  retry_overhead_socket  the same around a real I/O operation (a one-byte
//                       write and read over a local socket pair); goal <= 1.15;
//                       and with a stop-when condition and an attempt timeout
//                       set (the attempt's own cancellation signal, a timer
//                       wait, a subscription); goal <= 1.25; and with a
//                       stop-when alone, cancelling the attempt (spawned) or
//                       letting it finish (stop_in_flight::let_finish:
//                       inline), heap allocations a call for each
//  breaker_overhead_socket  the same local-socket operation behind a closed
//                       circuit_breaker (a permit asked for and told the
//                       outcome): goal <= 1.05x the bare operation; and a
//                       retry whose policy has the breaker against the same
//                       retry without (heap allocations a call for both);
//                       and behind a concurrency_limit and a rate_limit with
//                       room (try_acquire), a token bucket and a sliding
//                       window: goal <= 1.05x each
//  retry_iteration      one retry at zero delay (classify, decide, yield);
//                       goal <= 1 us; heap allocations per attempt
//  pending_memory       100,000 retrying operations asleep on one io_context:
//                       heap bytes and RSS per operation; goal <= 1 KiB
#include "alloc_counter.hpp"
#include "local_roundtrip.hpp"

#include <steadfast/engine.hpp>

#include <benchmark/benchmark.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <malloc.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steadfast::attempt_context;
using steadfast::error_code;
using clk = std::chrono::steady_clock;

using steadfast_bench::local_roundtrip;

namespace {
// A stop-when condition that never turns true.
struct never_true final : steadfast::watchable {
    never_true() : watchable("never") {}
    bool value() const override { return false; }
};

// The bare operation: completes at once, through the event loop.
asio::awaitable<error_code> instant_op() {
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
    co_return error_code{};
}

template <class F>
void run_coro(F&& f) {
    asio::io_context ioc(1);
    asio::co_spawn(ioc, std::forward<F>(f), asio::detached);
    ioc.run();
}

long rss_kib() {
    std::ifstream f("/proc/self/status");
    std::string key;
    long v = 0;
    while (f >> key) {
        if (key == "VmRSS:") {
            f >> v;
            return v;
        }
        f.ignore(1 << 12, '\n');
    }
    return 0;
}

void retry_overhead(benchmark::State& state) {
    const auto policy = steadfast::retry_policy{};
    constexpr int batch = 2000;
    double bare_ns = 0, retry_ns = 0;
    long long retry_allocs = 0, bare_allocs = 0, batches = 0;
    run_coro([&]() -> asio::awaitable<void> {
        auto attempt = [](const attempt_context&) { return instant_op(); };
        for (auto _ : state) {
            // Interleaved batches, so both see the same machine load.
            auto a0 = steadfast_bench::allocations.load();
            auto t0 = clk::now();
            for (int i = 0; i < batch; ++i) benchmark::DoNotOptimize(co_await instant_op());
            auto t1 = clk::now();
            auto a1 = steadfast_bench::allocations.load();
            for (int i = 0; i < batch; ++i) benchmark::DoNotOptimize(co_await steadfast::retry(policy, attempt));
            auto t2 = clk::now();
            auto a2 = steadfast_bench::allocations.load();
            bare_ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
            retry_ns += std::chrono::duration<double, std::nano>(t2 - t1).count();
            bare_allocs += a1 - a0;
            retry_allocs += a2 - a1;
            ++batches;
        }
    });
    const double n = static_cast<double>(batches) * batch;
    state.counters["bare_ns"] = bare_ns / n;
    state.counters["retry_ns"] = retry_ns / n;
    state.counters["ratio"] = retry_ns / bare_ns;
    state.counters["bare_allocs"] = static_cast<double>(bare_allocs) / n;
    state.counters["retry_allocs"] = static_cast<double>(retry_allocs) / n;
}
BENCHMARK(retry_overhead)->Iterations(200)->Unit(benchmark::kMillisecond);

// The same comparison around a real I/O operation: one byte written and read
// back over a connected pair of local stream sockets.
void retry_overhead_socket(benchmark::State& state) {
    const auto policy = steadfast::retry_policy{};
    const auto guarded = policy.with_stop_when(std::make_shared<never_true>()).with_attempt_timeout(10s);
    const auto stopping = policy.with_stop_when(std::make_shared<never_true>());
    const auto finishing = policy.with_stop_when(std::make_shared<never_true>(), steadfast::stop_in_flight::let_finish);
    constexpr int batch = 500;
    double bare_ns = 0, retry_ns = 0, guarded_ns = 0, async_ns = 0, stopping_ns = 0, finishing_ns = 0;
    long long batches = 0, retry_allocs = 0, stopping_allocs = 0, finishing_allocs = 0;
    asio::io_context ioc(1);
    local_roundtrip roundtrip(ioc);
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            auto attempt = [&](const attempt_context&) { return roundtrip(); };
            for (auto _ : state) {
                auto t0 = clk::now();
                for (int i = 0; i < batch; ++i) benchmark::DoNotOptimize(co_await roundtrip());
                auto t1 = clk::now();
                for (int i = 0; i < batch; ++i) benchmark::DoNotOptimize(co_await steadfast::retry(policy, attempt));
                auto t2 = clk::now();
                for (int i = 0; i < batch; ++i) benchmark::DoNotOptimize(co_await steadfast::retry(guarded, attempt));
                auto t3 = clk::now();
                for (int i = 0; i < batch; ++i)
                    benchmark::DoNotOptimize(
                        co_await steadfast::async_retry(ioc, policy, attempt, asio::use_awaitable));
                auto t4 = clk::now();
                auto a4 = steadfast_bench::allocations.load();
                for (int i = 0; i < batch; ++i) benchmark::DoNotOptimize(co_await steadfast::retry(stopping, attempt));
                auto t5 = clk::now();
                auto a5 = steadfast_bench::allocations.load();
                for (int i = 0; i < batch; ++i) benchmark::DoNotOptimize(co_await steadfast::retry(finishing, attempt));
                auto t6 = clk::now();
                auto a6 = steadfast_bench::allocations.load();
                for (int i = 0; i < batch; ++i) benchmark::DoNotOptimize(co_await steadfast::retry(policy, attempt));
                auto a7 = steadfast_bench::allocations.load();
                bare_ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
                retry_ns += std::chrono::duration<double, std::nano>(t2 - t1).count();
                guarded_ns += std::chrono::duration<double, std::nano>(t3 - t2).count();
                async_ns += std::chrono::duration<double, std::nano>(t4 - t3).count();
                stopping_ns += std::chrono::duration<double, std::nano>(t5 - t4).count();
                finishing_ns += std::chrono::duration<double, std::nano>(t6 - t5).count();
                stopping_allocs += a5 - a4;
                finishing_allocs += a6 - a5;
                retry_allocs += a7 - a6;
                ++batches;
            }
        },
        asio::detached);
    ioc.run();
    const double n = static_cast<double>(batches) * batch;
    state.counters["bare_ns"] = bare_ns / n;
    state.counters["retry_ns"] = retry_ns / n;
    state.counters["ratio"] = retry_ns / bare_ns;
    state.counters["guarded_ns"] = guarded_ns / n;
    state.counters["guarded_ratio"] = guarded_ns / bare_ns;       // stop-when and attempt timeout set
    state.counters["async_ratio"] = async_ns / bare_ns;           // async_retry(..., use_awaitable)
    state.counters["stop_when_ratio"] = stopping_ns / bare_ns;    // stop-when cancelling the attempt
    state.counters["let_finish_ratio"] = finishing_ns / bare_ns;  // stop-when letting it finish
    state.counters["retry_allocs"] = static_cast<double>(retry_allocs) / n;
    state.counters["stop_when_allocs"] = static_cast<double>(stopping_allocs) / n;
    state.counters["let_finish_allocs"] = static_cast<double>(finishing_allocs) / n;
}
BENCHMARK(retry_overhead_socket)->Iterations(100)->Unit(benchmark::kMillisecond);

void breaker_overhead_socket(benchmark::State& state) {
    // Opens only after 1,000 failures in a row: closed for the whole run.
    steadfast::breaker_options o;
    o.consecutive_failures = 1000;
    o.minimum_calls = 100;
    auto breaker = std::make_shared<steadfast::circuit_breaker>(o);
    const auto policy = steadfast::retry_policy{};
    const auto with_breaker = policy.with_breaker(breaker);
    constexpr int batch = 500;
    double bare_ns = 0, permit_ns = 0, retry_ns = 0, retry_breaker_ns = 0, bulkhead_ns = 0, rate_ns = 0, window_ns = 0;
    long long permit_allocs = 0, retry_allocs = 0, retry_breaker_allocs = 0, limit_allocs = 0, batches = 0;
    asio::io_context ioc(1);
    // Limits with room all along: a bulkhead of 64, a bucket of a billion a second.
    auto bulkhead = std::make_shared<steadfast::concurrency_limit>(steadfast::concurrency_limit::options{.limit = 64});
    auto rate = std::make_shared<steadfast::rate_limit>(
        ioc.get_executor(), steadfast::rate_limit::options{.per_second = 1e9, .burst = 1000000});
    // A sliding window with room all along: a billion in any second.
    auto window = std::make_shared<steadfast::rate_limit>(
        ioc.get_executor(), steadfast::rate_limit::window_options{.limit = 1000000000, .window = 1s});
    local_roundtrip roundtrip(ioc);
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            auto attempt = [&](const attempt_context&) { return roundtrip(); };
            for (auto _ : state) {
                // The bare operation and the breaker in the order A B B A,
                // so that neither gains from where it runs in the batch.
                auto bare = [&](int n) -> asio::awaitable<double> {
                    const auto b0 = clk::now();
                    for (int i = 0; i < n; ++i) benchmark::DoNotOptimize(co_await roundtrip());
                    co_return std::chrono::duration<double, std::nano>(clk::now() - b0).count();
                };
                auto guarded = [&](int n) -> asio::awaitable<double> {
                    const auto b0 = clk::now();
                    for (int i = 0; i < n; ++i) {
                        auto p = breaker->try_acquire();
                        if (!p) std::abort();
                        const error_code ec = co_await roundtrip();
                        if (ec)
                            p.failure();
                        else
                            p.success();
                    }
                    co_return std::chrono::duration<double, std::nano>(clk::now() - b0).count();
                };
                bare_ns += co_await bare(batch / 2);
                for (int half = 0; half < 2; ++half) {
                    const auto a1 = steadfast_bench::allocations.load();
                    permit_ns += co_await guarded(batch / 2);
                    permit_allocs += steadfast_bench::allocations.load() - a1;
                }
                bare_ns += co_await bare(batch / 2);
                auto t2 = clk::now();
                auto a2 = steadfast_bench::allocations.load();
                for (int i = 0; i < batch; ++i) benchmark::DoNotOptimize(co_await steadfast::retry(policy, attempt));
                auto t3 = clk::now();
                auto a3 = steadfast_bench::allocations.load();
                for (int i = 0; i < batch; ++i)
                    benchmark::DoNotOptimize(co_await steadfast::retry(with_breaker, attempt));
                auto t4 = clk::now();
                auto a4 = steadfast_bench::allocations.load();
                for (int i = 0; i < batch; ++i) {
                    auto p = bulkhead->try_acquire();
                    if (!p) std::abort();
                    benchmark::DoNotOptimize(co_await roundtrip());
                }
                auto t5 = clk::now();
                for (int i = 0; i < batch; ++i) {
                    if (!rate->try_acquire()) std::abort();
                    benchmark::DoNotOptimize(co_await roundtrip());
                }
                auto t6 = clk::now();
                for (int i = 0; i < batch; ++i) {
                    if (!window->try_acquire()) std::abort();
                    benchmark::DoNotOptimize(co_await roundtrip());
                }
                auto t7 = clk::now();
                auto a6 = steadfast_bench::allocations.load();
                bulkhead_ns += std::chrono::duration<double, std::nano>(t5 - t4).count();
                rate_ns += std::chrono::duration<double, std::nano>(t6 - t5).count();
                window_ns += std::chrono::duration<double, std::nano>(t7 - t6).count();
                limit_allocs += a6 - a4;
                retry_ns += std::chrono::duration<double, std::nano>(t3 - t2).count();
                retry_breaker_ns += std::chrono::duration<double, std::nano>(t4 - t3).count();
                retry_allocs += a3 - a2;
                retry_breaker_allocs += a4 - a3;
                ++batches;
            }
        },
        asio::detached);
    ioc.run();
    if (breaker->get_stats().successes != static_cast<std::uint64_t>(batches) * batch * 2) std::abort();
    const double n = static_cast<double>(batches) * batch;
    state.counters["bare_ns"] = bare_ns / n;
    state.counters["breaker_ns"] = permit_ns / n;
    state.counters["breaker_ratio"] = permit_ns / bare_ns;  // goal <= 1.05
    state.counters["breaker_allocs"] = static_cast<double>(permit_allocs) / n;
    state.counters["retry_ns"] = retry_ns / n;
    state.counters["retry_breaker_ns"] = retry_breaker_ns / n;
    state.counters["retry_breaker_ratio"] = retry_breaker_ns / retry_ns;
    state.counters["retry_allocs"] = static_cast<double>(retry_allocs) / n;
    state.counters["retry_breaker_allocs"] = static_cast<double>(retry_breaker_allocs) / n;
    state.counters["bulkhead_ratio"] = bulkhead_ns / bare_ns;  // goal <= 1.05
    state.counters["rate_ratio"] = rate_ns / bare_ns;          // goal <= 1.05
    state.counters["window_ratio"] = window_ns / bare_ns;      // the same, a sliding window
    state.counters["limit_allocs"] = static_cast<double>(limit_allocs) / (3 * n);
}
BENCHMARK(breaker_overhead_socket)->Iterations(100)->Unit(benchmark::kMillisecond);

void retry_iteration(benchmark::State& state) {
    constexpr std::uint32_t attempts = 1000;
    const auto policy = steadfast::retry_policy{}
                            .with_backoff(steadfast::backoff::fixed(0ns))
                            .with_stop(steadfast::stop::max_attempts(attempts));
    double ns = 0;
    long long allocs = 0, retries = 0;
    run_coro([&]() -> asio::awaitable<void> {
        auto failing = [](const attempt_context&) -> asio::awaitable<error_code> { co_return asio::error::try_again; };
        for (auto _ : state) {
            auto a0 = steadfast_bench::allocations.load();
            auto t0 = clk::now();
            auto r = co_await steadfast::retry(policy, failing);
            auto t1 = clk::now();
            allocs += steadfast_bench::allocations.load() - a0;
            ns += std::chrono::duration<double, std::nano>(t1 - t0).count();
            retries += r.attempts() - 1;
        }
    });
    state.counters["ns_per_retry"] = ns / static_cast<double>(retries);
    state.counters["allocs_per_attempt"] =
        static_cast<double>(allocs) / static_cast<double>(retries + state.iterations());
}
BENCHMARK(retry_iteration)->Iterations(300)->Unit(benchmark::kMillisecond);

// Arg 0: the plain policy (goal <= 640 B); arg 1: with a stop-when
// condition and an attempt timeout (each operation also keeps its watch).
void pending_memory(benchmark::State& state) {
    const int ops = static_cast<int>(state.range(0));
    for (auto _ : state) {
        asio::io_context ioc(1);
        auto policy =
            steadfast::retry_policy{}.with_backoff(steadfast::backoff::fixed(1h)).with_stop(steadfast::stop::never());
        if (state.range(1)) policy = policy.with_stop_when(std::make_shared<never_true>()).with_attempt_timeout(10s);
        auto failing = [](const attempt_context&) -> asio::awaitable<error_code> {
            co_return asio::error::connection_refused;
        };
        const long rss0 = rss_kib();
        const auto heap0 = static_cast<long long>(mallinfo2().uordblks);
        // Launched in batches, as a server would over time: the transient
        // memory of each first attempt is reused instead of peaking at once.
        for (int i = 0; i < ops; ++i) {
            steadfast::async_retry(ioc.get_executor(), policy, failing, [](steadfast::retry_result<error_code>) {});
            if (i % 100 == 99) ioc.poll();
        }
        ioc.poll();  // every operation made its first attempt and now sleeps
        const auto heap1 = static_cast<long long>(mallinfo2().uordblks);
        const long rss1 = rss_kib();
        state.counters["heap_bytes_per_op"] = static_cast<double>(heap1 - heap0) / ops;
        state.counters["rss_bytes_per_op"] = static_cast<double>(rss1 - rss0) * 1024.0 / ops;
        ioc.stop();
    }
}
BENCHMARK(pending_memory)->Args({100'000, 0})->Args({100'000, 1})->Iterations(1)->Unit(benchmark::kMillisecond);
}  // namespace

BENCHMARK_MAIN();
