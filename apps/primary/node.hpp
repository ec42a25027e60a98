// steadfast-primary's node: the state shared by its parts, each in a file of
// its own (one reason to change each):
//   main.cpp      the process: signals, exit codes
//   flags.cpp     the flags, checked (config.hpp: what they set)
//   commands.cpp  `status`, `dead-letters` (offline)
//   node.cpp      wiring, start and stop
//   intake.cpp    /publish and --stdin: check, commit, answer
//   replicator.cpp  delivery: a processor per stream carries out stream_fsm's actions
//   acknowledger.cpp  what was acknowledged, marked in the outbox
//   link.cpp, http_link.cpp, jetstream_link.cpp  the link to the secondary
//   stream_fsm.cpp  a stream's delivery decisions (plain code, unit-tested)
//   decide.cpp    what an answer means for a batch (plain code, unit-tested)
//   ladder.cpp    when a failed head is tried next (plain code, unit-tested)
//   window.cpp    what joins a stream's send window (plain code, unit-tested)
//   outbox.cpp    the durable outbox (SQLite)
// One io_context thread runs everything but SQLite (the database thread) and
// the stdin reader.
#pragma once

#include "flags.hpp"
#include <common/db_worker.hpp>
#include <common/event_loop.hpp>
#include <common/log.hpp>
#include <common/metrics.hpp>
#include <common/sqlite.hpp>
#include <common/storage_health.hpp>
#include <primary/combiner.hpp>
#include <primary/core.hpp>
#include <primary/decide.hpp>
#include <primary/metrics.hpp>
#include <primary/outbox.hpp>
#include <primary/outbox_health.hpp>
#include <primary/replicator.hpp>

#include <steadfast/conditions.hpp>
#include <steadfast/engine.hpp>
#include <steadfast/replication/conditions.hpp>
#include <steadfast/replication/envelope.hpp>
#include <steadfast/transport/http.hpp>
#include <steadfast/transport/jetstream.hpp>
#include <steadfast/transport/pool.hpp>
#include <steadfast/transport/server.hpp>

#include <boost/asio/io_context.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace steadfast::primary {

class node final {
public:
    node(const options& o, app::database& db);
    ~node();
    int run();

private:
    // node.cpp
    void stop(const std::string& why, int code = exit_ok);
    void check_drained();

    // intake.cpp
    http::router routes();
    void read_stdin();
    std::size_t envelope_overhead(std::string_view stream) const;
    std::optional<http::response> refuse_publish(const http::request& req,
                                                 std::string& stream);  // may check the disk again
    bool at_stream_cap(const std::string& stream) const;
    // A publish admitted to a stream holds the stream's place under
    // --max-streams until its commit has made the stream pending (or failed):
    // concurrent publishes to new streams cannot all pass the cap, nor one to
    // a stream whose messages are all acknowledged meanwhile.
    class stream_admission {
    public:
        stream_admission(node& n, const std::string& stream);
        ~stream_admission();
        stream_admission(const stream_admission&) = delete;
        stream_admission& operator=(const stream_admission&) = delete;

    private:
        node& n_;
        std::map<std::string, std::size_t>::iterator held_;  // in admitting_, erased only by the last holder
    };

    const options& o_;
    app::event_loop ioc_{1};
    // The outbox, its database thread, the series and delivery (core.hpp);
    // --token-file's tokens: the first is sent, any is accepted on /publish.
    core c_;
    std::shared_ptr<shutdown_condition> shutdown_;  // SIGINT, SIGTERM
    int publishing_ = 0;                            // publishes between acceptance and commit (io thread only)
    // Streams that publishes under way are adding to, and how many
    // publishes each (stream_admission).
    std::map<std::string, std::size_t> admitting_;
    bool input_closed_ = false, stopping_ = false;
    bool ready_ = false;    // /ready: the event loop runs and no shutdown has begun
    outbox_health health_;  // whether the outbox takes writes (the disk's space, the last commit)
    std::atomic<bool> stdin_stop_{false};
    // A group of standard input was not stored: no later group may be (the
    // input's order would break), so they fail too (database thread only).
    std::atomic<bool> stdin_failed_{false};
    bool stdin_failure_logged_ = false;  // (io thread)
    http::server* server_ = nullptr;
    int exit_code_ = exit_ok;
};

}  // namespace steadfast::primary
