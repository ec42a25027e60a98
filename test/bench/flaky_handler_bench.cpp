// An embedded secondary whose apply handler throws with probability P on
// each call (drawn from a fixed seed), fed by an embedded primary over HTTP
// on loopback, no fsync: how many of STREAMS x PER_STREAM messages are
// delivered within LIMIT seconds, with the handler called up to ATTEMPTS
// times a message within a request (secondary_config::apply_attempts; 1 is
// the behaviour before it: one throw fails the whole request).
//   steadfast_flaky_handler_bench DIR P ATTEMPTS [BATCH_MAX STREAMS PER_STREAM LIMIT_S]
// Prints one JSON line: delivered, seconds, handler calls. (run-flaky.sh)
#include <steadfast/replication/primary_node.hpp>
#include <steadfast/replication/secondary_node.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace asio = boost::asio;
namespace rep = steadfast::replication;

int main(int argc, char** argv) {
    if (argc < 4) {
        std::fprintf(stderr, "usage: %s DIR P ATTEMPTS [BATCH_MAX STREAMS PER_STREAM LIMIT_S]\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    const double p = std::atof(argv[2]);
    const auto attempts = static_cast<std::uint32_t>(std::atol(argv[3]));
    const std::size_t batch_max = argc > 4 ? std::strtoul(argv[4], nullptr, 10) : 4000;
    const int streams = argc > 5 ? std::atoi(argv[5]) : 3;
    const std::size_t per_stream = argc > 6 ? std::strtoul(argv[6], nullptr, 10) : 10000;
    const double limit_s = argc > 7 ? std::atof(argv[7]) : 10;

    std::atomic<long> calls{0};  // the handler's (on the secondary's database thread)
    std::mt19937_64 rng(1);
    rep::secondary_config sc;
    sc.data = dir + "/secondary";
    sc.fsync = false;
    sc.apply_attempts = attempts;
    sc.schema = "CREATE TABLE IF NOT EXISTS app(stream TEXT, seq INTEGER)";
    rep::secondary_node replica(sc, [&](sqlite3* db, const steadfast::envelope::message& m) {
        ++calls;
        sqlite3_stmt* s = nullptr;
        sqlite3_prepare_v2(db, "INSERT INTO app VALUES(?, ?)", -1, &s, nullptr);
        sqlite3_bind_text(s, 1, m.stream.data(), static_cast<int>(m.stream.size()), SQLITE_TRANSIENT);
        sqlite3_bind_int64(s, 2, static_cast<sqlite3_int64>(m.seq));
        const int rc = sqlite3_step(s);
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE) throw std::runtime_error(sqlite3_errmsg(db));
        if (std::uniform_real_distribution<double>(0, 1)(rng) < p) throw std::runtime_error("transient");
    });

    asio::io_context ioc;
    rep::primary_config pc;
    pc.secondary = "http://127.0.0.1:" + std::to_string(replica.local_endpoint().port());
    pc.data = dir + "/primary";
    pc.fsync = false;
    pc.batch_max = batch_max;
    pc.ladder = "100ms,200ms";
    rep::primary_node primary(ioc.get_executor(), pc);
    const std::size_t total = static_cast<std::size_t>(streams) * per_stream;
    const auto t0 = std::chrono::steady_clock::now();
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            const std::vector<std::string> batch(per_stream, "1");
            for (int i = 0; i < streams; ++i)
                co_await primary.async_publish_batch("s" + std::to_string(i), batch, asio::use_awaitable);
        },
        asio::detached);
    ioc.run();
    const auto limit = t0 + std::chrono::duration<double>(limit_s);
    while (primary.pending() > 0 && std::chrono::steady_clock::now() < limit)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto delivered = total - primary.pending();
    primary.stop();
    std::printf(
        "{\"p\":%g,\"attempts\":%u,\"batch_max\":%zu,\"messages\":%zu,\"delivered\":%zu,\"seconds\":%.2f,"
        "\"handler_calls\":%ld}\n",
        p, attempts, batch_max, total, delivered, secs, calls.load());
    return 0;
}
