// steadfast-primary's node: wiring, start and stop. The flags are read in
// flags.cpp, the offline commands run in commands.cpp, main() is main.cpp.
#include "node.hpp"

#include "../common/options.hpp"
#include "../common/token_reload.hpp"
#include <common/thread_name.hpp>
#include <common/token.hpp>

#include <steadfast/replication/envelope.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <csignal>
#include <thread>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steadfast::app::level;

namespace steadfast::primary {

node::node(const options& o, app::database& db)
    : o_(o),
      c_(o, ioc_.get_executor(), db,
         {.progress = [this] { check_drained(); }, .demoted = [this] { stop("demoted", exit_demoted); }}),
      shutdown_(make_shutdown_requested(ioc_.get_executor(), {SIGINT, SIGTERM})),
      health_(ioc_.get_executor(), o.data, o.min_free_bytes, c_.m,
              {"answered 503, nothing stored", "publishes are answered 507 and /ready 503 until space is freed"}) {}

node::~node() {
    // Queued database jobs refer to the streams: they finish first. Then the
    // suspended processors and sends are destroyed, while what they refer to
    // (the pool, the streams, the conditions) still exists.
    c_.close();
    ioc_.shutdown();
}

int node::run() {
    c_.rep.start();
    app::register_build_info(*c_.m.registry, "steadfast-primary");
    // The listener first: an address in use is a configuration error (exit
    // 2), found before anything starts.
    std::optional<http::server> server;
    if (!o_.listen.empty()) {
        auto [host, port] = http::parse_listen_address(o_.listen);
        http::server::options so = o_.listener;
        so.tls = o_.listen_tls;
        // Beyond the cap only a publisher with a token may push an idle
        // client out (tokens reloaded in place, read on this executor).
        so.may_take_place = [this](std::string_view auth) {
            return c_.tokens.empty() || app::bearer_matches(auth, c_.tokens);
        };
        app::refuse_unauthorized_at_header(so, [this]() -> const std::vector<std::string>& { return c_.tokens; });
        app::report_accept_failures(so);
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
    health_.start();
    // Ready once the event loop runs (the first handler it runs), until shutdown.
    asio::post(ioc_, [this] { ready_ = true; });
    nlohmann::json started{
        {"data", c_.db.path()}, {"pending", c_.rep.streams().pending()}, {"secondary", o_.secondary},
        {"epoch", o_.epoch},    {"streams", c_.rep.streams().size()},    {"dead_letter", c_.out.dead_letter_count()}};
    if (!o_.jetstream()) {  // the HTTP link's own settings (JetStream has neither)
        started["connections"] = o_.connections;
        started["linger_ms"] = o_.linger.count();
    }
    app::log(level::info, "started", std::move(started));
    input_closed_ = !o_.from_stdin;

    watchable::subscription shutdown_sub;
    shutdown_->subscribe(shutdown_sub, [this](bool v) {
        if (v && shutdown_->signal_number()) stop("signal " + std::to_string(shutdown_->signal_number()));
    });
    app::token_reloader reload(ioc_.get_executor(), o_.token_file, c_.tokens, [this] { c_.rep.retry_now("SIGHUP"); });

    std::thread reader;
    if (o_.from_stdin)
        reader = std::thread([this] {
            app::name_this_thread("sf-stdin");
            read_stdin();
        });
    check_drained();
    ioc_.run();
    shutdown_->release_signals();  // a second SIGINT or SIGTERM now ends the process at once
    if (reader.joinable()) {
        stdin_stop_ = true;  // it notices within 100 ms
        reader.join();
    }
    std::uint64_t pending = c_.rep.streams().pending();
    if (o_.from_stdin) {
        // The reader's last groups may have been committed after the event
        // loop stopped: their completions never ran, and the streams' table
        // misses them. Once the database thread has finished its jobs (the
        // last acknowledgement marks too), the outbox has the count `status`
        // gives.
        c_.close();
        try {
            std::uint64_t stored = 0;
            for (const auto& [name, s] : c_.out.status()) stored += s.pending;
            pending = stored;
        } catch (const std::exception& e) {
            app::log(level::warn, "pending_unknown",
                     {{"error", e.what()}, {"note", "the count below is the last known"}});
        }
    }
    app::log(level::info, "stopped", {{"pending", pending}, {"exit_code", exit_code_}});
    return exit_code_;
}

void node::stop(const std::string& why, int code) {
    if (code != exit_ok && exit_code_ == exit_ok) exit_code_ = code;
    if (stopping_) return;
    stopping_ = true;
    app::log(code == exit_ok ? level::info : level::error, "shutting_down",
             {{"reason", why}, {"pending", c_.rep.streams().pending()}});
    shutdown_->request();
    c_.rep.stop();  // the processors' sends and waits end
    health_.stop();
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
    if (o_.exit_when_drained && input_closed_ && c_.rep.streams().pending() <= c_.rep.streams().blocked_pending() &&
        publishing_ == 0 && !stopping_) {
        if (c_.rep.streams().blocked_count() > 0) {
            app::log(level::error, "drained_except_blocked",
                     {{"blocked", c_.rep.streams().blocked_count()}, {"pending", c_.rep.streams().pending()}});
            stop("drained except blocked streams", exit_error);
            return;
        }
        app::log(level::info, "drained");
        stop("drained");
    }
}

}  // namespace steadfast::primary
