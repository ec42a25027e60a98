// steadfast-secondary: applies replicated messages exactly once, in order, per
// stream, durably (SQLite, committed before the answer). Contract:
// shared/CONTRACT.md.
#include "../common/db_worker.hpp"
#include "../common/log.hpp"
#include "../common/metrics.hpp"
#include "../common/sqlite.hpp"
#include "../common/token.hpp"

#include <steadfast/transport/envelope.hpp>
#include <steadfast/transport/http.hpp>
#include <steadfast/transport/server.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/program_options.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <random>

namespace asio = boost::asio;
namespace po = boost::program_options;
using namespace steadfast;
using app::level;

namespace {

struct options {
    std::string listen, data, token_file;
    app::sync_mode sync = app::sync_mode::full;
    double fault_rate = 0, drop_rate = 0;
    unsigned fault_status = 503;
    unsigned delay_ms = 0;
    std::size_t max_body = 1 << 20;
};

// Per-stream apply logic; runs on the database thread only.
class store {
public:
    explicit store(app::database& db) : db_(db) {
        db.exec("CREATE TABLE IF NOT EXISTS streams(stream TEXT PRIMARY KEY, last_seq INTEGER NOT NULL, "
                "max_epoch INTEGER NOT NULL)");
        db.exec("CREATE TABLE IF NOT EXISTS applied(n INTEGER PRIMARY KEY AUTOINCREMENT, stream TEXT NOT NULL, "
                "seq INTEGER NOT NULL, id TEXT NOT NULL, payload TEXT NOT NULL, UNIQUE(stream, seq))");
    }

    struct answer {
        unsigned status = 200;
        std::string body;
        std::string reject_reason;  // for metrics
        std::uint64_t applied = 0, duplicates = 0;
    };

    // One message, inside the caller's transaction. Returns the per-message
    // status, or a 409 answer in `conflict`.
    std::string apply_one(const envelope::message& m, std::optional<answer>& conflict, answer& a) {
        auto& sel = stmt(sel_, "SELECT last_seq, max_epoch FROM streams WHERE stream=?");
        sel.reset();
        sel.bind(1, m.stream);
        std::uint64_t last = 0, max_epoch = 0;
        if (sel.step()) {
            last = static_cast<std::uint64_t>(sel.column_int(0));
            max_epoch = static_cast<std::uint64_t>(sel.column_int(1));
        }
        sel.reset();
        if (m.epoch < max_epoch) {
            conflict = answer{409, "{\"error\":\"stale_epoch\",\"epoch\":" + std::to_string(max_epoch) + "}", "stale_epoch"};
            return {};
        }
        if (m.seq <= last) {
            ++a.duplicates;
            if (m.epoch > max_epoch) set_stream(m.stream, last, m.epoch);
            return "duplicate";
        }
        if (m.seq != last + 1) {
            conflict = answer{409,
                              "{\"error\":\"gap\",\"stream\":\"" + http::json_escape(m.stream) +
                                  "\",\"expected\":" + std::to_string(last + 1) + "}",
                              "gap"};
            return {};
        }
        auto& ins = stmt(ins_, "INSERT INTO applied(stream, seq, id, payload) VALUES(?,?,?,?)");
        ins.reset();
        ins.bind(1, m.stream).bind(2, static_cast<std::int64_t>(m.seq)).bind(3, m.id).bind(4, m.payload.dump());
        ins.step();
        ins.reset();
        set_stream(m.stream, m.seq, std::max(max_epoch, m.epoch));
        ++a.applied;
        return "applied";
    }

    answer apply(const envelope::decoded& d, bool& keep) {
        answer a;
        std::optional<answer> conflict;
        if (auto* m = std::get_if<envelope::message>(&d)) {
            auto st = apply_one(*m, conflict, a);
            if (conflict) {
                keep = false;
                return *conflict;
            }
            a.body = "{\"status\":\"" + st + "\",\"seq\":" + std::to_string(m->seq) + "}";
            return a;
        }
        const auto& b = std::get<envelope::batch>(d);
        std::string results = "{\"results\":[";
        for (std::size_t i = 0; i < b.messages.size(); ++i) {
            auto st = apply_one(b.messages[i], conflict, a);
            if (conflict) {
                keep = false;  // a batch applies atomically: nothing of it stays
                return *conflict;
            }
            if (i) results += ',';
            results += "{\"seq\":" + std::to_string(b.messages[i].seq) + ",\"status\":\"" + st + "\"}";
        }
        a.body = results + "]}";
        return a;
    }

private:
    void set_stream(const std::string& s, std::uint64_t last, std::uint64_t epoch) {
        auto& up = stmt(up_, "INSERT INTO streams(stream, last_seq, max_epoch) VALUES(?,?,?) "
                             "ON CONFLICT(stream) DO UPDATE SET last_seq=excluded.last_seq, max_epoch=excluded.max_epoch");
        up.reset();
        up.bind(1, s).bind(2, static_cast<std::int64_t>(last)).bind(3, static_cast<std::int64_t>(epoch));
        up.step();
        up.reset();
    }
    app::statement& stmt(std::optional<app::statement>& s, std::string_view sql) {
        if (!s) s.emplace(db_.handle(), sql);
        return *s;
    }
    app::database& db_;
    std::optional<app::statement> sel_, ins_, up_;
};

int dump(const std::string& dir) {
    const auto path = (std::filesystem::path(dir) / "secondary.db").string();
    if (!std::filesystem::exists(path)) {
        std::cerr << "steadfast-secondary dump: no database at \"" << path << "\"\n";
        return 1;
    }
    app::database db(dir, "secondary.db", "steadfast-secondary", app::sync_mode::off);
    auto rows = db.prepare("SELECT stream, seq, id, payload FROM applied ORDER BY n");
    std::string line;
    while (rows.step()) {
        line.clear();
        line += "{\"stream\":\"";
        line += http::json_escape(rows.column_text(0));
        line += "\",\"seq\":";
        line += std::to_string(rows.column_int(1));
        line += ",\"id\":\"";
        line += http::json_escape(rows.column_text(2));
        line += "\",\"payload\":";
        line += rows.column_text(3);
        line += "}\n";
        std::fwrite(line.data(), 1, line.size(), stdout);
    }
    return 0;
}

int serve(const options& o) {
    app::init_log("secondary");
    const auto [host, port] = http::parse_listen_address(o.listen);
    const std::string token = o.token_file.empty() ? std::string{} : app::read_token_file(o.token_file);
    app::database db(o.data, "secondary.db", "steadfast-secondary", o.sync);
    std::optional<store> st;
    st.emplace(db);
    app::db_worker worker(db);

    auto registry = std::make_shared<prometheus::Registry>();
    auto& applied = prometheus::BuildCounter().Name("steadfast_secondary_applied_total").Help("Messages applied").Register(*registry).Add({});
    auto& duplicates = prometheus::BuildCounter().Name("steadfast_secondary_duplicates_total").Help("Messages received again and not applied again").Register(*registry).Add({});
    auto& rejected = prometheus::BuildCounter().Name("steadfast_secondary_rejected_total").Help("Requests rejected, by reason").Register(*registry);
    auto& latency = prometheus::BuildHistogram().Name("steadfast_secondary_request_duration_seconds").Help("POST /api/messages latency").Register(*registry).Add({}, app::latency_buckets());
    auto reject = [&](const std::string& reason) { rejected.Add({{"reason", reason}}).Increment(); };

    asio::io_context ioc(1);
    std::mt19937_64 rng(std::random_device{}());
    std::uniform_real_distribution<double> coin(0.0, 1.0);

    http::router routes;
    routes.add("GET", "/health", [](http::request&) -> asio::awaitable<http::response> {
        co_return http::response::json(200, "{\"status\":\"ok\"}");
    });
    routes.add("GET", "/metrics", [&](http::request&) -> asio::awaitable<http::response> {
        http::response r;
        r.body = app::expose(*registry);
        r.set("Content-Type", "text/plain; version=0.0.4");
        co_return r;
    });
    routes.add("POST", "/api/messages", [&](http::request& req) -> asio::awaitable<http::response> {
        const auto t0 = std::chrono::steady_clock::now();
        if (!token.empty()) {
            auto auth = req.get("Authorization");
            if (!auth || !app::bearer_matches(*auth, token)) {
                reject("unauthorized");
                auto r = http::response::error(401, auth ? "wrong bearer token" : "missing bearer token");
                r.set("WWW-Authenticate", "Bearer");
                co_return r;
            }
        }
        if (!http::is_json(req)) {
            reject("content_type");
            co_return http::response::error(415, "Content-Type must be application/json");
        }
        if (o.delay_ms) {
            asio::steady_timer t(ioc, std::chrono::milliseconds(o.delay_ms));
            co_await t.async_wait(asio::use_awaitable);
        }
        if (o.drop_rate > 0 && coin(rng) < o.drop_rate) {
            reject("injected_drop");
            http::response r;
            r.drop_connection = true;
            co_return r;
        }
        if (o.fault_rate > 0 && coin(rng) < o.fault_rate) {
            reject("injected_fault");
            auto r = http::response::error(o.fault_status, "injected fault");
            if (o.fault_status == 503 || o.fault_status == 429) r.set("Retry-After", "1");
            co_return r;
        }
        auto decoded = envelope::decode(req.body, envelope::limits{.max_body_bytes = o.max_body});
        if (auto* err = std::get_if<envelope::decode_error>(&decoded)) {
            reject("malformed");
            co_return http::response::error(400, err->what);
        }
        auto d = std::make_shared<envelope::decoded>(std::move(std::get<envelope::decoded>(decoded)));
        auto job1 = [&st, d](app::database&, bool& keep) {
            return st->apply(*d, keep);
        };
        auto result = co_await worker.run<store::answer>(ioc.get_executor(), std::move(job1));
        if (auto* e = std::get_if<std::string>(&result)) {
            app::log(level::error, "apply_failed", {{"error", *e}});
            reject("storage");
            co_return http::response::error(500, "storage failure: " + *e);
        }
        auto& a = std::get<store::answer>(result);
        applied.Increment(static_cast<double>(a.applied));
        duplicates.Increment(static_cast<double>(a.duplicates));
        if (!a.reject_reason.empty()) reject(a.reject_reason);
        latency.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        co_return http::response::json(a.status, std::move(a.body));
    });

    http::server::options so;
    so.max_body_bytes = o.max_body;
    http::server server(ioc.get_executor(), std::move(routes), so);
    const auto ep = server.listen(host, port);
    server.start();
    app::log(level::info, "listening", {{"address", ep.address().to_string()}, {"port", ep.port()}, {"data", db.path()},
                                        {"sync", o.sync == app::sync_mode::full ? "full" : "off"}, {"auth", !token.empty()}});

    asio::signal_set signals(ioc, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        app::log(level::info, "shutting_down", {{"signal", sig}});
        asio::co_spawn(ioc, server.shutdown(), [&](std::exception_ptr) { ioc.stop(); });
    });
    ioc.run();
    app::log(level::info, "stopped");
    return 0;
}
}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc >= 2 && std::string_view(argv[1]) == "dump") {
            po::options_description d("steadfast-secondary dump");
            std::string data;
            d.add_options()("data", po::value(&data)->required(), "data directory")("help", "this help");
            po::variables_map vm;
            po::store(po::parse_command_line(argc - 1, argv + 1, d), vm);
            if (vm.count("help")) {
                std::cout << "usage: steadfast-secondary dump --data DIR\n" << d;
                return 0;
            }
            po::notify(vm);
            return dump(data);
        }
        options o;
        std::string sync = "full";
        po::options_description d("steadfast-secondary: applies replicated messages exactly once, in order");
        d.add_options()
            ("listen", po::value(&o.listen)->required(), "HOST:PORT to listen on, e.g. 127.0.0.1:9001")
            ("data", po::value(&o.data)->required(), "data directory (created if missing)")
            ("token-file", po::value(&o.token_file), "file whose first line is the bearer token to require")
            ("sync", po::value(&sync)->default_value("full"), "full: fsync before every answer; off: for benchmarks")
            ("fault-rate", po::value(&o.fault_rate)->default_value(0), "share of requests answered --fault-status (0..1)")
            ("fault-status", po::value(&o.fault_status)->default_value(503), "status of injected faults")
            ("drop-rate", po::value(&o.drop_rate)->default_value(0), "share of requests whose connection is dropped (0..1)")
            ("delay-ms", po::value(&o.delay_ms)->default_value(0), "wait this long before answering")
            ("max-body", po::value(&o.max_body)->default_value(1 << 20), "largest request body in bytes (413 above)")
            ("help", "this help");
        po::variables_map vm;
        po::store(po::parse_command_line(argc, argv, d), vm);
        if (vm.count("help")) {
            std::cout << "usage: steadfast-secondary --listen HOST:PORT --data DIR [options]\n"
                         "       steadfast-secondary dump --data DIR\n\n"
                      << d;
            return 0;
        }
        po::notify(vm);
        o.sync = app::parse_sync(sync);
        if (o.fault_rate < 0 || o.fault_rate > 1) throw std::invalid_argument("--fault-rate must be between 0 and 1");
        if (o.drop_rate < 0 || o.drop_rate > 1) throw std::invalid_argument("--drop-rate must be between 0 and 1");
        if (o.fault_status < 400 || o.fault_status > 599) throw std::invalid_argument("--fault-status must be a 4xx or 5xx status");
        if (o.max_body < 1024) throw std::invalid_argument("--max-body must be at least 1024");
        return serve(o);
    } catch (const po::error& e) {
        std::cerr << "steadfast-secondary: " << e.what() << " (see --help)\n";
        return 2;
    } catch (const std::exception& e) {
        std::cerr << "steadfast-secondary: " << e.what() << "\n";
        return 1;
    }
}
