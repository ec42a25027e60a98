// A key-value service and its replica, embedding steadfast::replication:
//
//   steadfast-kv primary --data DIR --replica http://HOST:PORT --listen HOST:PORT
//   steadfast-kv replica --data DIR --listen HOST:PORT
//
// The primary's PUT /kv?k=KEY (body: a JSON value) writes its own table `kv`
// and the outbox row in one transaction (primary_node::async_publish_with),
// and answers 200 {"seq":N} once that commit is durable. The replica applies
// each put to its own table `kv` inside the transaction that records the
// stream's seq (secondary_node's apply handler), so both tables hold the
// same rows once the primary has delivered. GET /kv?k=KEY reads the
// primary's table; GET /pending says how many puts are not delivered yet.
// SIGTERM or SIGINT stops either. test/examples/kv_kill.py kills both at
// random and compares the tables.
#include <steadfast/replication/primary_node.hpp>
#include <steadfast/replication/secondary_node.hpp>
#include <steadfast/transport/server.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include <sqlite3.h>

#include <csignal>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

namespace asio = boost::asio;
namespace rep = steadfast::replication;
namespace http = steadfast::http;

namespace {

// The table, and every put in the order it was applied (the kill test
// compares both sides' puts one by one).
constexpr const char* schema =
    "CREATE TABLE IF NOT EXISTS kv(k TEXT PRIMARY KEY, v TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS puts(n INTEGER PRIMARY KEY AUTOINCREMENT, k TEXT NOT NULL, v TEXT NOT NULL)";

void exec_put(sqlite3* db, const char* sql, const std::string& k, const std::string& v) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) throw std::runtime_error(sqlite3_errmsg(db));
    sqlite3_bind_text(st, 1, k.data(), static_cast<int>(k.size()), SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    const int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) throw std::runtime_error(sqlite3_errmsg(db));
}

// A put, on the node's database thread: the row, and the put's record.
void upsert(sqlite3* db, const std::string& k, const std::string& v) {
    exec_put(db, "INSERT OR REPLACE INTO kv(k, v) VALUES(?, ?)", k, v);
    exec_put(db, "INSERT INTO puts(k, v) VALUES(?, ?)", k, v);
}

std::optional<std::string> read(sqlite3* db, const std::string& k) {
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, "SELECT v FROM kv WHERE k = ?", -1, &st, nullptr) != SQLITE_OK)
        throw std::runtime_error(sqlite3_errmsg(db));
    sqlite3_bind_text(st, 1, k.data(), static_cast<int>(k.size()), SQLITE_TRANSIENT);
    std::optional<std::string> v;
    if (sqlite3_step(st) == SQLITE_ROW) v = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    return v;
}

bool valid_key(const std::string& k) {
    return !k.empty() && k.size() <= 64 &&
           k.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == std::string::npos;
}

int run_primary(const std::map<std::string, std::string>& args) {
    asio::io_context ioc;
    rep::primary_config cfg;
    cfg.secondary = args.at("replica");
    cfg.data = args.at("data");
    cfg.schema = schema;
    cfg.ladder = "1s";  // an example: a down replica is tried again every second
    rep::primary_node node(ioc.get_executor(), cfg);

    http::router r;
    r.add("PUT", "/kv", [&node](http::request& req) -> asio::awaitable<http::response> {
        const auto k = http::query_param(req.target, "k");
        if (!k || !valid_key(*k)) co_return http::response::error(400, "give ?k=KEY: 1 to 64 of A-Z a-z 0-9 _ -");
        const auto v = nlohmann::json::parse(req.body, nullptr, false);
        if (v.is_discarded()) co_return http::response::error(400, "the body is not one JSON value");
        // The row and the message in one transaction: both or neither.
        // (Named before the co_await: g++ 12 and temporaries in co_await.)
        rep::primary_node::transaction_writes writes = [k = *k, text = v.dump()](sqlite3* db) { upsert(db, k, text); };
        auto put = node.async_publish_with("kv", nlohmann::json{{"k", *k}, {"v", v}}.dump(), std::move(writes),
                                           asio::as_tuple(asio::use_awaitable));
        auto [ec, seq] = co_await std::move(put);
        if (ec) {
            // The client's mistakes are 4xx; what the server cannot do now
            // (stopped, a full disk, a failed commit) is 5xx: put again later.
            using pe = rep::publish_error;
            const unsigned status = ec == pe::invalid_payload || ec == pe::invalid_stream ? 400
                                    : ec == pe::too_large                                 ? 413
                                    : ec == pe::disk_low                                  ? 507
                                                                                          : 503;
            co_return http::response::error(status, ec.message());
        }
        co_return http::response::json(200, nlohmann::json{{"seq", seq}}.dump());
    });
    r.add("GET", "/kv", [&node](http::request& req) -> asio::awaitable<http::response> {
        const auto k = http::query_param(req.target, "k");
        if (!k || !valid_key(*k)) co_return http::response::error(400, "give ?k=KEY: 1 to 64 of A-Z a-z 0-9 _ -");
        auto found = std::make_shared<std::optional<std::string>>();
        rep::primary_node::transaction_writes lookup = [k = *k, found](sqlite3* db) { *found = read(db, k); };
        auto get = node.async_transaction(std::move(lookup), asio::as_tuple(asio::use_awaitable));
        auto [ec] = co_await std::move(get);
        if (ec) co_return http::response::error(503, ec.message());
        if (!*found) co_return http::response::error(404, "no such key");
        co_return http::response::json(200, **found);
    });
    r.add("GET", "/pending", [&node](http::request&) -> asio::awaitable<http::response> {
        co_return http::response::json(
            200, nlohmann::json{{"pending", node.pending()}, {"replica_online", node.secondary_online()}}.dump());
    });
    http::server server(ioc.get_executor(), std::move(r));
    const auto [host, port] = http::parse_listen_address(args.at("listen"));
    const auto ep = server.listen(host, port);
    server.start();
    std::printf("{\"event\":\"listening\",\"port\":%u}\n", static_cast<unsigned>(ep.port()));
    std::fflush(stdout);
    asio::signal_set signals(ioc, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int) {
        if (ec) return;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
                co_await server.shutdown();
                node.stop();
                ioc.stop();
            },
            asio::detached);
    });
    ioc.run();
    return 0;
}

int run_replica(const std::map<std::string, std::string>& args) {
    // Signals are waited for on this thread; the node's threads never see them.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    rep::secondary_config cfg;
    cfg.listen = args.at("listen");
    cfg.data = args.at("data");
    cfg.schema = schema;
    rep::secondary_node node(cfg, [](sqlite3* db, const steadfast::envelope::message& m) {
        // A put the replica refused for good (over its body limit) was
        // dead-lettered at the primary; its tombstone holds the place.
        if (steadfast::envelope::is_tombstone(m.payload)) return;
        const auto put = nlohmann::json::parse(m.payload);
        upsert(db, put.at("k").get<std::string>(), put.at("v").dump());
    });
    std::printf("{\"event\":\"listening\",\"port\":%u}\n", static_cast<unsigned>(node.local_endpoint().port()));
    std::fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string usage =
        "usage: steadfast-kv primary --data DIR --replica http://HOST:PORT --listen HOST:PORT\n"
        "       steadfast-kv replica --data DIR --listen HOST:PORT\n";
    if (argc < 2 || (std::string(argv[1]) != "primary" && std::string(argv[1]) != "replica")) {
        std::fputs(usage.c_str(), stderr);
        return 2;
    }
    const std::string mode = argv[1];
    std::map<std::string, std::string> args;
    for (int i = 2; i + 1 < argc; i += 2) {
        std::string flag = argv[i];
        if (!flag.starts_with("--")) {
            std::fprintf(stderr, "unexpected \"%s\"\n%s", argv[i], usage.c_str());
            return 2;
        }
        args[flag.substr(2)] = argv[i + 1];
    }
    for (const char* need : {"data", "listen"})
        if (!args.count(need) || (mode == "primary" && !args.count("replica"))) {
            std::fprintf(stderr, "missing --%s\n%s", args.count(need) ? "replica" : need, usage.c_str());
            return 2;
        }
    try {
        return mode == "primary" ? run_primary(args) : run_replica(args);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "{\"event\":\"fatal\",\"error\":\"%s\"}\n", e.what());
        return 1;
    }
}
