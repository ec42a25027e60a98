// steadfast-pipeline-demo: a pipeline (rate limit -> bulkhead -> retry with a
// circuit breaker -> hedging -> timeout) against a local flaky server,
// printing what each piece did, live.
//
//   steadfast-pipeline-demo [seconds per phase, default 2]
//
// The server speaks one line each way over TCP on 127.0.0.1 (a connection
// per request: "get\n" -> "200\n" or "503\n") and goes through four phases:
//   1. healthy, but 5 % of requests stall for 400 ms: hedges answer them;
//   2. overloaded: 30 % of requests answer 503: retries absorb them;
//   3. an outage: the listener is closed (connection refused): the breaker
//      opens and calls are rejected at once, not sent;
//   4. recovered: the breaker's trial calls close it again.
// Sixteen workers call through the pipeline as fast as its rate limit lets
// them (its queue holds twelve: the others are refused, `limited`, and pause
// 20 ms). Every half second a line says what happened in that half second:
// calls that succeeded, hedges started (and attempts cancelled: losers and
// timeouts), 503s and refused connections seen by attempts, calls rejected
// by the open breaker or by the rate limit, calls that gave up; breaker
// transitions are printed as they happen.
#include <steadfast/engine.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <istream>
#include <memory>
#include <random>
#include <string>

namespace asio = boost::asio;
using asio::ip::tcp;
using namespace std::chrono_literals;
using steadfast::error_code;
using clk = std::chrono::steady_clock;

namespace {

const char* const phase_names[] = {"healthy, 5% stall 400 ms", "overloaded, 30% answer 503",
                                   "outage: connection refused", "recovered"};

// What the client side saw, per half second (reset by the reporter).
struct counters {
    int ok = 0, hedges_started = 0, hedges_cut = 0, answered_503 = 0, refused = 0, timeouts = 0;
    int circuit_open = 0, limited = 0, gave_up = 0;
};

struct flaky_server {
    flaky_server(asio::io_context& context, unsigned short listen_on) : ioc(context), port(listen_on) {}

    void open() {
        acceptor = std::make_shared<tcp::acceptor>(ioc, tcp::endpoint{asio::ip::make_address("127.0.0.1"), port});
        asio::co_spawn(ioc, accept_loop(acceptor), asio::detached);
    }
    void close() {  // the outage: new connections are refused
        if (!acceptor) return;
        error_code ignored;
        acceptor->close(ignored);
        acceptor.reset();
    }

    // (Holds its acceptor: a connection accepted just before close() still
    // comes back here, to a closed acceptor, not a freed one.)
    asio::awaitable<void> accept_loop(std::shared_ptr<tcp::acceptor> a) {
        for (;;) {
            auto [ec, s] = co_await a->async_accept(asio::as_tuple(asio::use_awaitable));
            if (ec || !a->is_open()) co_return;  // closed
            asio::co_spawn(ioc, answer(std::move(s)), asio::detached);
        }
    }

    asio::awaitable<void> answer(tcp::socket s) {
        asio::streambuf in;
        auto [ec, n] = co_await asio::async_read_until(s, in, '\n', asio::as_tuple(asio::use_awaitable));
        if (ec) co_return;
        const double draw = std::uniform_real_distribution<double>(0, 1)(rng);
        std::string reply = "200\n";
        if (phase == 0 && draw < 0.05) {
            asio::steady_timer stall(s.get_executor(), 400ms);
            co_await stall.async_wait(asio::as_tuple(asio::use_awaitable));
        } else if (phase == 1 && draw < 0.30) {
            reply = "503\n";
        }
        co_await asio::async_write(s, asio::buffer(reply), asio::as_tuple(asio::use_awaitable));
    }

    asio::io_context& ioc;
    unsigned short port;
    int phase = 0;
    std::mt19937_64 rng{42};
    std::shared_ptr<tcp::acceptor> acceptor;
};

// One attempt: a connection, "get", the answer. 503 is retryable; so are a
// refused connection and a timeout (the engine's classification of errors).
auto request(unsigned short port, counters& c) {
    return [port, &c](const steadfast::attempt_context& ctx) -> asio::awaitable<steadfast::attempt_result<int>> {
        if (ctx.hedge > 0) ++c.hedges_started;
        tcp::socket s(co_await asio::this_coro::executor);
        auto [ec] =
            co_await s.async_connect({asio::ip::make_address("127.0.0.1"), port}, asio::as_tuple(asio::use_awaitable));
        asio::streambuf in;
        if (!ec)
            std::tie(ec, std::ignore) =
                co_await asio::async_write(s, asio::buffer("get\n", 4), asio::as_tuple(asio::use_awaitable));
        if (!ec)
            std::tie(ec, std::ignore) =
                co_await asio::async_read_until(s, in, '\n', asio::as_tuple(asio::use_awaitable));
        if (ec == asio::error::operation_aborted) ++c.hedges_cut;  // a loser, or cut short by its timeout
        if (ec == asio::error::connection_refused) ++c.refused;
        if (ec) co_return steadfast::attempt_result<int>::retry(ec);
        std::string line;
        std::getline(std::istream(&in), line);
        if (line == "503") {
            ++c.answered_503;
            co_return steadfast::attempt_result<int>::retry(make_error_code(asio::error::try_again));
        }
        co_return 200;
    };
}

}  // namespace

int main(int argc, char** argv) {
    double phase_seconds = 2.0;
    if (argc > 2) {
        std::fprintf(stderr, "usage: steadfast-pipeline-demo [seconds per phase, more than 0, at most 600]\n");
        return 2;
    }
    if (argc == 2) {
        char* end = nullptr;
        phase_seconds = std::strtod(argv[1], &end);
        if (end == argv[1] || *end != '\0' || !(phase_seconds > 0) || phase_seconds > 600) {
            std::fprintf(stderr,
                         "steadfast-pipeline-demo: '%s' is not a number of seconds per phase (more than 0, at most "
                         "600)\nusage: steadfast-pipeline-demo [seconds per phase]\n",
                         argv[1]);
            return 2;
        }
    }
    const auto phase_length = std::chrono::duration_cast<clk::duration>(std::chrono::duration<double>(phase_seconds));
    asio::io_context ioc(1);

    unsigned short port = 0;
    {
        tcp::acceptor probe(ioc, {asio::ip::make_address("127.0.0.1"), 0});
        port = probe.local_endpoint().port();
    }
    flaky_server server(ioc, port);
    server.open();

    counters now;
    const auto start = clk::now();
    auto at = [&] { return std::chrono::duration<double>(clk::now() - start).count(); };

    // The pieces, shared by every worker.
    auto rate = std::make_shared<steadfast::rate_limit>(
        ioc.get_executor(), steadfast::rate_limit::options{.per_second = 400, .burst = 20, .queue = 12});
    auto bulkhead =
        std::make_shared<steadfast::concurrency_limit>(steadfast::concurrency_limit::options{.limit = 8, .queue = 8});
    steadfast::breaker_options bo;
    bo.window_size = 20;
    bo.minimum_calls = 10;
    bo.failure_rate = 0.5;
    bo.half_open_calls = 3;
    // Growing while it keeps failing: 250 ms, then 500 ms.
    bo.break_duration = [](std::uint32_t n) { return std::chrono::milliseconds(250) * std::min<std::uint32_t>(n, 2); };
    bo.on_transition = [&](const steadfast::breaker_transition& t) {
        std::printf("  %5.2f s  breaker %s -> %s\n", at(), steadfast::to_string(t.from), steadfast::to_string(t.to));
    };
    auto breaker = std::make_shared<steadfast::circuit_breaker>(bo);
    const auto pipeline = steadfast::pipeline{}
                              .with_rate_limit(rate)
                              .with_concurrency_limit(bulkhead)
                              .with_retry(steadfast::retry_policy{}
                                              .with_backoff(steadfast::backoff::exponential(20ms, 2.0, 200ms))
                                              .with_stop(steadfast::stop::max_attempts(3))
                                              .with_budget(std::make_shared<steadfast::retry_budget>()))
                              .with_breaker(breaker)
                              .with_hedging({.max_attempts = 2, .delay = 50ms})
                              .with_timeout(250ms);

    std::printf(
        "pipeline: rate limit 400/s (burst 20, queue 12) -> bulkhead 8 (queue 8) -> retry 3 attempts\n"
        "          (backoff 20 ms x2, budget) with a breaker (50%% of 20 calls, break 250 ms, then 500)\n"
        "          -> hedging (2 attempts, 50 ms) -> timeout 250 ms; server on 127.0.0.1:%u\n\n",
        port);
    std::printf("  time     ok  hedges(cut)  503  refused  circuit_open  limited  gave_up  breaker\n");

    const auto end = start + 4 * phase_length;
    int workers_done = 0;
    for (int w = 0; w < 16; ++w)
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                const auto attempt = request(port, now);
                while (clk::now() < end) {
                    const auto r = co_await steadfast::execute(pipeline, attempt);
                    switch (r.reason()) {
                        case steadfast::stop_reason::success:
                            ++now.ok;
                            break;
                        case steadfast::stop_reason::circuit_open:
                            ++now.circuit_open;
                            break;
                        case steadfast::stop_reason::limited:
                            ++now.limited;
                            // A refused call costs nothing: pause as a client would.
                            co_await asio::steady_timer(co_await asio::this_coro::executor, 20ms)
                                .async_wait(asio::use_awaitable);
                            break;
                        default:
                            ++now.gave_up;
                    }
                }
                ++workers_done;
            },
            asio::detached);

    // The phases and the reporter.
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            asio::steady_timer t(co_await asio::this_coro::executor);
            int shown_phase = 0;
            std::printf("  --- phase 1: %s\n", phase_names[0]);
            auto next = start;
            while (workers_done < 16) {  // (the workers count themselves out while this waits)
                next += 500ms;
                t.expires_at(next);
                co_await t.async_wait(asio::use_awaitable);
                const int phase = std::min(3, static_cast<int>((clk::now() - start) / phase_length));
                if (phase != server.phase) {
                    if (phase == 2) server.close();
                    if (server.phase == 2) server.open();
                    server.phase = phase;
                }
                const counters c = std::exchange(now, counters{});
                std::printf("  %5.2f s %5d %6d (%4d) %5d %8d %13d %8d %8d  %s\n", at(), c.ok, c.hedges_started,
                            c.hedges_cut, c.answered_503, c.refused, c.circuit_open, c.limited, c.gave_up,
                            steadfast::to_string(breaker->state()));
                if (phase != shown_phase) {
                    std::printf("  --- phase %d: %s\n", phase + 1, phase_names[phase]);
                    shown_phase = phase;
                }
            }
            server.close();
            const auto s = breaker->get_stats();
            std::printf("\nbreaker: %llu calls let through, %llu rejected; opened %llu times, closed %llu times\n",
                        static_cast<unsigned long long>(s.permitted), static_cast<unsigned long long>(s.rejected),
                        static_cast<unsigned long long>(s.opened), static_cast<unsigned long long>(s.closed));
        },
        asio::detached);

    ioc.run();
}
