// Pipeline and hedging benchmarks (Google Benchmark; issue 31).
// Run: bash test/bench/run-engine.sh --benchmark_filter='pipeline|hedging'
//
//  pipeline_overhead_socket  the local-socket operation of engine_bench
//                       (one byte written and read back) bare, and through a
//                       five-piece pipeline that succeeds at once, the
//                       issue's five in its order: a rate limit with room, a
//                       closed breaker, the default retry, hedging (2
//                       attempts, 10 s delay: none starts) and a 10 s
//                       timeout; execute() and async_execute(); goal <= 1.3x
//                       the bare operation. Beside it: the same with a
//                       bulkhead with room (six pieces) and without hedging.
//                       Floors in the same run: the operation co_spawned
//                       (any concurrent attempt needs a coroutine of its
//                       own) and retry() with an attempt timeout.
//                       Heap allocations a call: `*_allocs`. Built twice:
//                       steadfast_pipeline_bench_frames has Asio's recycling
//                       cache raised (BOOST_ASIO_RECYCLING_ALLOCATOR_CACHE_SIZE
//                       16: coroutine frames are reused rather than taken
//                       from the heap), so what it still counts is heap
//                       beyond the frames (goal: 0); PIPELINE_TRACE_ALLOCS=1
//                       prints the call stack of each allocation of one call.
//  pipeline_overhead_post  the same pieces around an operation that is one
//                       post through the io_context: the nanoseconds a call
//                       spends above that operation, without the socket's
//                       noise (what each piece costs in CPU: the five, the
//                       five without hedging, hedging and timeout alone, a
//                       bare co_spawn, retry() with an attempt timeout,
//                       retry() alone).
//  hedging_tail         many calls against a local server that stalls 5 % of
//                       requests for 100 ms, unhedged and hedged (2 attempts,
//                       the hedge after 2 ms), interleaved in one run: p50
//                       and p99 latency and requests a call; goals: p99
//                       <= 0.2x unhedged, <= 1.1x the requests.
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
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <random>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steadfast::attempt_context;
using steadfast::error_code;
using steadfast_bench::local_roundtrip;
using clk = std::chrono::steady_clock;

namespace {

double ns_between(clk::time_point a, clk::time_point b) {
    return std::chrono::duration<double, std::nano>(b - a).count();
}

// The five pieces, in its order (rate limit -> breaker -> retry ->
// hedge -> timeout), and the same without hedging; the limits have room and
// the breaker stays closed.
struct pieces {
    explicit pieces(asio::io_context& ioc)
        : breaker(std::make_shared<steadfast::circuit_breaker>(closed())),
          rate(std::make_shared<steadfast::rate_limit>(
              ioc.get_executor(), steadfast::rate_limit::options{.per_second = 1e9, .burst = 1000000})),
          five(steadfast::pipeline{}
                   .with_rate_limit(rate)
                   .with_breaker(breaker)
                   .with_hedging({.max_attempts = 2, .delay = 10s})
                   .with_timeout(10s)),
          four(steadfast::pipeline{}.with_rate_limit(rate).with_breaker(breaker).with_timeout(10s)) {}
    static steadfast::breaker_options closed() {
        steadfast::breaker_options o;
        o.consecutive_failures = 1000;
        return o;
    }
    std::shared_ptr<steadfast::circuit_breaker> breaker;
    std::shared_ptr<steadfast::rate_limit> rate;
    steadfast::pipeline five, four;
};

void pipeline_overhead_socket(benchmark::State& state) {
    asio::io_context ioc(1);
    const pieces p(ioc);
    const auto& five = p.five;
    const auto& four = p.four;
    // The same with a bulkhead too (six pieces).
    auto bulkhead = std::make_shared<steadfast::concurrency_limit>(steadfast::concurrency_limit::options{.limit = 64});
    const auto six = five.with_concurrency_limit(bulkhead);
    // Floors, in the same run: the operation spawned as a coroutine of its
    // own (what any concurrent attempt costs, hedged or timed) and a retry
    // whose attempt is watched (a timeout: spawned, with its deadline).
    const auto watched = steadfast::retry_policy{}.with_attempt_timeout(10s);
    constexpr int batch = 500;
    // PIPELINE_TRACE_ALLOCS=1: the call stack of every allocation of one
    // five-piece execute() (addr2line -f -C -e BINARY ADDRESS names them).
    const bool trace_one = std::getenv("PIPELINE_TRACE_ALLOCS") != nullptr;
    double bare_ns = 0, exec_ns = 0, async_ns = 0, four_ns = 0, spawn_ns = 0, watched_ns = 0, six_ns = 0;
    long long bare_allocs = 0, exec_allocs = 0, async_allocs = 0, four_allocs = 0, batches = 0;
    local_roundtrip roundtrip(ioc);
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            auto attempt = [&](const attempt_context&) { return roundtrip(); };
            for (auto _ : state) {
                // Interleaved batches, so all see the same machine load.
                const auto a0 = steadfast_bench::allocations.load();
                const auto t0 = clk::now();
                for (int i = 0; i < batch; ++i) benchmark::DoNotOptimize(co_await roundtrip());
                const auto t1 = clk::now();
                const auto a1 = steadfast_bench::allocations.load();
                if (trace_one && batches == 10) {  // one warm call's allocations, to stderr
                    steadfast_bench::trace = true;
                    co_await steadfast::execute(five, attempt);
                    steadfast_bench::trace = false;
                }
                for (int i = 0; i < batch; ++i) {
                    auto r = co_await steadfast::execute(five, attempt);
                    if (!r.ok() || r.value()) std::abort();
                }
                const auto t2 = clk::now();
                const auto a2 = steadfast_bench::allocations.load();
                for (int i = 0; i < batch; ++i) {
                    auto r = co_await steadfast::async_execute(ioc, five, attempt, asio::use_awaitable);
                    if (!r.ok() || r.value()) std::abort();
                }
                const auto t3 = clk::now();
                const auto a3 = steadfast_bench::allocations.load();
                for (int i = 0; i < batch; ++i) {
                    auto r = co_await steadfast::execute(four, attempt);
                    if (!r.ok() || r.value()) std::abort();
                }
                const auto t4 = clk::now();
                const auto a4 = steadfast_bench::allocations.load();
                four_ns += ns_between(t3, t4);
                four_allocs += a4 - a3;
                for (int i = 0; i < batch; ++i)
                    if (co_await asio::co_spawn(ioc, roundtrip(), asio::use_awaitable)) std::abort();
                const auto t5 = clk::now();
                for (int i = 0; i < batch; ++i) {
                    auto r = co_await steadfast::execute(six, attempt);
                    if (!r.ok() || r.value()) std::abort();
                }
                const auto t5b = clk::now();
                six_ns += ns_between(t5, t5b);
                for (int i = 0; i < batch; ++i)
                    if (!(co_await steadfast::retry(watched, attempt)).ok()) std::abort();
                const auto t6 = clk::now();
                spawn_ns += ns_between(t4, t5);
                watched_ns += ns_between(t5b, t6);
                bare_ns += ns_between(t0, t1);
                exec_ns += ns_between(t1, t2);
                async_ns += ns_between(t2, t3);
                bare_allocs += a1 - a0;
                exec_allocs += a2 - a1;
                async_allocs += a3 - a2;
                ++batches;
            }
        },
        asio::detached);
    ioc.run();
    const double n = static_cast<double>(batches) * batch;

    state.counters["bare_ns"] = bare_ns / n;
    state.counters["execute_ns"] = exec_ns / n;
    state.counters["execute_ratio"] = exec_ns / bare_ns;  // goal <= 1.3
    state.counters["async_execute_ratio"] = async_ns / bare_ns;
    state.counters["six_piece_ratio"] = six_ns / bare_ns;          // the five and a bulkhead
    state.counters["unhedged_ratio"] = four_ns / bare_ns;          // the five without hedging
    state.counters["spawn_ratio"] = spawn_ns / bare_ns;            // floor: co_spawn(op, use_awaitable)
    state.counters["watched_retry_ratio"] = watched_ns / bare_ns;  // floor: retry() with an attempt timeout
    state.counters["unhedged_allocs"] = static_cast<double>(four_allocs) / n;
    state.counters["bare_allocs"] = static_cast<double>(bare_allocs) / n;
    state.counters["execute_allocs"] = static_cast<double>(exec_allocs) / n;
    state.counters["async_execute_allocs"] = static_cast<double>(async_allocs) / n;
}
BENCHMARK(pipeline_overhead_socket)->Iterations(100)->Unit(benchmark::kMillisecond);

// The pipeline's own cost a call, without the socket's noise: the operation
// is one post through the io_context (the floor: nothing but scheduling),
// and each figure is the nanoseconds a call spends above it.
void pipeline_overhead_post(benchmark::State& state) {
    asio::io_context ioc(1);
    const pieces p(ioc);
    const auto& five = p.five;
    const auto& four = p.four;
    const auto hedged = steadfast::pipeline{}.with_hedging({.max_attempts = 2, .delay = 10s}).with_timeout(10s);
    const auto watched = steadfast::retry_policy{}.with_attempt_timeout(10s);
    constexpr int batch = 2000;
    double bare = 0, exec = 0, unhedged = 0, hedge_only = 0, spawn = 0, watch = 0, plain = 0;
    long long batches = 0;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            auto op = []() -> asio::awaitable<error_code> {
                co_await asio::post(asio::use_awaitable);
                co_return error_code{};
            };
            auto attempt = [&](const attempt_context&) { return op(); };
            for (auto _ : state) {
                const auto t0 = clk::now();
                for (int i = 0; i < batch; ++i) benchmark::DoNotOptimize(co_await op());
                const auto t1 = clk::now();
                for (int i = 0; i < batch; ++i)
                    if (!(co_await steadfast::execute(five, attempt)).ok()) std::abort();
                const auto t2 = clk::now();
                for (int i = 0; i < batch; ++i)
                    if (!(co_await steadfast::execute(four, attempt)).ok()) std::abort();
                const auto t3 = clk::now();
                for (int i = 0; i < batch; ++i)
                    if (!(co_await steadfast::execute(hedged, attempt)).ok()) std::abort();
                const auto t4 = clk::now();
                for (int i = 0; i < batch; ++i)
                    if (co_await asio::co_spawn(ioc, op(), asio::use_awaitable)) std::abort();
                const auto t5 = clk::now();
                for (int i = 0; i < batch; ++i)
                    if (!(co_await steadfast::retry(watched, attempt)).ok()) std::abort();
                const auto t6 = clk::now();
                for (int i = 0; i < batch; ++i)
                    if (!(co_await steadfast::retry(steadfast::retry_policy{}, attempt)).ok()) std::abort();
                const auto t7 = clk::now();
                bare += ns_between(t0, t1);
                exec += ns_between(t1, t2);
                unhedged += ns_between(t2, t3);
                hedge_only += ns_between(t3, t4);
                spawn += ns_between(t4, t5);
                watch += ns_between(t5, t6);
                plain += ns_between(t6, t7);
                ++batches;
            }
        },
        asio::detached);
    ioc.run();
    const double n = static_cast<double>(batches) * batch;
    state.counters["bare_ns"] = bare / n;
    state.counters["execute_extra_ns"] = (exec - bare) / n;                // the five pieces
    state.counters["unhedged_extra_ns"] = (unhedged - bare) / n;           // rate limit, breaker, timeout
    state.counters["hedging_timeout_extra_ns"] = (hedge_only - bare) / n;  // hedging and timeout alone
    state.counters["spawn_extra_ns"] = (spawn - bare) / n;                 // co_spawn(op, use_awaitable)
    state.counters["watched_retry_extra_ns"] = (watch - bare) / n;         // retry() with an attempt timeout
    state.counters["retry_extra_ns"] = (plain - bare) / n;                 // retry() alone
}
BENCHMARK(pipeline_overhead_post)->Iterations(50)->Unit(benchmark::kMillisecond);

// A local server that answers each one-byte request with one byte, after a
// 100 ms stall for 5 % of requests (drawn from a fixed seed). Each client
// connection is a connected socket pair: a call takes an idle one or opens
// one; a cancelled attempt's connection is closed (its answer may still
// come), the server's side ends with it.
struct stalling_server {
    explicit stalling_server(asio::io_context& ioc) : ioc(ioc) {}
    struct conn {
        explicit conn(asio::io_context& ioc) : client(ioc), server(ioc) { asio::local::connect_pair(client, server); }
        asio::local::stream_protocol::socket client, server;
    };

    asio::awaitable<void> serve(std::shared_ptr<conn> c) {
        asio::steady_timer stall(c->server.get_executor());
        for (;;) {
            char b = 0;
            auto [ec, n] =
                co_await asio::async_read(c->server, asio::buffer(&b, 1), asio::as_tuple(asio::use_awaitable));
            if (ec) co_return;
            ++requests;
            if (std::uniform_real_distribution<double>(0, 1)(rng) < 0.05) {
                stall.expires_after(100ms);
                co_await stall.async_wait(asio::as_tuple(asio::use_awaitable));
            }
            auto [ec2, n2] =
                co_await asio::async_write(c->server, asio::buffer(&b, 1), asio::as_tuple(asio::use_awaitable));
            if (ec2) co_return;
        }
    }

    // One request: true when it was answered.
    asio::awaitable<error_code> call() {
        std::shared_ptr<conn> c;
        if (idle.empty()) {
            c = std::make_shared<conn>(ioc);
            asio::co_spawn(ioc, serve(c), asio::detached);
        } else {
            c = std::move(idle.back());
            idle.pop_back();
        }
        // Closed on every way out but back to the pool: a cancelled attempt
        // may also end by an exception (Asio's throw_if_cancelled: a
        // cancellation that lands while no operation is pending throws from
        // the next co_await: a losing hedge whose write had just completed).
        // Left open, its server side would read for ever and run() would
        // never return (hedging_tail hung so, about one run in two).
        struct closer {
            std::shared_ptr<conn>& c;
            ~closer() {
                error_code ignored;
                if (c) c->client.close(ignored);
            }
        } close_unless_pooled{c};
        char b = 'x';
        auto [ec, n] = co_await asio::async_write(c->client, asio::buffer(&b, 1), asio::as_tuple(asio::use_awaitable));
        if (!ec)
            std::tie(ec, n) =
                co_await asio::async_read(c->client, asio::buffer(&b, 1), asio::as_tuple(asio::use_awaitable));
        if (ec) co_return ec;
        idle.push_back(std::move(c));  // (`c` empty now: the closer leaves it open)
        co_return error_code{};
    }

    // The end: idle connections close, so their server sides end too.
    void close_idle() {
        for (auto& c : idle) {
            error_code ignored;
            c->client.close(ignored);
        }
        idle.clear();
    }

    asio::io_context& ioc;
    std::mt19937_64 rng{20261205};
    std::vector<std::shared_ptr<conn>> idle;
    long long requests = 0;
};

double percentile(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

void hedging_tail(benchmark::State& state) {
    constexpr int callers = 32, calls_each = 40;
    std::vector<double> plain_us, hedged_us;
    long long plain_requests = 0, hedged_requests = 0;
    const auto plain =
        steadfast::pipeline{}.with_retry(steadfast::retry_policy{}.with_stop(steadfast::stop::max_attempts(1)));
    const auto hedged = plain.with_hedging({.max_attempts = 2, .delay = 2ms});
    for (auto _ : state) {
        for (int round = 0; round < 2; ++round) {  // unhedged, then hedged: one run each way per iteration
            const auto& p = round == 0 ? plain : hedged;
            auto& lat = round == 0 ? plain_us : hedged_us;
            asio::io_context ioc(1);
            stalling_server server(ioc);
            int failed = 0, finished = 0;
            for (int c = 0; c < callers; ++c)
                asio::co_spawn(
                    ioc,
                    [&]() -> asio::awaitable<void> {
                        auto attempt = [&](const attempt_context&) { return server.call(); };
                        for (int i = 0; i < calls_each; ++i) {
                            const auto t0 = clk::now();
                            auto r = co_await steadfast::execute(p, attempt);
                            lat.push_back(ns_between(t0, clk::now()) / 1000);
                            if (!r.ok() || r.value()) ++failed;
                        }
                        if (++finished == callers) server.close_idle();
                    },
                    asio::detached);
            ioc.run();
            if (failed) std::abort();
            (round == 0 ? plain_requests : hedged_requests) += server.requests;
        }
    }
    const double p99_plain = percentile(plain_us, 0.99), p99_hedged = percentile(hedged_us, 0.99);
    state.counters["p50_unhedged_us"] = percentile(plain_us, 0.5);
    state.counters["p50_hedged_us"] = percentile(hedged_us, 0.5);
    state.counters["p99_unhedged_us"] = p99_plain;
    state.counters["p99_hedged_us"] = p99_hedged;
    state.counters["p99_ratio"] = p99_hedged / p99_plain;  // goal <= 0.2
    state.counters["requests_ratio"] =
        static_cast<double>(hedged_requests) / static_cast<double>(plain_requests);  // goal <= 1.1
    state.counters["calls"] = static_cast<double>(plain_us.size());
}
BENCHMARK(hedging_tail)->Iterations(5)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
