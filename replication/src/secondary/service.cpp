#include "service.hpp"

#include <common/listen.hpp>
#include <common/nats_problem.hpp>
#include <common/random_id.hpp>
#include <common/readiness.hpp>
#include <common/token.hpp>
#include <secondary/messages.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace asio = boost::asio;

namespace steadfast::secondary {

using app::level;

service::service(const service_options& o, asio::any_io_executor ex, std::vector<std::string> tokens,
                 store::apply_handler apply, service_hooks hooks)
    : o_(o),
      ex_(std::move(ex)),
      hooks_(std::move(hooks)),
      tokens_(std::move(tokens)),
      db_(o.data, "secondary.db", "steadfast-secondary", o.sync),
      st_(db_),
      worker_(db_),
      health_(ex_, {o.data, o.min_free}, [this](bool ok, const std::string& why) { storage_changed(ok, why); }),
      instance_(app::random_hex(16)) {
    if (!o.schema.empty()) db_.exec_schema(o.schema, secondary::own_tables, "secondary_config::schema");
    // JetStream's log is written by a primary only: no step there.
    if (o.source.servers.empty()) st_.set_max_epoch_step(o.max_epoch_step);
    st_.set_apply_handler(std::move(apply), o.apply_attempts);
}

service::~service() = default;

// Logged once a transition: a full disk refuses writes before they fail.
void service::storage_changed(bool ok, const std::string& why) {
    nlohmann::json f = ok ? nlohmann::json::object() : health_.failure_fields(why);
    app::log(ok ? level::info : level::error, ok ? "storage_recovered" : app::storage_health::storage_failed,
             std::move(f));
    m_.storage_ok.Set(ok ? 1 : 0);
}

// While the store is failing, /health and /ready try a write of the largest
// message's size: the store may work again (space freed, a limit lifted).
// Returns the error, if any.
asio::awaitable<std::string> service::recheck_storage() {
    return app::recheck_storage(health_, worker_, ex_, o_.max_body);
}

http::router service::routes() {
    http::router routes;
    // Readiness (readiness.hpp): the write tried after a failed commit is
    // the largest body this secondary takes.
    routes.add("GET", "/ready", [this](http::request&) -> asio::awaitable<http::response> {
        // NATS refusing this secondary is a configuration to fix: not ready.
        if (auto p = source_ ? source_->nats_problem() : std::string{}; !p.empty() && !draining_)
            return app::not_ready(app::describe_nats_problem(p).status, p);
        if (source_ && !source_->consumer_in_use_by().empty() && !draining_)
            return app::not_ready("consumer_in_use", "--consumer is in use by " + source_->consumer_in_use_by());
        return app::readiness(draining_ ? "draining" : nullptr, health_, worker_, ex_, o_.max_body);
    });
    routes.add("GET", "/health", [this](http::request&) -> asio::awaitable<http::response> {
        if (auto e = co_await recheck_storage(); !e.empty())
            co_return http::response::json(503, "{\"status\":\"" + std::string(app::storage_health::storage_failed) +
                                                    "\",\"error\":\"" + http::json_escape(e) + "\"}");
        if (source_) {
            // The JetStream link: 503 while no NATS server is reachable (or
            // they refuse this secondary), the consumer is not there, or a
            // stream is blocked.
            const std::string refused = source_->nats_problem();
            const char* status = !refused.empty()                         ? app::describe_nats_problem(refused).status
                                 : !source_->consumer_in_use_by().empty() ? "consumer_in_use"
                                 : !source_->connected()                  ? "jetstream_disconnected"
                                 : !source_->consuming()                  ? "not_consuming"
                                 : !source_->blocked().empty()            ? "streams_blocked"
                                                                          : "ok";
            nlohmann::json j{{"status", status}, {"jetstream", source_->health()}};
            co_return http::response::json(std::string_view(status) == "ok" ? 200 : 503, j.dump());
        }
        auto ok = http::response::json(200, "{\"status\":\"ok\"}");
        ok.set("X-Steadfast-Instance", instance_);  // a primary learns from a new value that this process restarted
        co_return ok;
    });
    routes.add("GET", "/metrics", [this](http::request&) -> asio::awaitable<http::response> {
        m_.db.sync(worker_.get_stats());
        health_.check_disk();
        m_.free_bytes.Set(static_cast<double>(health_.available()));
        if (server_) {
            const auto s = server_->get_stats();
            app::sync_counter(m_.refused, s.connections_rejected);
            app::sync_counter(m_.tls_failures, s.tls_handshake_failures);
            app::sync_counter(m_.accept_failures, s.accept_failures);
            app::sync_counter(m_.accepted, s.connections_accepted);
        }
        if (source_) {
            m_.js_connected.Set(source_->connected() ? 1 : 0);
            m_.nats_refused.Set(source_->nats_problem().empty() ? 0 : 1);
            m_.js_lag.Set(static_cast<double>(source_->lag()));
            m_.js_blocked.Set(static_cast<double>(source_->blocked().size()));
            app::sync_counter(m_.js_deliveries, source_->deliveries());
            app::sync_counter(m_.js_redeliveries, source_->redeliveries());
            app::sync_counter(m_.js_repairs, source_->repair_requests());
            app::sync_counter(m_.js_stalls, source_->stalls());
            app::sync_counter(m_.js_unanswered, source_->pulls_unanswered());
        }
        using positions_t = std::pair<std::uint64_t, std::vector<std::pair<std::string, std::uint64_t>>>;
        auto read = [this](app::database&, bool&) { return positions_t{st_.fence(), st_.last_applied()}; };
        auto positions = co_await worker_.run<positions_t>(ex_, std::move(read));
        if (positions.has_value()) {
            const auto* p = &*positions;
            m_.epoch.Set(static_cast<double>(p->first));
            for (const auto& [stream, seq] : p->second)
                m_.last_seq.Add({{"stream", stream}}).Set(static_cast<double>(seq));
        }
        co_return app::metrics_response(*m_.registry);
    });
    // With --source, JetStream is the only way in: no POST /api/messages.
    if (o_.source.servers.empty()) {
        const message_routes mr{ex_, worker_, st_, health_, m_, tokens_, o_.max_body};
        auto messages = mr.messages();
        if (hooks_.wrap_messages) messages = hooks_.wrap_messages(std::move(messages));
        routes.add("POST", "/api/messages", std::move(messages));
        // What this secondary holds, a page at a time: a primary that
        // reconnects resends only to the streams it finds behind.
        routes.add("GET", "/api/streams", mr.streams());
    }
    return routes;
}

void service::start_listener(http::router r) {
    http::server::options so = o_.listener;
    so.max_body_bytes = o_.max_body;
    // Beyond the cap only the primary (its token) may push an idle client out.
    so.may_take_place = [this](std::string_view auth) { return tokens_.empty() || app::bearer_matches(auth, tokens_); };
    so.tls = o_.tls;
    app::refuse_unauthorized_at_header(
        so, [this]() -> const std::vector<std::string>& { return tokens_; }, [this] { m_.reject("unauthorized"); });
    app::report_accept_failures(so);
    const auto [host, port] = http::parse_listen_address(o_.listen);
    server_.emplace(ex_, std::move(r), so);
    const auto ep = app::listen(*server_, host, port);
    endpoint_ = ep;
    server_->start();
    ++running_;
    app::log(level::info, "listening",
             {{"address", ep.address().to_string()},
              {"port", ep.port()},
              {"data", db_.path()},
              {"sync", o_.sync == app::sync_mode::full ? "full" : "off"},
              {"auth", !tokens_.empty()},
              {"tls", o_.tls.has_value()},
              {"mutual_tls", o_.tls && !o_.tls->client_ca_file.empty()}});
}

void service::start_source() {
    source_hooks hooks;
    hooks.counted = [this](const store::answer& a) { m_.counted(a); };
    hooks.storage = [this](const std::string& err) {
        if (err.empty()) {
            health_.commit_ok();
        } else {
            health_.commit_failed(err);
        }
    };
    hooks.rejected = [this](const std::string& r) { m_.reject(r); };
    source_ = std::make_unique<js_source>(ex_, worker_, st_, o_.source, std::move(hooks));
    ++running_;
    app::log(level::info, "source",
             {{"servers", o_.source.servers},
              {"stream", o_.source.stream},
              {"consumer", o_.source.consumer},
              {"data", db_.path()},
              {"sync", o_.sync == app::sync_mode::full ? "full" : "off"}});
    asio::co_spawn(ex_, source_->run(), [this](std::exception_ptr e) {
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                app::log(level::error, "source_failed", {{"error", ex.what()}});
            } catch (...) {  // an embedding program's handler threw something else
                app::log(level::error, "source_failed", {{"error", "not a std::exception"}});
            }
        }
        ended();
    });
}

void service::ended() {
    if (--running_ == 0 && hooks_.ended) hooks_.ended();
}

void service::stop() {
    if (draining_) return;
    draining_ = true;
    health_.stop();
    if (source_) source_->stop();
    if (server_) asio::co_spawn(ex_, server_->shutdown(), [this](std::exception_ptr) { ended(); });
    if (running_ == 0 && hooks_.ended) hooks_.ended();
}

void service::start() {
    health_.start();
    if (!o_.listen.empty()) start_listener(routes());
    if (!o_.source.servers.empty()) start_source();
}

boost::asio::ip::tcp::endpoint service::local_endpoint() const {
    return endpoint_;
}

}  // namespace steadfast::secondary
