// Smallest use of the installed package: a co_await retry that succeeds on the
// third attempt; then the replication library embedded: a secondary_node
// applying through this program's own handler, and a primary_node publishing
// to it from a coroutine; the nodes' log lines through this program's own
// spdlog logger, at its level.
#include <steadfast/conditions.hpp>
#include <steadfast/engine.hpp>
#include <steadfast/replication/envelope.hpp>
#include <steadfast/replication/primary_node.hpp>
#include <steadfast/replication/secondary_node.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sqlite3.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

// 200 messages over two streams, published by a primary_node, applied by a
// secondary_node through this handler, in order per stream, once each.
bool replicate() {
    namespace rep = steadfast::replication;
    char tmpl[] = "/tmp/steadfast-consumer-XXXXXX";
    if (!::mkdtemp(tmpl)) return false;
    const std::filesystem::path dir = tmpl;
    std::mutex m;
    std::map<std::string, std::uint64_t> last;  // stream -> last applied seq
    bool in_order = true;
    std::atomic<int> applied{0};
    bool ok = false;
    {
        rep::secondary_config sc;
        sc.data = (dir / "replica").string();
        sc.fsync = false;
        sc.schema = "CREATE TABLE IF NOT EXISTS events(stream TEXT, seq INTEGER, body TEXT)";
        rep::secondary_node replica(sc, [&](sqlite3* db, const steadfast::envelope::message& msg) {
            sqlite3_stmt* st = nullptr;
            sqlite3_prepare_v2(db, "INSERT INTO events VALUES(?,?,?)", -1, &st, nullptr);
            sqlite3_bind_text(st, 1, msg.stream.c_str(), -1, SQLITE_TRANSIENT);
            sqlite3_bind_int64(st, 2, static_cast<sqlite3_int64>(msg.seq));
            sqlite3_bind_text(st, 3, msg.payload.c_str(), -1, SQLITE_TRANSIENT);
            const int rc = sqlite3_step(st);
            sqlite3_finalize(st);
            if (rc != SQLITE_DONE) throw std::runtime_error(sqlite3_errmsg(db));
            std::lock_guard l(m);
            if (msg.seq != last[msg.stream] + 1) in_order = false;
            last[msg.stream] = msg.seq;
            ++applied;
        });
        asio::io_context ioc;
        rep::primary_config pc;
        pc.secondary = "http://127.0.0.1:" + std::to_string(replica.local_endpoint().port());
        pc.data = (dir / "outbox").string();
        pc.fsync = false;
        rep::primary_node primary(ioc.get_executor(), pc);
        std::uint64_t last_seq = 0;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                for (int i = 0; i < 200; ++i)
                    last_seq = co_await primary.async_publish(i % 2 ? "odd" : "even",
                                                              "{\"i\":" + std::to_string(i) + "}", asio::use_awaitable);
            },
            asio::detached);
        ioc.run();
        for (int i = 0; i < 1000 && applied < 200; ++i) std::this_thread::sleep_for(10ms);
        std::lock_guard l(m);
        ok = last_seq == 100 && applied == 200 && in_order && last["odd"] == 100 && last["even"] == 100;
        std::printf("consumer: replication %s: %d applied, in order %s\n", ok ? "ok" : "FAILED", applied.load(),
                    in_order ? "yes" : "no");
    }
    std::filesystem::remove_all(dir);
    return ok;
}

}  // namespace

// The program's own logger, registered as "steadfast" before any node is made:
// the nodes' lines go through it, each one JSON object inside its pattern,
// at the level the program gives it.
std::ostringstream logged;
std::shared_ptr<spdlog::logger> own_logger() {
    auto l = std::make_shared<spdlog::logger>("steadfast", std::make_shared<spdlog::sinks::ostream_sink_mt>(logged));
    l->set_pattern("[app] %v");
    l->set_level(spdlog::level::debug);  // (not the library's info: the nodes must leave it as it is)
    spdlog::register_logger(l);
    return l;
}

// What the logger caught: the secondary's "listening" line at info, as JSON
// in the program's pattern; its level still the program's debug; then, the
// program's level raised to warn, a new node's line is not there.
bool logged_through_own_logger(spdlog::logger& l) {
    const std::string before = logged.str();
    const bool first = before.find("[app] {\"ts\":\"") != std::string::npos &&
                       before.find("\"level\":\"info\",") != std::string::npos &&
                       before.find("\"app\":\"steadfast\"") != std::string::npos &&
                       before.find("\"event\":\"listening\"") != std::string::npos;
    const bool debug_kept = l.level() == spdlog::level::debug;
    l.set_level(spdlog::level::warn);
    char tmpl[] = "/tmp/steadfast-consumer-log-XXXXXX";
    if (!::mkdtemp(tmpl)) return false;
    {
        steadfast::replication::secondary_config sc;
        sc.data = std::string(tmpl) + "/replica";
        steadfast::replication::secondary_node quiet(sc);
    }
    std::filesystem::remove_all(tmpl);
    const bool level_kept = debug_kept && logged.str() == before;
    std::printf("consumer: log through the program's logger %s, its level kept %s\n", first ? "ok" : "FAILED",
                level_kept ? "ok" : "FAILED");
    if (!first || !level_kept) std::printf("consumer: what it caught:\n%s\n", logged.str().c_str());
    return first && level_kept;
}

int main() {
    const auto logger = own_logger();
    asio::io_context ioc;
    int attempts = 0;
    bool ok = false;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            auto policy = steadfast::retry_policy{}.with_backoff(steadfast::backoff::fixed(1ms));
            auto r = co_await steadfast::retry(
                policy, [&](const steadfast::attempt_context&) -> asio::awaitable<steadfast::error_code> {
                    ++attempts;
                    co_return attempts < 3 ? asio::error::connection_refused : steadfast::error_code{};
                });
            ok = r.ok() && r.attempts() == 3;
        },
        asio::detached);
    ioc.run();
    // The other two components link and work from the installed package too.
    auto online = steadfast::make_flag(ioc.get_executor(), "secondary-online", true);
    const bool flag_ok = online->value();
    const auto decoded = steadfast::envelope::decode(R"({"id":"a","stream":"s","seq":1,"payload":null})");
    const bool envelope_ok = std::holds_alternative<steadfast::envelope::decoded>(decoded);
    std::printf("consumer: %s after %d attempts; conditions %s; envelope %s\n", ok ? "ok" : "FAILED", attempts,
                flag_ok ? "ok" : "FAILED", envelope_ok ? "ok" : "FAILED");
    const bool replicated = replicate();
    const bool log_ok = logged_through_own_logger(*logger);
    return ok && flag_ok && envelope_ok && replicated && log_ok ? 0 : 1;
}
