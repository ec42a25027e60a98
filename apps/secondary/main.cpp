// steadfast-secondary: applies replicated messages exactly once, in order, per
// stream, durably (SQLite, committed before the answer). Contract:
// docs/contract.md.
#include "../common/db_worker.hpp"
#include "../common/random_id.hpp"
#include "../common/options.hpp"
#include "../common/log.hpp"
#include "../common/metrics.hpp"
#include "../common/sqlite.hpp"
#include "../common/storage_health.hpp"
#include "../common/token.hpp"
#include "../common/token_reload.hpp"
#include "source.hpp"
#include "store.hpp"

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

#include <charconv>
#include <chrono>
#include <csignal>
#include <cstring>
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
    std::chrono::milliseconds delay{0};
    app::level log_level = app::level::info;
    std::optional<http::tls_server_options> tls;  // HTTPS on --listen
    std::size_t max_body = 1 << 20;
    http::server::options listener;  // --max-connections, --reserved-connections, --header-timeout
    std::uint64_t min_free = 0;      // --min-free-space
    std::uint64_t max_epoch_step = 1000;
    secondary::source_options source;  // --source nats://...: consume from JetStream
};

int dump(const std::string& dir) {
    // Read-only, beside a running server (WAL: it sees the last commit).
    app::database db(dir, "secondary.db", "steadfast-secondary", app::sync_mode::off, app::open_mode::read_only);
    auto rows = db.prepare("SELECT stream, seq, id, payload FROM applied ORDER BY n");
    std::string line;
    while (rows.step()) {
        line.clear();
        envelope::encode_dump_line(line, rows.column_text(0), static_cast<std::uint64_t>(rows.column_int(1)),
                                   rows.column_text(2), rows.column_text(3));
        if (std::fwrite(line.data(), 1, line.size(), stdout) != line.size()) {
            app::report_fatal("secondary", "dump_failed", std::string("writing to standard output failed: ") + std::strerror(errno));
            return 1;
        }
    }
    if (std::fflush(stdout) != 0) {
        app::report_fatal("secondary", "dump_failed", std::string("writing to standard output failed: ") + std::strerror(errno));
        return 1;
    }
    db.check_unchanged();
    return 0;
}

// `status --data DIR`: one JSON line, read-only (beside a running server, or
// on a read-only copy).
int status(const std::string& dir) {
    app::database db(dir, "secondary.db", "steadfast-secondary", app::sync_mode::off, app::open_mode::read_only);
    nlohmann::json j{{"epoch_fence", 0}, {"last_seq", nlohmann::json::object()}, {"applied", 0}};
    {
        auto f = db.prepare("SELECT value FROM meta WHERE key='epoch_fence'");
        if (f.step()) j["epoch_fence"] = std::stoull(std::string(f.column_text(0)));
    }
    {
        auto s = db.prepare("SELECT stream, last_seq FROM streams ORDER BY stream");
        while (s.step()) j["last_seq"][std::string(s.column_text(0))] = s.column_int(1);
    }
    {
        auto c = db.prepare("SELECT count(*) FROM applied");
        if (c.step()) j["applied"] = c.column_int(0);
    }
    db.check_unchanged();
    std::cout << j.dump() << "\n";
    return 0;
}

// `set-fence --data DIR --epoch N`: the secondary stopped, sets its epoch
// fence (lowers one raised by mistake). Logged, with the value it replaced.
int set_fence(const std::string& dir, std::uint64_t epoch) {
    // Only a secondary's existing store (never a fresh one in a mistyped
    // directory, or an empty file made one): checked read-only first.
    (void)app::database(dir, "secondary.db", "steadfast-secondary", app::sync_mode::off, app::open_mode::read_only);
    app::init_log("secondary", level::info);
    app::database db(dir, "secondary.db", "steadfast-secondary", app::sync_mode::full);  // takes the directory's lock
    secondary::store st(db);
    db.exec("BEGIN IMMEDIATE");
    std::uint64_t before = 0;
    try {
        before = st.fence();
        st.set_fence(epoch);
        db.exec("COMMIT");
    } catch (...) {
        db.exec("ROLLBACK");
        throw;
    }
    app::log(level::warn, "fence_set", {{"data", db.path()}, {"from", before}, {"to", epoch},
                                        {"note", "a primary with an epoch below the new fence is refused (409 stale_epoch)"}});
    return 0;
}

int serve(const options& o) {
    app::init_log("secondary", o.log_level);
    if (o.tls) app::warn_invalid_certificate(o.tls->cert_file, "--tls-cert (served on --listen)");
    std::vector<std::string> tokens;  // any is accepted; SIGHUP reloads them
    if (!o.token_file.empty()) tokens = app::read_token_file(o.token_file);
    app::database db(o.data, "secondary.db", "steadfast-secondary", o.sync);
    secondary::store st(db);
    if (o.source.servers.empty()) st.set_max_epoch_step(o.max_epoch_step);
    // Declared before the worker: the worker's last completions are posted to
    // it, so it must outlive the worker.
    asio::io_context ioc(1);
    app::db_worker worker(db);

    auto registry = std::make_shared<prometheus::Registry>();
    auto& applied = prometheus::BuildCounter().Name("steadfast_secondary_applied_total").Help("Messages applied").Register(*registry).Add({});
    auto& duplicates = prometheus::BuildCounter().Name("steadfast_secondary_duplicates_total").Help("Messages received again and not applied again").Register(*registry).Add({});
    auto& rejected = prometheus::BuildCounter().Name("steadfast_secondary_rejected_total").Help("Requests rejected, by reason").Register(*registry);
    auto& latency = prometheus::BuildHistogram().Name("steadfast_secondary_request_duration_seconds").Help("POST /api/messages latency").Register(*registry).Add({}, app::latency_buckets());
    auto reject = [&](const std::string& reason) { rejected.Add({{"reason", reason}}).Increment(); };

    app::register_build_info(*registry, "steadfast-secondary");
    bool draining = false;  // a shutdown signal was received: /ready says 503

    std::mt19937_64 rng(std::random_device{}());
    // This run of the process, on /health: a primary that sees it change
    // rechecks its quiet streams (the data directory may have been restored).
    const std::string instance = app::random_hex(16);
    std::uniform_real_distribution<double> coin(0.0, 1.0);

    http::router routes;
    auto& storage_gauge = prometheus::BuildGauge().Name("steadfast_secondary_storage_ok").Help("1 while the store commits and has --min-free-space").Register(*registry).Add({});
    auto& free_gauge = prometheus::BuildGauge().Name("steadfast_secondary_storage_free_bytes").Help("Free bytes on the data directory's filesystem (as of the last check)").Register(*registry).Add({});
    auto& fence_gauge = prometheus::BuildGauge().Name("steadfast_secondary_epoch").Help("The epoch fence: messages of a lower epoch are refused (409 stale_epoch)").Register(*registry).Add({});
    storage_gauge.Set(1);
    // Logged once a transition: a full disk refuses writes before they fail.
    app::storage_health health(ioc.get_executor(), {o.data, o.min_free}, [&](bool ok, const std::string& why) {
        nlohmann::json f = nlohmann::json::object();
        if (!ok && why == "low_disk_space") f = {{"error", "low disk space"}, {"available", health.available()}, {"min_free_space", o.min_free}};
        else if (!ok) f = {{"error", why}};
        app::log(ok ? level::info : level::error, ok ? "storage_recovered" : "storage_failed", std::move(f));
        storage_gauge.Set(ok ? 1 : 0);
    });
    health.start();
    auto storage_state = [&](const std::string& err) {
        if (err.empty())
            health.commit_ok();
        else {
            health.commit_failed(err);
            health.check_disk();
        }
    };
    // While the store is failing, /health and /ready try a small write: the
    // store may work again (disk space freed). Returns the error, if any.
    auto recheck_storage = [&]() -> asio::awaitable<std::string> {
        if (health.disk_low()) co_return health.low_message();
        if (!health.commit_failing()) co_return std::string{};
        // A write of the largest message's size: ready means one can be stored.
        auto probe = [max = o.max_body](app::database& d, bool&) {
            d.probe_write(max);
            return true;
        };
        auto r = co_await worker.run<bool>(ioc.get_executor(), std::move(probe));
        std::string err = std::holds_alternative<std::string>(r) ? std::get<std::string>(r) : std::string{};
        if (err.empty())
            worker.post([](app::database& d) {
                d.touch();  // the probe's bytes go again
                return true;
            }, [](const std::string&) {});
        storage_state(err);
        co_return err;
    };
    // Readiness: 503 while draining or while the store cannot commit (then
    // every message would be answered 503 anyway).
    routes.add("GET", "/ready", [&](http::request&) -> asio::awaitable<http::response> {
        if (draining) co_return http::response::json(503, "{\"status\":\"draining\"}");
        if (health.disk_low())
            co_return http::response::json(503, nlohmann::json{{"status", "low_disk_space"}, {"available", health.available()},
                                                               {"min_free_space", o.min_free}}.dump());
        if (!(co_await recheck_storage()).empty()) co_return http::response::json(503, "{\"status\":\"storage_failed\"}");
        co_return http::response::json(200, "{\"status\":\"ready\"}");
    });
    std::unique_ptr<secondary::js_source> source;
    routes.add("GET", "/health", [&](http::request&) -> asio::awaitable<http::response> {
        if (auto e = co_await recheck_storage(); !e.empty())
            co_return http::response::json(503, "{\"status\":\"storage_failed\",\"error\":\"" + http::json_escape(e) + "\"}");
        if (source) {
            // The JetStream link: 503 while no NATS server is reachable, the
            // consumer is not there, or a stream is blocked.
            const char* status = !source->connected()        ? "jetstream_disconnected"
                                 : !source->consuming()      ? "not_consuming"
                                 : !source->blocked().empty() ? "streams_blocked"
                                                              : "ok";
            nlohmann::json j{{"status", status}, {"jetstream", source->health()}};
            co_return http::response::json(std::string_view(status) == "ok" ? 200 : 503, j.dump());
        }
        auto ok = http::response::json(200, "{\"status\":\"ok\"}");
        ok.set("X-Steadfast-Instance", instance);  // a primary learns from a new value that this process restarted
        co_return ok;
    });
    auto& refused = prometheus::BuildCounter().Name("steadfast_secondary_connections_rejected_total").Help("Connections closed at once: over --max-connections").Register(*registry).Add({});
    auto& accepted = prometheus::BuildCounter().Name("steadfast_secondary_connections_accepted_total").Help("Connections accepted (keep-alive reuses them)").Register(*registry).Add({});
    auto& tls_failures = prometheus::BuildCounter().Name("steadfast_secondary_tls_handshake_failures_total").Help("TLS handshakes that failed: no or a wrong client certificate, not TLS, ...").Register(*registry).Add({});
    http::server* server_ptr = nullptr;
    auto& last_seq = prometheus::BuildGauge().Name("steadfast_secondary_last_applied_seq").Help("The last seq applied, per stream").Register(*registry);
    auto& last_applied_at = prometheus::BuildGauge().Name("steadfast_secondary_last_applied_timestamp_seconds").Help("When a message was last applied (Unix time; 0: none since start)").Register(*registry).Add({});
    auto& js_connected = prometheus::BuildGauge().Name("steadfast_secondary_jetstream_connected").Help("1 while connected to a NATS server (--source)").Register(*registry).Add({});
    auto& js_lag = prometheus::BuildGauge().Name("steadfast_secondary_jetstream_consumer_pending").Help("Messages in the stream not yet delivered to this consumer (its lag), as of the last delivery").Register(*registry).Add({});
    auto& js_blocked = prometheus::BuildGauge().Name("steadfast_secondary_jetstream_blocked_streams").Help("Streams not applying (conflict, gap)").Register(*registry).Add({});
    auto& js_redeliveries = prometheus::BuildCounter().Name("steadfast_secondary_jetstream_redeliveries_total").Help("Messages JetStream delivered again (not acknowledged in time, or nak'd)").Register(*registry).Add({});
    auto& js_repairs = prometheus::BuildCounter().Name("steadfast_secondary_jetstream_repair_requests_total").Help("Requests to the primary to resend a hole in the log").Register(*registry).Add({});
    app::db_metrics db_metrics(*registry, "secondary");
    routes.add("GET", "/metrics", [&](http::request&) -> asio::awaitable<http::response> {
        db_metrics.sync(worker.get_stats());
        health.check_disk();
        free_gauge.Set(static_cast<double>(health.available()));
        if (server_ptr) {
            app::sync_counter(refused, server_ptr->get_stats().connections_rejected);
            app::sync_counter(tls_failures, server_ptr->get_stats().tls_handshake_failures);
            app::sync_counter(accepted, server_ptr->get_stats().connections_accepted);
        }
        if (source) {
            js_connected.Set(source->connected() ? 1 : 0);
            js_lag.Set(static_cast<double>(source->lag()));
            js_blocked.Set(static_cast<double>(source->blocked().size()));
            app::sync_counter(js_redeliveries, source->redeliveries());
            app::sync_counter(js_repairs, source->repair_requests());
        }
        using positions_t = std::pair<std::uint64_t, std::vector<std::pair<std::string, std::uint64_t>>>;
        auto read = [&st](app::database&, bool&) { return positions_t{st.fence(), st.last_applied()}; };
        auto positions = co_await worker.run<positions_t>(ioc.get_executor(), std::move(read));
        if (auto* p = std::get_if<0>(&positions)) {
            fence_gauge.Set(static_cast<double>(p->first));
            for (const auto& [stream, seq] : p->second) last_seq.Add({{"stream", stream}}).Set(static_cast<double>(seq));
        }
        http::response r;
        r.body = app::expose(*registry);
        r.set("Content-Type", "text/plain; version=0.0.4");
        co_return r;
    });
    // With --source, JetStream is the only way in: no POST /api/messages.
    if (o.source.servers.empty()) {
        // What this secondary holds, a page at a time: a primary that
        // reconnects resends only to the streams it finds behind.
        routes.add("GET", "/api/streams", [&](http::request& req) -> asio::awaitable<http::response> {
            if (auto denied = app::refuse_unauthorized(req, tokens)) {
                reject("unauthorized");
                co_return std::move(*denied);
            }
            if (auto unknown = http::unknown_query_params(req.target, {"after", "limit"}); !unknown.empty())
                co_return http::response::error(400, "unknown query parameter(s) " + unknown + " (after=NAME, limit=N)");
            const std::string after = http::query_param(req.target, "after").value_or("");
            std::size_t limit = 1000;
            if (auto l = http::query_param(req.target, "limit")) {
                const auto* end = l->data() + l->size();
                auto [p, ec] = std::from_chars(l->data(), end, limit);
                if (ec != std::errc{} || p != end || limit == 0 || limit > envelope::max_positions_page)
                    co_return http::response::error(400, "limit must be 1 to " + std::to_string(envelope::max_positions_page));
            }
            auto page = [&st, after, limit](app::database&, bool&) { return st.positions_after(after, limit); };
            auto got = co_await worker.run<envelope::positions_page>(ioc.get_executor(), std::move(page));
            if (auto* e = std::get_if<std::string>(&got)) co_return http::response::error(503, "storage failure: " + *e);
            co_return http::response::json(200, envelope::encode(std::get<envelope::positions_page>(got)));
        });
        routes.add("POST", "/api/messages", [&](http::request& req) -> asio::awaitable<http::response> {
            const auto t0 = std::chrono::steady_clock::now();
            if (auto denied = app::refuse_unauthorized(req, tokens)) {
                reject("unauthorized");
                co_return std::move(*denied);
            }
            if (!http::is_json(req)) {
                reject("content_type");
                co_return http::response::error(415, "Content-Type must be application/json");
            }
            if (health.disk_low_now()) {
                // Refused before SQLite fails on a full disk: the primary keeps it and retries.
                reject("storage");
                auto r = http::response::error(503, "insufficient storage: " + health.low_message());
                r.set("Retry-After", "1");
                co_return r;
            }
            if (o.delay.count()) {
                asio::steady_timer t(ioc, o.delay);
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
                return st.apply(*d, keep);
            };
            auto result = co_await worker.run<secondary::store::answer>(ioc.get_executor(), std::move(job1));
            if (auto* e = std::get_if<std::string>(&result)) {
                storage_state(*e);
                reject("storage");
                // Nothing was applied: the primary keeps the messages and retries.
                auto r = http::response::error(503, "storage failure: " + *e);
                r.set("Retry-After", "1");
                co_return r;
            }
            auto& a = std::get<secondary::store::answer>(result);
            // Only a commit that wrote something shows the store works again (a
            // duplicate or a 409 commits nothing).
            if (a.applied > 0) {
                storage_state({});
                last_applied_at.Set(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
            }
            applied.Increment(static_cast<double>(a.applied));
            duplicates.Increment(static_cast<double>(a.duplicates));
            if (!a.reject_reason.empty()) reject(a.reject_reason);
            latency.Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            co_return http::response::json(a.status, std::move(a.body));
        });
    }

    http::server::options so = o.listener;
    so.max_body_bytes = o.max_body;
    so.tls = o.tls;
    std::optional<http::server> server;
    if (!o.listen.empty()) {
        const auto [host, port] = http::parse_listen_address(o.listen);
        server.emplace(ioc.get_executor(), std::move(routes), so);
        server_ptr = &*server;
        asio::ip::tcp::endpoint ep;
        try {
            ep = server->listen(host, port);
        } catch (const boost::system::system_error& e) {
            // An address in use, or not ours to bind: the configuration (exit
            // 2). One not configured yet (a boot where the network comes
            // later) may appear: exit 1, and the unit tries again.
            if (e.code() == boost::system::errc::address_not_available) throw;
            throw app::config_error(e.what());
        }
        server->start();
        app::log(level::info, "listening", {{"address", ep.address().to_string()}, {"port", ep.port()}, {"data", db.path()},
                                            {"sync", o.sync == app::sync_mode::full ? "full" : "off"}, {"auth", !tokens.empty()},
                                            {"tls", o.tls.has_value()}, {"mutual_tls", o.tls && !o.tls->client_ca_file.empty()}});
    }
    int running = server ? 1 : 0;  // the server and the source: ioc stops when both ended
    if (!o.source.servers.empty()) {
        secondary::source_hooks hooks;
        hooks.counted = [&](const secondary::store::answer& a) {
            if (a.applied > 0)
                last_applied_at.Set(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
            applied.Increment(static_cast<double>(a.applied));
            duplicates.Increment(static_cast<double>(a.duplicates));
            if (!a.reject_reason.empty()) reject(a.reject_reason);
        };
        hooks.storage = storage_state;
        hooks.rejected = reject;
        source = std::make_unique<secondary::js_source>(ioc, worker, st, o.source, std::move(hooks));
        ++running;
        app::log(level::info, "source", {{"servers", o.source.servers}, {"stream", o.source.stream},
                                         {"consumer", o.source.consumer}, {"data", db.path()},
                                         {"sync", o.sync == app::sync_mode::full ? "full" : "off"}});
        asio::co_spawn(ioc, source->run(), [&](std::exception_ptr e) {
            if (e) {
                try {
                    std::rethrow_exception(e);
                } catch (const std::exception& ex) {
                    app::log(level::error, "source_failed", {{"error", ex.what()}});
                }
            }
            if (--running == 0) ioc.stop();
        });
    }

    app::token_reloader reload(ioc.get_executor(), o.token_file, tokens);
    asio::signal_set signals(ioc, SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        app::log(level::info, "shutting_down", {{"signal", sig}});
        draining = true;
        health.stop();
        if (source) source->stop();
        if (server)
            asio::co_spawn(ioc, server->shutdown(), [&](std::exception_ptr) {
                if (--running == 0) ioc.stop();
            });
        else if (!source)
            ioc.stop();
    });
    ioc.run();
    app::log(level::info, "stopped");
    return 0;
}
}  // namespace

int main(int argc, char** argv) {
    // A file-size limit (ulimit -f) must fail a write with EFBIG, which the
    // store reports, instead of killing the process.
    std::signal(SIGXFSZ, SIG_IGN);
    // SIGHUP reloads the token file while serving; before and after that it
    // must not end the process either.
    std::signal(SIGHUP, SIG_IGN);
    try {
        const std::string_view command = argc >= 2 && argv[1][0] != '-' ? std::string_view(argv[1]) : std::string_view();
        if (!command.empty() && command != "dump" && command != "status" && command != "set-fence")
            throw po::error(std::string("unknown command \"") + argv[1] + "\" (commands: dump, status, set-fence; or flags to serve)");
        if (command == "dump" || command == "status") {
            po::options_description d("steadfast-secondary " + std::string(command));
            std::string data;
            d.add_options()("data", po::value(&data)->required(), "data directory (read-only access is enough)")("help", "this help");
            po::variables_map vm;
            po::store(app::parse_command_line(argc - 1, argv + 1, d), vm);
            if (vm.count("help")) {
                std::cout << "usage: steadfast-secondary " << command << " --data DIR\n" << d;
                return 0;
            }
            po::notify(vm);
            return command == "dump" ? dump(data) : status(data);
        }
        if (command == "set-fence") {
            po::options_description d("steadfast-secondary set-fence");
            std::string data;
            std::uint64_t epoch = 0;
            d.add_options()("data", po::value(&data)->required(), "data directory (the secondary stopped)")
                ("epoch", po::value(&epoch)->required(), "the new epoch fence: the epoch of the primary that is to deliver")
                ("help", "this help");
            po::variables_map vm;
            auto parsed = app::parse_command_line(argc - 1, argv + 1, d);
            for (const auto& opt : parsed.options)
                if (opt.string_key == "epoch" && !opt.value.empty() && opt.value.front().find_first_not_of("0123456789") != std::string::npos)
                    throw po::error("--epoch takes a whole number, got \"" + opt.value.front() + "\"");
            po::store(parsed, vm);
            if (vm.count("help")) {
                std::cout << "usage: steadfast-secondary set-fence --data DIR --epoch N\n"
                             "  sets the epoch fence (lowers one raised by mistake); the secondary must be stopped\n" << d;
                return 0;
            }
            po::notify(vm);
            return set_fence(data, epoch);
        }
        options o;
        std::string sync = "full";
        po::options_description d("steadfast-secondary: applies replicated messages exactly once, in order");
        d.add_options()
            ("listen", po::value(&o.listen), "HOST:PORT to listen on, e.g. 127.0.0.1:9001 (required without --source)")
            ("data", po::value(&o.data)->required(), "data directory (created if missing)")
            ("token-file", po::value(&o.token_file), "bearer tokens to accept, one a line (any is accepted); SIGHUP reloads it")
            ("sync", po::value(&sync)->default_value("full"), "full: fsync before every answer; off: for benchmarks")
            ("fault-rate", po::value(&o.fault_rate)->default_value(0), "share of requests answered --fault-status (0..1)")
            ("fault-status", po::value(&o.fault_status)->default_value(503), "status of injected faults")
            ("drop-rate", po::value(&o.drop_rate)->default_value(0), "share of requests whose connection is dropped (0..1)")
            ("delay", po::value<std::string>()->default_value("0s"), "wait this long before answering (for tests), e.g. 250ms")
            ("delay-ms", po::value<std::string>(), "the same as --delay, in milliseconds (kept for old scripts)")
            ("max-body", po::value(&o.max_body)->default_value(1 << 20), "largest request body in bytes (413 above)")
            ("max-epoch-step", po::value(&o.max_epoch_step)->default_value(1000), "refuse (400) an epoch more than this above the fence (a failover adds one)");
        app::add_listener_options(d);
        app::add_storage_options(d);
        po::options_description jsd("JetStream: consume the primary's stream (the primary has a nats:// --secondary)");
        jsd.add_options()
            ("source", po::value(&o.source.servers), "nats://HOST:PORT[,nats://HOST:PORT...]: consume from JetStream")
            ("js-stream", po::value(&o.source.stream)->default_value("steadfast"), "the primary's --js-stream")
            ("consumer", po::value(&o.source.consumer), "this secondary's durable consumer (one name per secondary)")
            ("js-batch", po::value(&o.source.batch)->default_value(1000), "JetStream messages fetched (and committed) at once at most");
        d.add(jsd);
        po::options_description tls("TLS (HTTPS on --listen)");
        app::add_tls_server_options(tls);
        d.add(tls);
        app::add_common_options(d);
        po::variables_map vm;
        app::read_options(argc, argv, d, vm, {{"delay-ms", "delay"}});
        if (vm.count("version")) {
            std::cout << "steadfast-secondary " << steadfast::version << "\n";
            return 0;
        }
        if (vm.count("help")) {
            std::cout << "usage: steadfast-secondary --listen HOST:PORT --data DIR [options]\n"
                         "       steadfast-secondary --source nats://HOST:PORT --consumer NAME --data DIR [--listen HOST:PORT] [options]\n"
                         "       steadfast-secondary dump --data DIR        (every applied message, one JSON line each)\n"
                         "       steadfast-secondary status --data DIR      (one JSON line: the fence, each stream's last seq)\n"
                         "       steadfast-secondary set-fence --data DIR --epoch N   (stopped: lower a fence raised by mistake)\n\n"
                      << d << "\n"
                      << "exit codes: 0 stopped (SIGTERM, SIGINT); 1 runtime error (storage failed, data directory in\n"
                         "            use, not a database of the secondary); 2 bad flags or configuration (the listen\n"
                         "            address in use)\n";
            return 0;
        }
        po::notify(vm);
        if (vm.count("token-file") && o.token_file.empty())
            throw std::invalid_argument("--token-file is empty: give a file, or leave the flag out to run without tokens");
        o.sync = app::parse_sync(sync);
        if (!(o.fault_rate >= 0 && o.fault_rate <= 1)) throw std::invalid_argument("--fault-rate must be between 0 and 1");
        if (!(o.drop_rate >= 0 && o.drop_rate <= 1)) throw std::invalid_argument("--drop-rate must be between 0 and 1");
        if (o.fault_status < 400 || o.fault_status > 599) throw std::invalid_argument("--fault-status must be a 4xx or 5xx status");
        if (o.max_body < 1024) throw std::invalid_argument("--max-body must be at least 1024");
        if (o.max_epoch_step == 0) throw std::invalid_argument("--max-epoch-step must be at least 1");
        app::listener_from(vm, o.listener);
        o.min_free = app::min_free_space_from(vm, o.max_body);
        o.delay = app::duration_option(vm, "delay", std::chrono::milliseconds(0), std::chrono::hours(1));
        o.data = app::non_empty(vm, "data");
        if (vm.count("source")) {
            (void)jetstream::parse_servers(o.source.servers);
            if (o.source.consumer.empty()) throw std::invalid_argument("--source needs --consumer NAME (one durable consumer per secondary)");
            auto token_ok = [](const std::string& v) {
                return !v.empty() && v.size() <= 64 &&
                       v.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == std::string::npos;
            };
            if (!token_ok(o.source.consumer)) throw std::invalid_argument("--consumer must be 1 to 64 characters of A-Z a-z 0-9 _ -");
            if (!token_ok(o.source.stream)) throw std::invalid_argument("--js-stream must be 1 to 64 characters of A-Z a-z 0-9 _ -");
            if (o.source.batch == 0 || o.source.batch > 10'000) throw std::invalid_argument("--js-batch must be 1 to 10000");
        } else {
            if (vm.count("consumer") || !vm["js-stream"].defaulted() || !vm["js-batch"].defaulted())
                throw std::invalid_argument("--consumer, --js-stream and --js-batch are for --source nats://...");
            if (!vm.count("listen")) throw std::invalid_argument("--listen is required (or --source nats://... to consume from JetStream)");
        }
        if (vm.count("listen")) o.listen = app::non_empty(vm, "listen");
        if (!o.listen.empty()) (void)http::parse_listen_address(o.listen);
        o.tls = app::tls_server_from(vm);
        o.log_level = app::parse_level(vm["log-level"].as<std::string>());
        return serve(o);
    } catch (const po::error& e) {
        app::report_fatal("secondary", "usage_error", std::string(e.what()) + " (see --help)");
        return 2;
    } catch (const std::invalid_argument& e) {
        app::report_fatal("secondary", "usage_error", e.what());
        return 2;
    } catch (const app::config_error& e) {
        app::report_fatal("secondary", "listen_failed", e.what());
        return 2;
    } catch (const std::exception& e) {
        app::report_fatal("secondary", "fatal", e.what());
        return 1;
    }
}
