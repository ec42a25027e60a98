// Issue 29's embedded figure: C coroutines (16 by default) each publishing
// its own stream's messages through primary_node (no HTTP), in batches, with
// fsync; the time until the secondary has acknowledged every one (delivered
// end to end). run-embedded.sh runs it beside --stdin in the same run.
//   steadfast_embedded_bench SECONDARY_URL DATA_DIR [MESSAGES] [COROUTINES] [BATCH] [spread]
//   (BATCH 0: each coroutine calls async_publish, one message at a time;
//   spread: every message on a stream of its own, MESSAGES new streams of one
//   message each, published one at a time: each stream's first batch goes to
//   the secondary by itself, so thousands wait in the request combiner)
// Prints one JSON line: messages, seconds to durable, seconds to delivered, rates.
#include <steadfast/replication/primary_node.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace asio = boost::asio;
namespace rep = steadfast::replication;
using clock_type = std::chrono::steady_clock;

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fputs(
            "usage: steadfast_embedded_bench SECONDARY_URL DATA_DIR [MESSAGES] [COROUTINES] [BATCH] [spread]\n"
            "  (BATCH 0: async_publish one message at a time; spread: a stream of its own for each message)\n",
            stderr);
        return 2;
    }
    const std::size_t messages = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 300'000;
    const std::size_t coroutines = argc > 4 ? std::strtoull(argv[4], nullptr, 10) : 16;
    const bool spread = argc > 6 && std::string(argv[6]) == "spread";
    const std::size_t batch = spread ? 0 : argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 500;
    asio::io_context ioc;
    rep::primary_config cfg;
    cfg.secondary = argv[1];
    cfg.data = argv[2];
    cfg.fsync = true;
    rep::primary_node node(ioc.get_executor(), cfg);
    const auto t0 = clock_type::now();
    clock_type::time_point durable{}, delivered{};
    std::size_t running = coroutines, failed = 0;
    for (std::size_t c = 0; c < coroutines; ++c) {
        asio::co_spawn(
            ioc,
            [&, c]() -> asio::awaitable<void> {
                const std::string stream = "s" + std::to_string(c);
                const std::size_t mine = messages / coroutines + (c < messages % coroutines ? 1 : 0);
                for (std::size_t sent = 0; sent < mine;) {
                    if (batch == 0) {  // one at a time: async_publish, which shares group commits
                        ++sent;
                        auto one = node.async_publish(
                            spread ? "n" + std::to_string(c + (sent - 1) * coroutines) : stream,
                            "{\"n\":" + std::to_string(sent) + ",\"pad\":\"abcdefghijklmnopqrstuvwxyz\"}",
                            asio::use_awaitable);
                        try {
                            co_await std::move(one);
                        } catch (const std::exception& e) {
                            std::fprintf(stderr, "publish failed: %s\n", e.what());
                            ++failed;
                            break;
                        }
                        continue;
                    }
                    std::vector<std::string> payloads;
                    for (std::size_t i = 0; i < batch && sent < mine; ++i, ++sent)
                        payloads.push_back("{\"n\":" + std::to_string(sent + 1) +
                                           ",\"pad\":\"abcdefghijklmnopqrstuvwxyz\"}");
                    auto op = node.async_publish_batch(stream, std::move(payloads), asio::use_awaitable);
                    try {
                        co_await std::move(op);
                    } catch (const std::exception& e) {
                        std::fprintf(stderr, "publish failed: %s\n", e.what());
                        ++failed;
                        break;
                    }
                }
                if (--running == 0) durable = clock_type::now();
            },
            asio::detached);
    }
    // Delivered: every message published and none pending.
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            asio::steady_timer t(ioc);
            while (running > 0 || node.pending() > 0) {
                t.expires_after(std::chrono::milliseconds(1));
                co_await t.async_wait(asio::use_awaitable);
                if (clock_type::now() - t0 > std::chrono::minutes(3)) break;
            }
            delivered = clock_type::now();
        },
        asio::detached);
    ioc.run();
    const double d = std::chrono::duration<double>(durable - t0).count();
    const double e = std::chrono::duration<double>(delivered - t0).count();
    std::printf(
        "{\"messages\":%zu,\"streams\":%zu,\"coroutines\":%zu,\"batch\":%zu,\"durable_s\":%.3f,\"delivered_s\":%.3f,"
        "\"durable_rate\":%.0f,\"delivered_rate\":%.0f,\"pending\":%llu,\"failed\":%zu}\n",
        messages, spread ? messages : coroutines, coroutines, batch, d, e, messages / d, messages / e,
        static_cast<unsigned long long>(node.pending()), failed);
    return failed == 0 && node.pending() == 0 ? 0 : 1;
}
