// The HTTP client's sequential keep-alive request rate next to wrk -t1 -c1
// against the same server, measured in one run (client, wrk, client, wrk).
// Run: bash test/bench/run-transport.sh
#include <steadfast/engine.hpp>
#include <steadfast/transport/classify.hpp>
#include <steadfast/transport/client.hpp>
#include <steadfast/transport/server.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

namespace {
double client_rate(const std::string& port, std::chrono::seconds dur, bool through_engine) {
    asio::io_context ioc;
    steadfast::http::client::options o;
    o.port = port;
    steadfast::http::client c(ioc.get_executor(), o);
    const steadfast::http::request req{"GET", "/bench", {}, {}};
    long n = 0, failed = 0;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            const auto policy = steadfast::retry_policy{};
            const auto classify = steadfast::http::make_classifier(req);
            const auto end = clk::now() + dur;
            while (clk::now() < end) {
                for (int i = 0; i < 100; ++i) {
                    bool ok;
                    if (through_engine) {
                        auto r = co_await steadfast::retry(
                            policy, steadfast::classified(
                                        [&](const steadfast::attempt_context&) { return c.send(req); }, classify));
                        ok = r.ok();
                    } else {
                        auto o2 = co_await c.send(req);
                        ok = o2.has_response() && o2.res().status == 200;
                    }
                    ++n;
                    failed += !ok;
                }
            }
        },
        [](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
        });
    const auto t0 = clk::now();
    ioc.run();
    const double secs = std::chrono::duration<double>(clk::now() - t0).count();
    if (failed) std::fprintf(stderr, "warning: %ld requests failed\n", failed);
    if (c.connections_opened() != 1)
        std::fprintf(stderr, "warning: %llu connections\n", (unsigned long long)c.connections_opened());
    return static_cast<double>(n) / secs;
}

double wrk_rate(const std::string& port, int secs) {
    const std::string cmd = "wrk -t1 -c1 -d" + std::to_string(secs) + "s http://127.0.0.1:" + port + "/bench 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return 0;
    char line[512];
    double rate = 0;
    while (std::fgets(line, sizeof line, p))
        if (std::sscanf(line, "Requests/sec: %lf", &rate) == 1) break;
    while (std::fgets(line, sizeof line, p)) {
    }
    pclose(p);
    return rate;
}
}  // namespace

int main(int argc, char** argv) {
    const int secs = argc > 1 ? std::atoi(argv[1]) : 5;
    asio::io_context server_ioc;
    steadfast::http::router r;
    r.add("GET", "/bench", [](steadfast::http::request&) -> asio::awaitable<steadfast::http::response> {
        co_return steadfast::http::response::json(200, "{\"status\":\"ok\"}");
    });
    steadfast::http::server srv(server_ioc.get_executor(), std::move(r));
    const std::string port = std::to_string(srv.listen("127.0.0.1", 0).port());
    srv.start();
    std::thread server_thread([&] { server_ioc.run(); });

    double client_sum = 0, engine_sum = 0, wrk_sum = 0;
    for (int round = 0; round < 2; ++round) {
        const double c = client_rate(port, std::chrono::seconds(secs), false);
        const double e = client_rate(port, std::chrono::seconds(secs), true);
        const double w = wrk_rate(port, secs);
        std::printf("round %d: client %.0f req/s, client through retry() %.0f req/s, wrk -t1 -c1 %.0f req/s\n",
                    round + 1, c, e, w);
        client_sum += c;
        engine_sum += e;
        wrk_sum += w;
    }
    std::printf("client / wrk = %.3f   client through retry() / wrk = %.3f   (goal >= 0.9)\n", client_sum / wrk_sum,
                engine_sum / wrk_sum);
    server_ioc.stop();
    server_thread.join();
    return wrk_sum > 0 ? 0 : 1;
}
