// The secondary serving, as the daemon and an embedding program
// (secondary_node) both run it: the parts, each owning its state (the store,
// the database thread, storage health, metrics, the routes, the listener,
// the JetStream source), wired here, on any executor. The daemon adds its
// flags, signals, token reload and fault injection (a wrapper of the
// messages' handler).
#pragma once

#include <common/db_worker.hpp>
#include <common/log.hpp>
#include <common/sqlite.hpp>
#include <common/storage_health.hpp>
#include <secondary/metrics.hpp>
#include <secondary/source.hpp>
#include <secondary/store.hpp>

#include <steadfast/transport/server.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace steadfast::secondary {

struct service_options {
    std::string listen, data;  // listen: HOST:PORT ("": no listener)
    std::string schema;        // SQL run at open (an embedding program's tables)
    app::sync_mode sync = app::sync_mode::full;
    std::optional<http::tls_server_options> tls;  // HTTPS on listen
    std::size_t max_body = 1 << 20;
    http::server::options listener;  // --max-connections, --reserved-connections, --header-timeout
    std::uint64_t min_free = 0;      // --min-free-space
    std::uint64_t max_epoch_step = 1000;
    std::uint32_t apply_attempts = 3;  // the apply handler's, within a request
    source_options source;             // --source nats://...: consume from JetStream
};

/// What the owner adds.
struct service_hooks {
    /// Wraps POST /api/messages' handler (the daemon's fault injection).
    std::function<http::router::handler(http::router::handler)> wrap_messages;
    /// The listener and the source have ended after stop().
    std::function<void()> ended;
};

class service {
public:
    /// Opens the store (throws naming the problem). `apply`: the
    /// application's handler of each applied message (store.hpp).
    service(const service_options& o, boost::asio::any_io_executor ex, std::vector<std::string> tokens,
            store::apply_handler apply = {}, service_hooks hooks = {});
    ~service();
    service(const service&) = delete;
    service& operator=(const service&) = delete;
    /// Starts the listener (throws app::config_error when the address is in
    /// use) and the JetStream source.
    void start();
    /// Drains: /ready says 503, the listener and the source end, then
    /// hooks.ended. Idempotent.
    void stop();
    /// From any thread: a request being applied is given up before its next
    /// message, and so is any applied after this (store::abandon).
    void abandon() noexcept { st_.abandon(); }
    /// Before the event loop's pending handlers are destroyed: queued
    /// database jobs finish.
    void close() { worker_.stop(); }
    /// Any of them is accepted; replaced in place (SIGHUP).
    std::vector<std::string>& tokens() noexcept { return tokens_; }
    /// The listener's address (after start(); port 0 picks one).
    boost::asio::ip::tcp::endpoint local_endpoint() const;
    metrics& series() noexcept { return m_; }

private:
    http::router routes();
    boost::asio::awaitable<std::string> recheck_storage();
    void storage_changed(bool ok, const std::string& why);
    void start_listener(http::router r);
    void start_source();
    void ended();

    const service_options& o_;
    boost::asio::any_io_executor ex_;
    service_hooks hooks_;
    std::vector<std::string> tokens_;  // any is accepted; SIGHUP reloads them
    app::database db_;
    store st_;
    app::db_worker worker_;
    metrics m_;
    app::storage_health health_;
    // This run of the process, on /health: a primary that sees it change
    // rechecks its streams (the data directory may have been restored).
    const std::string instance_;
    bool draining_ = false;  // stop() was called: /ready says 503
    std::optional<http::server> server_;
    boost::asio::ip::tcp::endpoint endpoint_;
    std::unique_ptr<js_source> source_;
    int running_ = 0;  // the listener and the source: ended() when both have
};

}  // namespace steadfast::secondary
