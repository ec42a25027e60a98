// steadfast-primary's node: wiring, start and stop. The flags are read in
// flags.cpp, the offline commands run in commands.cpp, main() is main.cpp.
#include "node.hpp"

#include "../common/options.hpp"
#include "../common/token_reload.hpp"

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

std::int64_t now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

node::node(const options& o, app::database& db)
    : o_(o),
      delivery_{o.batch_max, std::min(o.batch_bytes, envelope::limits{}.max_body_bytes), o.epoch},
      db_(db),
      out_(db),
      worker_(db),
      ladder_(o.ladder.empty() ? backoff::rocketmq() : backoff::schedule(o.ladder)),

      shutdown_(make_shutdown_requested(ioc_.get_executor(), {SIGINT, SIGTERM})),
      demoted_(make_demoted(ioc_.get_executor(), o.epoch)),
      stop_(cond(shutdown_) || cond(demoted_)),
      storage_(ioc_.get_executor(), {o.data, o.min_free},
               [this](bool ok, const std::string& why) { storage_changed(ok, why); }) {
    m_.storage_ok.Set(1);
    tokens_ = o.tokens;
    // The one place that knows which link --secondary names.
    link_ = make_link(link_env{o, ioc_.get_executor(), out_, worker_, stop_, demoted_, tokens_, m_}, *this);
    delivery_.reads_log = link_->reads_log();
    probe_options po;
    po.interval = 1s;
    po.failing_backoff = backoff::exponential(50ms, 1.5, 200ms);
    po.check_timeout = 1s;
    po.failures_to_offline = 2;
    po.initially_online = link_->initially_online();
    online_ = make_secondary_online(
        ioc_.get_executor(), [this] { return link_->probe(); }, po);
    online_->subscribe(online_sub_, [this](bool v) {
        m_.online.Set(v ? 1 : 0);
        nlohmann::json fields{{"secondary", o_.secondary}};
        if (auto why = link_->offline_error(); !v && !why.empty()) fields["error"] = std::move(why);
        app::log(v ? level::info : level::warn, v ? "secondary_online" : "secondary_offline", std::move(fields));
        if (v) link_->came_online();
    });
    // As the probe stands (a JetStream link is offline until its first check).
    m_.online.Set(online_->value() ? 1 : 0);
}

node::~node() {
    link_->close();
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
    m_.depth.Set(static_cast<double>(pending_total_));
    app::register_build_info(*m_.registry, "steadfast-primary");
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
            app::log(
                level::error, "demoted",
                {{"epoch", o_.epoch}, {"newer_epoch", demoted_->newest_seen()}, {"reason", link_->demoted_reason()}});
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

}  // namespace steadfast::primary
