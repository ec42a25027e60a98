// steadfast::replication::primary_node: the primary of the pair, embedded in
// a program's event loop. It owns a durable outbox (SQLite, in a directory of
// its own) and delivers each stream's messages to the secondary in order,
// exactly once in effect, over HTTP(S) (a steadfast-secondary, or a program
// embedding secondary_node) or through a NATS JetStream stream: quick retries
// through the engine, then a durable ladder (RocketMQ's steps by default),
// gated by the secondary's probe, stopped by stop() or by a newer epoch
// (demotion). What steadfast-primary runs is this, with an HTTP intake around
// it (docs/contract.md).
//
//   boost::asio::io_context ioc;
//   steadfast::replication::primary_config cfg;
//   cfg.secondary = "http://127.0.0.1:8081";
//   cfg.data = "/var/lib/app/outbox";
//   steadfast::replication::primary_node primary(ioc.get_executor(), cfg);
//   // in a coroutine on ioc:
//   std::uint64_t seq = co_await primary.async_publish("orders", R"({"id":1})", asio::use_awaitable);
//
// Threads: delivery runs on an event-loop thread of the node's own and
// SQLite on another, so that nothing of the node is left in the program's
// loop when it is destroyed; `ex` (or a handler's associated executor)
// receives the completions. Member functions may be called from any thread.
#pragma once

#include <steadfast/transport/jetstream.hpp>
#include <steadfast/transport/tls.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
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

/// Why a publish was refused before anything was stored (category
/// "steadfast.replication"); a failed commit completes with the database's
/// own code (SQLite's extended result code) instead.
enum class publish_error {
    invalid_stream = 1,  // not 1 to 128 of A-Z a-z 0-9 . _ - (or not a JetStream subject token)
    invalid_payload,     // not one JSON value a secondary can read (its message says which ways)
    too_large,           // larger than the envelope's limit (or the JetStream server's)
    stopped,             // stop() was called, or the node was demoted
    disk_low,            // free space under min_free_bytes
    writes_failed,       // async_publish_with's writes threw (an exception without an error code)
    invalid_key,         // async_publish_once: the key is not 1 to 255 visible ASCII characters
    key_conflict,        // async_publish_once: the key was first used for another stream or payload
    no_dead_letter,      // async_requeue: no dead letter has that number
    already_requeued,    // async_requeue: it was requeued before (the seq given is that message's)
};
const boost::system::error_category& replication_category() noexcept;
boost::system::error_code make_error_code(publish_error e) noexcept;

/// The primary's settings; the daemon's flags of the same names set them.
struct primary_config {
    /// http://HOST:PORT or https://HOST:PORT (a secondary), or
    /// nats://HOST:PORT[,nats://...] (JetStream).
    std::string secondary;
    std::string data;  // the outbox's directory (primary.db in it); made if missing
    /// SQL run at open, once the outbox's own tables exist and before
    /// anything else (the application's own tables,
    /// for the transactional form: CREATE TABLE IF NOT EXISTS ...). The
    /// outbox's tables are not the application's: a statement that makes,
    /// alters, drops, indexes or writes streams, outbox, outbox_tail, acks, schedule,
    /// dead_letter, blocked, publish_keys (and its indexes publish_keys_at and
    /// publish_keys_stream) or meta is refused
    /// (std::invalid_argument naming it), and none of the schema is kept.
    /// It runs in a savepoint: no BEGIN or COMMIT of its own.
    std::string schema;
    // This primary's term: a secondary that saw a newer one demotes it. A
    // failover raises it by one; one more than the secondary's max_epoch_step
    // above its fence is refused, and the messages wait (a link error) until
    // a node with the right epoch sends them.
    std::uint64_t epoch = 0;
    bool fsync = true;                // each commit is on disk before a publish completes
    std::vector<std::string> tokens;  // the first is sent as a bearer token
    std::size_t batch_max = 4000, batch_bytes = 512 * 1024, connections = 8;
    std::uint32_t quick_retries = 5;
    std::chrono::milliseconds max_backoff{30'000}, attempt_timeout{10'000};
    /// While several streams share requests to an HTTP secondary, how long a
    /// request waits for more of them to join (0 to 10 ms; 0: at once):
    /// fewer, larger requests (one transaction and one fsync each on the
    /// secondary) for up to this much more latency. A stream delivering by
    /// itself never waits.
    std::chrono::milliseconds linger{2};
    std::chrono::milliseconds retain{3'600'000};            // acknowledged messages are kept this long
    std::string ladder;                                     // e.g. "1s,10s,1m"; empty: RocketMQ's 16 steps
    std::uint64_t min_free_bytes = 0;                       // publishes are refused (disk_low) below it; 0: off
    std::optional<http::tls_client_options> secondary_tls;  // for an https:// secondary
    // JetStream: stream `js_stream`, subjects `<js_prefix>.<stream>` (default prefix: js_stream).
    std::string js_stream = "steadfast", js_prefix;
    unsigned js_replicas = 1;
    jetstream::security nats;  // TLS and credentials toward the NATS servers
    bool jetstream() const;
};

/// One stream as the outbox holds it.
struct stream_status {
    std::string stream;
    std::uint64_t last_seq = 0, acked_seq = 0, pending = 0;
    std::string blocked;  // why delivery stopped for it ("": it did not)
};

/// A message given up on: the secondary refused it for good (400, 413 or
/// 422: its shape, its size, its content). It is kept here, and a tombstone
/// took its seq in the stream so that the stream went on.
struct dead_letter {
    std::int64_t n = 0;  // its number, for async_requeue
    std::string stream, id, payload, reason;
    std::uint64_t seq = 0;
    std::chrono::system_clock::time_point at;   // when it was given up on
    std::optional<std::uint64_t> requeued_seq;  // requeued: the new message's seq
};

/// What async_publish_once stored, or found.
struct published_once {
    std::uint64_t seq = 0;  // the message's (key_conflict: the key's first message's)
    bool replayed = false;  // the key was seen before: nothing stored now, the first message's seq
};

class primary_node {
public:
    /// Opens (or creates) the outbox and starts delivering what it holds.
    /// Throws std::invalid_argument for a bad setting and std::runtime_error
    /// when the outbox cannot be opened (another process holds it, a
    /// read-only directory), naming the problem.
    primary_node(boost::asio::any_io_executor ex, primary_config cfg);
    /// Stops delivery, then its thread and the database thread (what is
    /// queued is committed first, and outstanding publishes complete); blocks
    /// for that long (tens of milliseconds). Destroy the node before the
    /// execution context its operations complete on (the io_context of `ex`
    /// or of a handler's executor), as with any Asio I/O object: a
    /// completion posted into a context already destroyed is undefined.
    ~primary_node();
    primary_node(const primary_node&) = delete;
    primary_node& operator=(const primary_node&) = delete;

    boost::asio::any_io_executor get_executor() const;

    /// Stores `payload` (one JSON value) as the next message of `stream`;
    /// completes with its seq once the commit is durable (and delivery has
    /// learnt of it), or with an error and nothing stored. Signature
    /// void(error_code, std::uint64_t); any completion token (default
    /// deferred: nothing happens until the result is awaited or invoked);
    /// per-operation cancellation of every type: a publish the database
    /// thread has not taken yet completes at once with operation_aborted (it
    /// does not wait for what is ahead of it) and is never stored; one
    /// already in its commit completes as usual. Never completes inline.
    /// The same holds for every operation below. Publishes made while the
    /// database thread is busy share one job and one commit, each answered
    /// on its own; seqs follow the order of the calls, across every kind of
    /// publish.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_publish(std::string stream, std::string payload, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, std::uint64_t)>(
            [this](auto handler, std::string s, std::string p) {
                start_publish(std::move(s), std::move(p), {}, std::move(handler));
            },
            token, std::move(stream), std::move(payload));
    }

    /// async_publish under an idempotency key (1 to 255 visible ASCII
    /// characters): the same key, stream and payload again stores nothing and
    /// completes with the first message's seq and `replayed`; the same key
    /// with another stream or payload completes with key_conflict. A caller
    /// that lost a completion (cancelled after its commit, a restart) may
    /// publish again safely. Keys are kept as long as their message
    /// (primary_config::retain after its acknowledgement), as the daemon's
    /// Idempotency-Key. Signature void(error_code, published_once).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_publish_once(std::string stream, std::string payload, std::string key, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, published_once)>(
            [this](auto handler, std::string s, std::string p, std::string k) {
                start_publish_once(std::move(s), std::move(p), std::move(k), std::move(handler));
            },
            token, std::move(stream), std::move(payload), std::move(key));
    }

    /// Stores `payloads` as the next messages of `stream`, in order, in one
    /// commit; completes with the last one's seq (the first's is that minus
    /// size() - 1) once durable. All or nothing: one refused payload refuses
    /// the batch (nothing stored). The fast way to publish many messages.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_publish_batch(std::string stream, std::vector<std::string> payloads, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, std::uint64_t)>(
            [this](auto handler, std::string s, std::vector<std::string> p) {
                start_publish_batch(std::move(s), std::move(p), std::move(handler));
            },
            token, std::move(stream), std::move(payloads));
    }

    /// The transactional outbox: async_publish with the application's
    /// writes in the same transaction. `writes(db)` runs on the database thread
    /// inside the transaction that stores the message, on the outbox's own
    /// connection (the application's tables live in the same file). Both
    /// commit, or neither: a throw from `writes` stores nothing and completes
    /// with its error code (a boost::system::system_error's, or a
    /// std::system_error's: errno values in Boost's generic or system
    /// category, any other category wrapped, to compare with ==; else
    /// publish_error::writes_failed); a failed commit completes with the
    /// database's. The message's seq is not known
    /// to `writes`. Its BEGIN, COMMIT or ROLLBACK, a savepoint named
    /// steadfast_* (the node's), a statement on the node's own tables and a
    /// PRAGMA that changes the connection are refused (SQLITE_AUTH; the
    /// README lists them): this publish fails with writes_failed, the others
    /// of its group commit do not.
    using transaction_writes = std::function<void(sqlite3* db)>;
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_publish_with(std::string stream, std::string payload, transaction_writes writes,
                            CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, std::uint64_t)>(
            [this](auto handler, std::string s, std::string p, transaction_writes w) {
                start_publish(std::move(s), std::move(p), std::move(w), std::move(handler));
            },
            token, std::move(stream), std::move(payload), std::move(writes));
    }

    /// Runs `fn(db)` on the database thread in its own transaction (reads of
    /// the application's tables beside the outbox), after every publish
    /// started before it; completes with void(error_code). A throw from `fn`
    /// keeps none of its writes and completes with its error code (as
    /// async_publish_with's writes; its text is logged as
    /// `transaction_failed`). It runs after stop() and after a demotion too
    /// (the database is open until the node is destroyed): a program that
    /// must not write once demoted checks demoted() first.
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_transaction(transaction_writes fn, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
            [this](auto handler, transaction_writes f) { start_transaction(std::move(f), std::move(handler)); }, token,
            std::move(fn));
    }

    /// Ends delivery: sends and waits end at once, publishes are refused
    /// (stopped): those made after it, and those made before it that the
    /// node's loop has not taken in yet (from another thread, say); one it
    /// took in before completes as it would have, stored with its seq or
    /// refused, never half; what was stored stays for the next start. Idempotent. A stream blocked (a conflict, beyond
    /// retention) is tried again by the next node made on the same data, as the daemon's restart does.
    void stop();

    /// Messages stored and not yet acknowledged, over all streams (as of the
    /// last change).
    std::uint64_t pending() const;
    /// The secondary's probe passes (over HTTP, true until a first check
    /// fails: sends need not wait for one).
    bool secondary_online() const;
    /// A newer epoch was seen: delivery has stopped for good.
    bool demoted() const;
    /// Each stream of the outbox (read on the database thread; completes
    /// with void(error_code, std::vector<stream_status>)).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_status(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken,
                                           void(boost::system::error_code, std::vector<stream_status>)>(
            [this](auto handler) { start_status(std::move(handler)); }, token);
    }
    /// Every dead letter, oldest first (read on the database thread;
    /// completes with void(error_code, std::vector<dead_letter>)).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_dead_letters(CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, std::vector<dead_letter>)>(
            [this](auto handler) { start_dead_letters(std::move(handler)); }, token);
    }
    /// Publishes dead letter `n`'s payload again, as the next message of its
    /// stream (once: the dead letter records the new seq); completes with
    /// void(error_code, seq) once durable, or with no_dead_letter,
    /// already_requeued (and the seq it was requeued as), stopped, or the
    /// database's error. The payload is sent as it was: requeue once the
    /// secondary takes it (a larger max_body, a fixed application).
    template <class CompletionToken = boost::asio::deferred_t>
    auto async_requeue(std::int64_t n, CompletionToken&& token = {}) {
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code, std::uint64_t)>(
            [this](auto handler, std::int64_t dead) { start_requeue(dead, std::move(handler)); }, token, n);
    }
    /// The node's series (steadfast_primary_*), to expose with the
    /// program's own.
    prometheus::Registry& metrics();

private:
    struct impl;
    void start_publish(std::string stream, std::string payload, transaction_writes writes,
                       boost::asio::any_completion_handler<void(boost::system::error_code, std::uint64_t)> handler);
    void start_publish_once(
        std::string stream, std::string payload, std::string key,
        boost::asio::any_completion_handler<void(boost::system::error_code, published_once)> handler);
    void start_publish_batch(
        std::string stream, std::vector<std::string> payloads,
        boost::asio::any_completion_handler<void(boost::system::error_code, std::uint64_t)> handler);
    void start_transaction(transaction_writes fn,
                           boost::asio::any_completion_handler<void(boost::system::error_code)> handler);
    void start_status(
        boost::asio::any_completion_handler<void(boost::system::error_code, std::vector<stream_status>)> handler);
    void start_dead_letters(
        boost::asio::any_completion_handler<void(boost::system::error_code, std::vector<dead_letter>)> handler);
    void start_requeue(std::int64_t n,
                       boost::asio::any_completion_handler<void(boost::system::error_code, std::uint64_t)> handler);
    std::unique_ptr<impl> impl_;
};

}  // namespace steadfast::replication

template <>
struct boost::system::is_error_code_enum<steadfast::replication::publish_error> : std::true_type {};
