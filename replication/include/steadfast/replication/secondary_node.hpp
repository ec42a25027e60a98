// steadfast::replication::secondary_node: the secondary of the pair, embedded
// in a program. It receives a primary's batches (over HTTP(S) on `listen`, or
// from a NATS JetStream stream) and applies each stream in order, exactly once
// in effect: the application's `apply` handler runs for each new message
// inside the SQLite transaction that records the stream's seq, so its writes
// and the seq commit together. A handler that throws fails the request:
// nothing of it stays, and the primary sends it again (its quick retries
// through the engine, then its ladder), so no message is ever skipped. A
// duplicate of a committed message (a resend after a lost answer) is
// answered from the record and never reaches the handler; but a message
// whose transaction was rolled back (a later message of the request threw,
// the commit failed, the process died before it) reaches it again: exactly
// once holds for what the handler writes through `db`, not for what it keeps
// elsewhere. Over JetStream a throw makes the whole fetch wait (nak'd,
// delivered again). The default handler (none) stores the message only in
// the record, as steadfast-secondary does (`dump`).
//
//   steadfast::replication::secondary_config cfg;
//   cfg.listen = "127.0.0.1:8081";
//   cfg.data = "/var/lib/app/replica";
//   steadfast::replication::secondary_node replica(
//       cfg, [](sqlite3* db, const steadfast::envelope::message& m) { /* write m.payload */ });
//
// Threads: it runs on an event-loop thread of its own and a database thread;
// the handler runs on the database thread.
#pragma once

#include <steadfast/replication/envelope.hpp>
#include <steadfast/transport/jetstream.hpp>
#include <steadfast/transport/tls.hpp>

#include <boost/asio/ip/tcp.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct sqlite3;
namespace prometheus {
class Registry;
}

namespace steadfast::replication {

struct secondary_config {
    std::string listen = "127.0.0.1:0";  // HOST:PORT (port 0: one is picked; local_endpoint()); "": none
    std::string data;                    // the store's directory (secondary.db in it); made if missing
    /// SQL run at open, once the store's own tables exist and before
    /// anything else (the tables the apply handler
    /// writes: CREATE TABLE IF NOT EXISTS ...). The store's tables (streams,
    /// applied, meta) are not the application's: a statement that makes,
    /// alters, drops, indexes or writes one is refused
    /// (std::invalid_argument naming it), and none of the schema is kept.
    /// It runs in a savepoint: no BEGIN or COMMIT of its own.
    std::string schema;
    bool fsync = true;                            // each commit is on disk before the primary is answered
    std::vector<std::string> tokens;              // a primary must send one of them (none: no check)
    std::optional<http::tls_server_options> tls;  // HTTPS on listen
    std::size_t max_body = 1 << 20;
    std::uint64_t max_epoch_step = 1000;  // an epoch further above the fence is refused
    /// The apply handler's calls for one message within a request: a throw
    /// undoes its writes and calls it again at once, up to this many times,
    /// before the request fails (and the primary sends it again later).
    std::uint32_t apply_attempts = 3;
    std::uint64_t min_free_bytes = 0;  // messages are refused (503) below it; 0: off
    // JetStream instead of (or beside) the listener: the primary's stream,
    // consumed by a durable consumer of this secondary's own name.
    std::string source;  // nats://HOST:PORT[,...] ("": none)
    std::string js_stream = "steadfast", consumer;
    jetstream::security nats;  // TLS and credentials toward the NATS servers
};

/// Runs on the database thread for each message applied, in order per
/// stream, inside the transaction that records it. One thread applies every
/// stream: a handler that takes long holds up the messages of every stream
/// behind it. A throw undoes its writes and calls it again at once
/// (secondary_config::apply_attempts in all); then the whole request (or
/// JetStream fetch) fails and is sent again, the message never skipped. Its
/// BEGIN, COMMIT or ROLLBACK, a savepoint named steadfast_* (the node's), a
/// statement on the store's own tables and a PRAGMA that changes the
/// connection are refused (SQLITE_AUTH; the README lists them) and fail the
/// message the same way.
using apply_handler = std::function<void(sqlite3* db, const envelope::message& m)>;

class secondary_node {
public:
    /// Opens (or creates) the store and starts serving. Throws
    /// std::invalid_argument for a bad setting, app's config error
    /// (std::runtime_error) for an address in use, and std::runtime_error
    /// when the store cannot be opened, naming the problem.
    explicit secondary_node(secondary_config cfg, apply_handler apply = {});
    /// Drains (the listener and the source end), then stops its threads. A
    /// request being applied is given up before its next message (nothing
    /// of it stays: the primary sends it again), so that a slow handler
    /// holds the destructor up for one message at most.
    ~secondary_node();
    secondary_node(const secondary_node&) = delete;
    secondary_node& operator=(const secondary_node&) = delete;

    /// Where the listener is (port 0 in listen: the one picked).
    boost::asio::ip::tcp::endpoint local_endpoint() const;
    /// The node's series (steadfast_secondary_*), to expose with the
    /// program's own.
    prometheus::Registry& metrics();

private:
    struct impl;
    std::unique_ptr<impl> impl_;
};

}  // namespace steadfast::replication
