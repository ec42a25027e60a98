// steadfast-secondary serving: the parts it runs, each owning its state
// (the store, the database thread, storage health, metrics, the routes, the
// listener, the JetStream source), wired here, and stopped by a signal.
#pragma once

#include "../common/db_worker.hpp"
#include "../common/log.hpp"
#include "../common/sqlite.hpp"
#include "../common/storage_health.hpp"
#include "faults.hpp"
#include "metrics.hpp"
#include "source.hpp"
#include "store.hpp"

#include <steadfast/transport/server.hpp>

#include <boost/asio/io_context.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace steadfast::secondary {

struct options {
    std::string listen, data, token_file;
    app::sync_mode sync = app::sync_mode::full;
    fault_options faults;  // --fault-rate, --fault-status, --drop-rate, --delay
    app::level log_level = app::level::info;
    std::optional<http::tls_server_options> tls;  // HTTPS on --listen
    std::size_t max_body = 1 << 20;
    http::server::options listener;  // --max-connections, --reserved-connections, --header-timeout
    std::uint64_t min_free = 0;      // --min-free-space
    std::uint64_t max_epoch_step = 1000;
    source_options source;  // --source nats://...: consume from JetStream
};

class service {
public:
    explicit service(const options& o);
    ~service();
    service(const service&) = delete;
    service& operator=(const service&) = delete;
    /// Serves until SIGTERM or SIGINT; the exit code.
    int run();

private:
    http::router routes();
    boost::asio::awaitable<std::string> recheck_storage();
    void storage_changed(bool ok, const std::string& why);
    void start_listener(http::router r);
    void start_source();
    void stop(int sig);
    void ended();

    const options& o_;
    std::vector<std::string> tokens_;  // any is accepted; SIGHUP reloads them
    app::database db_;
    store st_;
    // Declared before the worker: the worker's last completions are posted to
    // it, so it must outlive the worker.
    boost::asio::io_context ioc_{1};
    app::db_worker worker_;
    metrics m_;
    app::storage_health health_;
    // This run of the process, on /health: a primary that sees it change
    // rechecks its streams (the data directory may have been restored).
    const std::string instance_;
    bool draining_ = false;  // a shutdown signal was received: /ready says 503
    std::optional<http::server> server_;
    std::unique_ptr<js_source> source_;
    int running_ = 0;  // the listener and the source: the loop stops when both ended
};

}  // namespace steadfast::secondary
