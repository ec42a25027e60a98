// steadfast-primary: accepts messages durably (outbox), replicates them to the
// secondary in order per stream, many streams at once, retried through the
// engine, gated by the secondary's health, stopped by shutdown or demotion;
// quick retries first, then durable redelivery on a ladder whose last step
// repeats. Contract: docs/contract.md. This file: flags, wiring, start, stop.
#include "../common/options.hpp"
#include "../common/token.hpp"
#include "../common/token_reload.hpp"
#include "node.hpp"

#include <steadfast/transport/envelope.hpp>
#include <steadfast/transport/health.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/program_options.hpp>

#include <csignal>
#include <filesystem>
#include <iostream>
#include <thread>

namespace asio = boost::asio;
namespace po = boost::program_options;
using namespace std::chrono_literals;
using steadfast::app::level;

namespace steadfast::primary {

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

namespace {
// The secondary's address and TLS, for deliveries and the health probe.
http::client::options secondary_options(const options& o) {
    auto c = http::client::from_url(o.secondary);
    if (o.secondary_tls) c.tls = o.secondary_tls;
    return c;
}
http::client::options link_options(const options& o) {
    auto c = secondary_options(o);
    c.read_timeout = o.attempt_timeout;
    c.write_timeout = std::min<std::chrono::nanoseconds>(c.write_timeout, o.attempt_timeout);
    return c;
}
prometheus::Counter& counter(prometheus::Registry& r, const char* name, const char* help) {
    return prometheus::BuildCounter().Name(name).Help(help).Register(r).Add({});
}
prometheus::Gauge& gauge(prometheus::Registry& r, const char* name, const char* help) {
    return prometheus::BuildGauge().Name(name).Help(help).Register(r).Add({});
}
}  // namespace

node::node(const options& o, app::database& db)
    : o_(o),
      delivery_{o.batch_max, std::min(o.batch_bytes, envelope::limits{}.max_body_bytes), o.epoch, o.jetstream()},
      db_(db),
      out_(db),
      worker_(db),
      ladder_(o.ladder.empty() ? backoff::rocketmq() : backoff::schedule(o.ladder)),

      shutdown_(make_shutdown_requested(ioc_.get_executor(), {SIGINT, SIGTERM})),
      demoted_(make_demoted(ioc_.get_executor(), o.epoch)),
      stop_(cond(shutdown_) || cond(demoted_)),
      registry_(std::make_shared<prometheus::Registry>()),
      published_(counter(*registry_, "steadfast_primary_published_total", "Messages accepted into the outbox")),
      delivered_(counter(*registry_, "steadfast_primary_delivered_total", "Messages acknowledged by the secondary")),
      attempts_(counter(*registry_, "steadfast_primary_attempts_total", "Send attempts to the secondary")),
      requests_(counter(*registry_, "steadfast_primary_requests_total",
                        "HTTP requests sent to the secondary, each carrying one or more streams' batches")),
      outbox_reads_(counter(*registry_, "steadfast_primary_outbox_reads_total",
                            "Reads of a stream's pending messages back from the outbox (a message that joined its "
                            "stream's send window when committed is not read back)")),
      retries_(counter(*registry_, "steadfast_primary_retries_total", "Send attempts that were retries")),
      dead_(counter(*registry_, "steadfast_primary_dead_letter_total", "Messages moved to the dead-letter table")),
      rewinds_(counter(*registry_, "steadfast_primary_rewinds_total",
                       "Resends from retention after the secondary lost acknowledged messages")),
      refused_(counter(*registry_, "steadfast_primary_connections_rejected_total",
                       "Connections to /publish closed at once: over --max-connections")),
      redeliveries_(counter(*registry_, "steadfast_primary_redeliveries_total",
                            "Durable redeliveries scheduled (ladder steps) after the quick retries were used up")),
      blocks_(counter(*registry_, "steadfast_primary_blocks_total",
                      "Times a stream was blocked (conflict, beyond retention, ...)")),
      tls_failures_(counter(*registry_, "steadfast_primary_tls_handshake_failures_total",
                            "TLS handshakes on --listen that failed: no or a wrong client certificate, not TLS, ...")),
      link_errors_(prometheus::BuildCounter()
                       .Name("steadfast_primary_link_errors_total")
                       .Help("Failed deliveries that are the link's or the secondary's fault, by reason; messages kept")
                       .Register(*registry_)),
      depth_(gauge(*registry_, "steadfast_primary_outbox_depth", "Messages waiting in the outbox")),
      online_gauge_(
          gauge(*registry_, "steadfast_primary_secondary_online", "1 when the secondary's health probe passes")),
      blocked_gauge_(
          gauge(*registry_, "steadfast_primary_blocked_streams", "Streams stopped for a conflict or beyond retention")),
      streams_gauge_(gauge(*registry_, "steadfast_primary_active_streams", "Streams with messages to deliver")),
      latency_(prometheus::BuildHistogram()
                   .Name("steadfast_primary_delivery_latency_seconds")
                   .Help("From acceptance to acknowledgement")
                   .Register(*registry_)
                   .Add({}, app::delivery_buckets())),
      stream_pending_(prometheus::BuildGauge()
                          .Name("steadfast_primary_stream_pending")
                          .Help("Messages accepted and not yet acknowledged, per stream with any")
                          .Register(*registry_)),
      stream_age_(prometheus::BuildGauge()
                      .Name("steadfast_primary_stream_oldest_pending_age_seconds")
                      .Help("Age of the oldest message not yet acknowledged, per stream with any")
                      .Register(*registry_)),
      oldest_age_(gauge(*registry_, "steadfast_primary_oldest_pending_age_seconds",
                        "Age of the oldest message not yet acknowledged, over all streams (0: none)")),
      js_connected_(gauge(*registry_, "steadfast_primary_jetstream_connected",
                          "1 while connected to a NATS server (a nats:// --secondary)")),
      js_disconnects_(counter(*registry_, "steadfast_primary_jetstream_disconnects_total", "Connections to NATS lost")),
      js_reconnects_(counter(*registry_, "steadfast_primary_jetstream_reconnects_total", "Reconnections to NATS")),
      js_duplicates_(counter(*registry_, "steadfast_primary_jetstream_duplicates_total",
                             "Publishes JetStream had stored already (a retry after a lost acknowledgement)")),
      js_repairs_(counter(*registry_, "steadfast_primary_jetstream_repairs_total",
                          "Holes in the log resent from retention at a secondary's request")),
      db_metrics_(*registry_, "primary"),
      storage_ok_gauge_(
          gauge(*registry_, "steadfast_primary_storage_ok", "1 while the outbox commits and has --min-free-space")),
      free_gauge_(gauge(*registry_, "steadfast_primary_storage_free_bytes",
                        "Free bytes on the data directory's filesystem (as of the last check)")),
      recheck_failures_(counter(*registry_, "steadfast_primary_recheck_failures_total",
                                "Rechecks of a secondary that could not ask it what it holds (tried again in 5 s)")),
      storage_(ioc_.get_executor(), {o.data, o.min_free},
               [this](bool ok, const std::string& why) { storage_changed(ok, why); }) {
    storage_ok_gauge_.Set(1);
    tokens_ = o.tokens;
    if (o.jetstream()) {
        jetstream::options jo;
        jo.servers = jetstream::parse_servers(o.secondary);
        jo.name = "steadfast-primary";
        js_ = std::make_unique<jetstream::client>(ioc_.get_executor(), std::move(jo));
        // A newer primary's epoch fence, as it is written: demoted at once.
        fence_watch_.n = this;
        fence_sub_ = js_->subscribe(o.js_prefix, fence_watch_);
        // A secondary that found a hole in the log asks for it again.
        repair_watch_.n = this;
        repair_sub_ = js_->subscribe(envelope::repair_subject(o.js_stream), repair_watch_, 1000);
    } else {
        link_.emplace(ioc_.get_executor(), link_options(o), o.connections);
        // --batch-max and --batch-bytes bound each request, shared by streams or not.
        combiner::limits cl;
        cl.body_bytes = std::min(o.batch_bytes, envelope::limits{}.max_body_bytes);
        cl.messages = std::min(o.batch_max, envelope::limits{}.max_batch);
        combined_.emplace(
            ioc_.get_executor(), *link_, cl,
            [this](std::string body, std::string key) { return make_request(std::move(body), std::move(key)); }, stop_);
        // Its own timeouts end a check before the probe's 1 s does, so that a
        // secondary that accepts and never answers is reported as a timeout
        // ("read: The socket was closed due to a timeout"), not as a
        // cancelled read.
        auto probing = secondary_options(o);
        probing.connect_timeout = probing.read_timeout = probing.write_timeout = 900ms;
        probe_client_.emplace(ioc_.get_executor(), probing);
        recheck_client_.emplace(ioc_.get_executor(), link_options(o));  // --attempt-timeout bounds a page
    }
    probe_options po;
    po.interval = 1s;
    po.failing_backoff = backoff::exponential(50ms, 1.5, 200ms);
    po.check_timeout = 1s;
    po.failures_to_offline = 2;
    // HTTP: sending is the best check. JetStream: nothing is sent before the
    // stream is known to exist with the replicas asked for.
    po.initially_online = !js_;
    online_ = make_secondary_online(
        ioc_.get_executor(), [this] { return js_ ? probe_jetstream() : probe(); }, po);
    online_->subscribe(online_sub_, [this](bool v) {
        online_gauge_.Set(v ? 1 : 0);
        nlohmann::json fields{{"secondary", o_.secondary}};
        if (!v && !probe_error_.empty()) fields["error"] = probe_error_;
        app::log(v ? level::info : level::warn, v ? "secondary_online" : "secondary_offline", std::move(fields));
        if (v) recheck_streams();
    });
    online_gauge_.Set(1);
}

// One health check of the secondary. A TLS failure is reported at once and
// plainly (a wrong CA or name would otherwise look like a secondary that is
// down), once for each new error.
asio::awaitable<bool> node::probe() {
    const auto r = co_await http::health_check_report(*probe_client_);
    if (r.healthy) {
        probe_error_.clear();
        if (!r.instance.empty() && r.instance != secondary_instance_) {
            // First seen (it may have been restored while this primary was
            // down), or restarted, perhaps on a restored data directory,
            // perhaps too briefly for the probe to see it down.
            if (!secondary_instance_.empty())
                app::log(level::info, "secondary_restarted", {{"secondary", o_.secondary}});
            secondary_instance_ = r.instance;
            recheck_streams();
        }
        co_return true;
    }
    if (r.tls_failure && r.why != probe_error_)
        app::log(level::error, "secondary_tls_failed",
                 {{"secondary", o_.secondary},
                  {"error", r.why},
                  {"hint",
                   "check --tls-ca (the CA that signed the secondary's certificate), --tls-server-name, "
                   "--tls-cert/--tls-key if the secondary asks for a certificate, and that "
                   "the secondary serves HTTPS"}});
    probe_error_ = r.why;
    co_return false;
}

node::~node() {
    fence_sub_.reset();  // before the NATS client they subscribe through
    repair_sub_.reset();
    // Queued database jobs refer to the streams: they finish first. Then the
    // suspended processors and sends are destroyed, while what they refer to
    // (the pool, the streams, the conditions) still exists.
    worker_.stop();
    ioc_.shutdown();
}

int node::run() {
    // A restart tries blocked streams again; each is blocked anew if the
    // reason still holds.
    out_.clear_blocked();
    auto st = out_.status();
    for (auto& [name, s] : st) {
        if (s.pending == 0) continue;
        pending_total_ += s.pending;
        add_stream(name, s.acked_seq, s.acked_seq, s.pending);
    }
    depth_.Set(static_cast<double>(pending_total_));
    app::register_build_info(*registry_, "steadfast-primary");
    // The listener first: an address in use is a configuration error (exit
    // 2), found before anything starts.
    std::optional<http::server> server;
    if (!o_.listen.empty()) {
        auto [host, port] = http::parse_listen_address(o_.listen);
        http::server::options so = o_.listener;
        so.tls = o_.listen_tls;
        server.emplace(ioc_.get_executor(), routes(), so);
        const auto ep = app::listen(*server, host, port);
        server->start();
        app::log(level::info, "listening",
                 {{"address", ep.address().to_string()},
                  {"port", ep.port()},
                  {"tls", o_.listen_tls.has_value()},
                  {"mutual_tls", o_.listen_tls && !o_.listen_tls->client_ca_file.empty()}});
    }
    server_ = server ? &*server : nullptr;
    storage_.start();
    // Ready once the event loop runs (the first handler it runs), until shutdown.
    asio::post(ioc_, [this] { ready_ = true; });
    app::log(level::info, "started",
             {{"data", db_.path()},
              {"pending", pending_total_},
              {"secondary", o_.secondary},
              {"epoch", o_.epoch},
              {"streams", streams_.size()},
              {"connections", o_.connections},
              {"dead_letter", out_.dead_letter_count()}});
    // A stream waiting for a ladder step tries once at once: a restart is how
    // an operator says "the configuration is fixed" (the step is kept).
    for (auto& [name, s] : streams_) start_processor(name, true);
    input_closed_ = !o_.from_stdin;

    watchable::subscription shutdown_sub;
    shutdown_->subscribe(shutdown_sub, [this](bool v) {
        if (v && shutdown_->signal_number()) stop("signal " + std::to_string(shutdown_->signal_number()));
    });
    app::token_reloader reload(ioc_.get_executor(), o_.token_file, tokens_, [this] { retry_now("SIGHUP"); });
    demoted_->subscribe(demoted_sub_, [this](bool v) {
        if (v) {
            app::log(level::error, "demoted",
                     {{"epoch", o_.epoch},
                      {"newer_epoch", demoted_->newest_seen()},
                      {"reason", js_ ? "the JetStream log holds a newer epoch (another primary took over)"
                                     : "the secondary has seen a newer epoch"}});
            stop("demoted", exit_demoted);
        }
    });

    // Acknowledged messages are kept for --retain, then purged.
    asio::steady_timer purge_timer(ioc_);
    const auto purge_every = std::clamp<std::chrono::milliseconds>(o_.retain / 4, 100ms, 10s);
    std::function<void()> arm_purge = [&] {
        purge_timer.expires_after(purge_every);
        purge_timer.async_wait([&](const boost::system::error_code& ec) {
            if (ec || stopping_) return;
            purge_retained();
            arm_purge();
        });
    };
    arm_purge();

    std::thread reader;
    if (o_.from_stdin) reader = std::thread([this] { read_stdin(); });
    check_drained();
    ioc_.run();
    shutdown_->release_signals();  // a second SIGINT or SIGTERM now ends the process at once
    if (reader.joinable()) {
        stdin_stop_ = true;  // it notices within 100 ms
        reader.join();
    }
    app::log(level::info, "stopped", {{"pending", pending_total_}, {"exit_code", exit_code_}});
    return exit_code_;
}

void node::stop(const std::string& why, int code) {
    if (code != exit_ok && exit_code_ == exit_ok) exit_code_ = code;
    if (stopping_) return;
    stopping_ = true;
    app::log(code == exit_ok ? level::info : level::error, "shutting_down",
             {{"reason", why}, {"pending", pending_total_}});
    shutdown_->request();  // stop_: the processors' sends and waits end
    online_->stop();
    storage_.stop();
    for (auto& [name, t] : trims_)
        if (t->target.load() > 0) trim(name, t);  // the db thread finishes it before exit
    asio::co_spawn(
        ioc_,
        [this]() -> asio::awaitable<void> {
            if (server_) co_await server_->shutdown();
            // Processors end at once (stop-when); give them a moment to leave.
            asio::steady_timer t(ioc_, 50ms);
            co_await t.async_wait(asio::use_awaitable);
            ioc_.stop();
        },
        asio::detached);
}

void node::check_drained() {
    std::uint64_t blocked_pending = 0;
    for (auto& [s, b] : blocked_) blocked_pending += b.pending;
    if (o_.exit_when_drained && input_closed_ && pending_total_ <= blocked_pending && publishing_ == 0 && !stopping_) {
        if (!blocked_.empty()) {
            app::log(level::error, "drained_except_blocked",
                     {{"blocked", blocked_.size()}, {"pending", pending_total_}});
            stop("drained except blocked streams", exit_error);
            return;
        }
        app::log(level::info, "drained");
        stop("drained");
    }
}

namespace {

int status(const std::string& dir) {
    app::database db(dir, "primary.db", "steadfast-primary", app::sync_mode::off, app::open_mode::read_only);
    outbox out(db);
    auto st = out.status();
    nlohmann::json j = {
        {"pending", 0}, {"acked_seq", nlohmann::json::object()}, {"next_seq", nlohmann::json::object()}};
    std::uint64_t pending = 0;
    for (auto& [s, v] : st) {
        pending += v.pending;
        j["acked_seq"][s] = v.acked_seq;
        j["next_seq"][s] = v.next_seq;
    }
    j["pending"] = pending;
    j["dead_letter"] = out.dead_letter_count();
    j["blocked"] = out.blocked();
    db.check_unchanged();
    std::cout << j.dump() << "\n";
    return 0;
}

int dead_letters(const std::string& dir) {
    app::database db(dir, "primary.db", "steadfast-primary", app::sync_mode::off, app::open_mode::read_only);
    outbox out(db);
    const auto rows = out.dead_letters();
    db.check_unchanged();
    for (const auto& d : rows) std::cout << to_json(d) << "\n";
    return 0;
}

// `dead-letters --requeue N`: needs the data directory (the primary stopped);
// a running primary does the same on POST /dead-letters/requeue?n=N.
int requeue_dead_letter(const std::string& dir, std::int64_t n) {
    // Never a fresh database in a mistyped directory.
    std::error_code ec;
    if (!std::filesystem::exists(std::filesystem::path(dir) / "primary.db", ec))
        throw app::db_error("no database at \"" + (std::filesystem::path(dir) / "primary.db").string() + "\"");
    std::optional<app::database> db;
    try {
        db.emplace(dir, "primary.db", "steadfast-primary", app::sync_mode::full);
    } catch (const app::db_error& e) {
        throw app::db_error(std::string(e.what()) +
                            "; a running primary requeues with POST /dead-letters/requeue?n=N on its --listen");
    }
    outbox out(*db);
    db->exec("BEGIN IMMEDIATE");
    requeue_result r;
    try {
        r = out.requeue(n, now_ms());
        db->exec("COMMIT");
    } catch (...) {
        db->exec("ROLLBACK");
        throw;
    }
    switch (r.what) {
        case requeue_result::status::requeued:
            std::cout << envelope::encode_requeued(n, r.p.id, r.p.stream, r.p.seq) << "\n";
            return exit_ok;
        case requeue_result::status::not_found:
            app::report_fatal("primary", "requeue_refused", "no dead letter " + std::to_string(n));
            return exit_error;
        case requeue_result::status::already:
            app::report_fatal("primary", "requeue_refused",
                              "dead letter " + std::to_string(n) + " was requeued already, as seq " +
                                  std::to_string(r.p.seq) + " of stream " + r.p.stream);
            return exit_error;
    }
    return exit_error;
}

constexpr const char* exit_codes_help =
    "exit codes: 0 stopped or drained; 1 runtime error (storage failed, data directory in use,\n"
    "            streams left blocked with --exit-when-drained); 2 bad flags or\n"
    "            configuration (the listen address in use); 3 demoted\n"
    "            (a secondary has seen a newer --epoch: another primary took over)\n";

// `steadfast-primary status|dead-letters --data DIR`: read-only, beside a running server.
int read_only_command(int argc, char** argv, const std::string& name, int (*fn)(const std::string&)) {
    std::string data;
    po::options_description d("steadfast-primary " + name);
    d.add_options()("data", po::value(&data)->required(), "data directory")("help", "this help");
    po::variables_map vm;
    po::store(app::parse_command_line(argc - 1, argv + 1, d), vm);
    if (vm.count("help")) {
        std::cout << "usage: steadfast-primary " << name << " --data DIR\n" << d;
        return 0;
    }
    po::notify(vm);
    return fn(data);
}

}  // namespace
}  // namespace steadfast::primary

int main(int argc, char** argv) {
    using namespace steadfast;
    using namespace steadfast::primary;
    // A file-size limit (ulimit -f) must fail a write with EFBIG, which the
    // outbox reports, instead of killing the process.
    std::signal(SIGXFSZ, SIG_IGN);
    // SIGHUP reloads the token file while running; before and after that it
    // must not end the process either.
    std::signal(SIGHUP, SIG_IGN);
    try {
        if (argc >= 2 && argv[1][0] != '-' && std::string_view(argv[1]) != "status" &&
            std::string_view(argv[1]) != "dead-letters")
            throw po::error(std::string("unknown command \"") + argv[1] +
                            "\" (commands: status, dead-letters; or flags to run)");
        if (argc >= 2 && std::string_view(argv[1]) == "status") return read_only_command(argc, argv, "status", status);
        if (argc >= 2 && std::string_view(argv[1]) == "dead-letters") {
            std::string data;
            std::int64_t requeue = 0;
            po::options_description d("steadfast-primary dead-letters");
            d.add_options()("data", po::value(&data)->required(), "data directory")(
                "requeue", po::value(&requeue),
                "publish dead letter N again at the end of its stream (the primary stopped)")("help", "this help");
            po::variables_map vm;
            po::store(app::parse_command_line(argc - 1, argv + 1, d), vm);
            if (vm.count("help")) {
                std::cout << "usage: steadfast-primary dead-letters --data DIR [--requeue N]\n"
                             "  lists dead letters, one JSON line each; --requeue N publishes N's payload again as a\n"
                             "  new message at the end of its stream (once). A running primary does the same on\n"
                             "  GET /dead-letters and POST /dead-letters/requeue?n=N.\n"
                          << d;
                return 0;
            }
            po::notify(vm);
            if (vm.count("requeue")) {
                if (requeue <= 0) throw std::invalid_argument("--requeue takes a dead letter's n (1 or more)");
                return requeue_dead_letter(data, requeue);
            }
            return dead_letters(data);
        }
        options o;
        std::string sync, retain = "1h";
        po::options_description d("steadfast-primary: replicates messages to a secondary, durably and in order");
        d.add_options()("secondary", po::value(&o.secondary)->required(), "the secondary, e.g. http://127.0.0.1:9001")(
            "data", po::value(&o.data)->required(), "data directory (created if missing; one process per directory)")(
            "listen", po::value(&o.listen), "HOST:PORT for /publish, /health, /metrics")(
            "token-file", po::value(&o.token_file),
            "bearer tokens, one a line: the first is sent to the secondary, any is accepted on /publish; SIGHUP "
            "reloads it")("stream", po::value(&o.stream)->default_value("default"),
                          "stream for --stdin and /publish without ?stream=")(
            "stdin", po::bool_switch(&o.from_stdin), "publish each line of standard input (one JSON value a line)")(
            "exit-when-drained", po::bool_switch(&o.exit_when_drained),
            "exit 0 once input is closed and everything is acknowledged")(
            "sync", po::value(&sync)->default_value("full"), "full: fsync before acknowledging; off: for benchmarks")(
            "epoch", po::value(&o.epoch)->default_value(0),
            "this primary's term; a secondary that saw a newer one fences it")(
            "connections", po::value(&o.connections)->default_value(8),
            "keep-alive connections to the secondary (streams deliver concurrently over them)")(
            "batch-max", po::value(&o.batch_max)->default_value(4000),
            "messages per request at most (and --batch-bytes)")(
            "batch-bytes", po::value(&o.batch_bytes)->default_value(512 * 1024),
            "request body bytes at most (a bigger message goes alone)")(
            "quick-retries", po::value(&o.quick_retries)->default_value(5),
            "attempts before durable redelivery takes over")("max-backoff",
                                                             po::value<std::string>()->default_value("30s"),
                                                             "cap of the quick retries' backoff, e.g. 30s")(
            "attempt-timeout", po::value<std::string>()->default_value("10s"),
            "per-attempt timeout (the HTTP read timeout), e.g. 10s")(
            "max-backoff-ms", po::value<std::string>(),
            "the same as --max-backoff, in milliseconds (kept for old scripts)")(
            "attempt-timeout-ms", po::value<std::string>(),
            "the same as --attempt-timeout, in milliseconds (kept for old scripts)")(
            "ladder", po::value(&o.ladder),
            "durable redelivery ladder: steps of at least 100ms (whole numbers with a unit: 500ms, 10s, 1m, 2h) "
            "separated by spaces or commas, e.g. \"10s 30s 1m\" (default: RocketMQ's 16 steps); the last step repeats")(
            "retain", po::value(&retain)->default_value("1h"),
            "keep acknowledged messages this long, to resend to a secondary restored from an older copy")(
            "max-streams", po::value(&o.max_streams)->default_value(10'000),
            "streams with pending messages at most; /publish to another one gets 429");
        app::add_listener_options(d);
        app::add_storage_options(d);
        po::options_description jsd("JetStream (a nats://HOST:PORT[,nats://HOST:PORT...] --secondary)");
        jsd.add_options()("js-stream", po::value(&o.js_stream)->default_value("steadfast"),
                          "the JetStream stream (created if missing)")(
            "js-replicas", po::value(&o.js_replicas)->default_value(1),
            "the stream's replicas when it is created (1 to 5; 3 for a 3-node cluster)")(
            "js-prefix", po::value(&o.js_prefix),
            "subject prefix: stream S goes to PREFIX.S (default: the --js-stream name)");
        d.add(jsd);
        po::options_description tls("TLS (an https:// --secondary; HTTPS on --listen with --tls-listen)");
        app::add_tls_primary_options(tls);
        d.add(tls);
        app::add_common_options(d);
        po::variables_map vm;
        app::read_options(argc, argv, d, vm,
                          {{"max-backoff-ms", "max-backoff"}, {"attempt-timeout-ms", "attempt-timeout"}});
        if (vm.count("version")) {
            std::cout << "steadfast-primary " << steadfast::version << "\n";
            return 0;
        }
        if (vm.count("help")) {
            std::cout << "usage: steadfast-primary --secondary URL --data DIR [options]\n"
                         "       steadfast-primary status --data DIR        (one JSON line)\n"
                         "       steadfast-primary dead-letters --data DIR  (one JSON line each)\n\n"
                      << d << "\n"
                      << exit_codes_help;
            return 0;
        }
        po::notify(vm);
        if (vm.count("token-file") && o.token_file.empty())
            throw std::invalid_argument(
                "--token-file is empty: give a file, or leave the flag out to run without tokens");
        o.sync = app::parse_sync(sync);
        if (o.batch_max == 0 || o.batch_max > steadfast::envelope::limits{}.max_batch)
            throw std::invalid_argument("--batch-max must be 1 to " +
                                        std::to_string(steadfast::envelope::limits{}.max_batch) +
                                        " (a secondary takes at most that many messages a request)");
        if (o.batch_bytes < 1024) throw std::invalid_argument("--batch-bytes must be at least 1024");
        if (o.quick_retries == 0) throw std::invalid_argument("--quick-retries must be at least 1");
        if (o.connections == 0 || o.connections > 1024) throw std::invalid_argument("--connections must be 1 to 1024");
        if (o.max_streams == 0) throw std::invalid_argument("--max-streams must be at least 1");
        o.max_backoff = app::duration_option(vm, "max-backoff", std::chrono::milliseconds(100), std::chrono::hours(24));
        o.attempt_timeout =
            app::duration_option(vm, "attempt-timeout", std::chrono::milliseconds(10), std::chrono::hours(1));
        o.data = app::non_empty(vm, "data");
        o.secondary = app::non_empty(vm, "secondary");
        app::listener_from(vm, o.listener);
        // The largest message a publish may carry (the request body's limit).
        o.min_free = app::min_free_space_from(vm, envelope::limits{}.max_body_bytes);
        if (vm.count("listen")) o.listen = app::non_empty(vm, "listen");
        const auto log_level = app::parse_level(vm["log-level"].as<std::string>());
        try {
            o.retain = std::chrono::duration_cast<std::chrono::milliseconds>(parse_duration(retain));
        } catch (const std::exception& e) {
            throw std::invalid_argument(std::string("--retain: ") + e.what());
        }
        if (vm.count("ladder")) {
            // Refuses an empty or unparsable ladder with its message, and steps
            // too short for the slow, durable retry (a 0s step is a busy loop
            // writing a log line an attempt).
            backoff ladder;
            try {
                // An empty step between commas is a typo, not a separator.
                if (o.ladder.find_first_not_of(" \t,") != std::string::npos) {
                    std::string t = o.ladder;
                    t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == ' ' || c == '\t'; }), t.end());
                    if (t.front() == ',' || t.back() == ',' || t.find(",,") != std::string::npos)
                        throw std::invalid_argument("an empty step between commas in \"" + o.ladder + "\"");
                }
                ladder = backoff::schedule(o.ladder);
            } catch (const std::exception& e) {
                throw std::invalid_argument(std::string("--ladder: ") + e.what());
            }
            for (std::uint32_t i = 1; i <= ladder.steps(); ++i)
                if (ladder.base_delay(i, {}) < std::chrono::milliseconds(100))
                    throw std::invalid_argument("--ladder: step " + std::to_string(i) +
                                                " is shorter than 100ms; "
                                                "the ladder is the slow retry after the quick ones");
        }
        if (!envelope::valid_stream_name(o.stream))
            throw std::invalid_argument("--stream must be 1 to 128 characters of A-Z a-z 0-9 . _ -");
        if (o.jetstream()) {
            (void)jetstream::parse_servers(o.secondary);
            auto token_ok = [](const std::string& v) {
                return !v.empty() && v.size() <= 64 &&
                       v.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") ==
                           std::string::npos;
            };
            if (!token_ok(o.js_stream))
                throw std::invalid_argument("--js-stream must be 1 to 64 characters of A-Z a-z 0-9 _ -");
            if (o.js_prefix.empty()) o.js_prefix = o.js_stream;
            if (!token_ok(o.js_prefix))
                throw std::invalid_argument("--js-prefix must be 1 to 64 characters of A-Z a-z 0-9 _ -");
            if (o.js_replicas < 1 || o.js_replicas > 5) throw std::invalid_argument("--js-replicas must be 1 to 5");
            if (!valid_subject_tokens(o.stream))
                throw std::invalid_argument(
                    "--stream must not begin or end with a dot or hold two in a row over JetStream");
        } else {
            if (!vm["js-stream"].defaulted() || vm.count("js-prefix") || !vm["js-replicas"].defaulted())
                throw std::invalid_argument("--js-stream, --js-replicas and --js-prefix are for a nats:// --secondary");
            (void)http::client::from_url(o.secondary);
        }
        o.secondary_tls = app::tls_client_from(vm, o.secondary);  // refuses TLS flags for a nats:// one
        if (vm["tls-listen"].as<bool>()) {
            o.listen_tls = app::tls_server_from(vm);
            if (!o.listen_tls) throw std::invalid_argument("--tls-listen serves --tls-cert/--tls-key: give them");
            if (o.listen.empty())
                throw std::invalid_argument("--tls-listen serves HTTPS on --listen: give --listen too");
        } else {
            if (vm.count("tls-client-ca"))
                throw std::invalid_argument("--tls-client-ca on the primary is for --tls-listen");
            if ((vm.count("tls-cert") || vm.count("tls-key")) && !o.secondary_tls)
                throw std::invalid_argument(
                    "--tls-cert/--tls-key are the primary's certificate for an https:// --secondary "
                    "or for --tls-listen; neither is set");
        }
        if (!o.listen.empty()) (void)http::parse_listen_address(o.listen);
        app::init_log("primary", log_level);
        if (o.listen_tls)
            app::warn_invalid_certificate(o.listen_tls->cert_file, "--tls-cert (served on --listen)");
        else if (o.secondary_tls)
            app::warn_invalid_certificate(o.secondary_tls->cert_file, "--tls-cert (shown to the secondary)");
        if (!o.from_stdin && o.listen.empty() && !o.exit_when_drained)
            app::log(level::warn, "no_input",
                     {{"hint", "without --stdin or --listen only the existing outbox is delivered"}});
        // A bad token file is refused before the data directory is touched.
        if (!o.token_file.empty()) o.tokens = app::read_token_file(o.token_file);
        app::database db(o.data, "primary.db", "steadfast-primary", o.sync);
        node n(o, db);
        return n.run();
    } catch (const po::error& e) {
        app::report_fatal("primary", "usage_error", std::string(e.what()) + " (see --help)");
        return exit_usage;
    } catch (const std::invalid_argument& e) {
        app::report_fatal("primary", "usage_error", e.what());
        return exit_usage;
    } catch (const app::config_error& e) {
        app::report_fatal("primary", "listen_failed", e.what());
        return exit_usage;
    } catch (const std::exception& e) {
        app::report_fatal("primary", "fatal", e.what());
        return exit_error;
    }
}
