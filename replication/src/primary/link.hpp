// The primary's link to its secondary: how a batch reaches it and how the
// primary learns that it is there. Two kinds (http_link.cpp: a
// steadfast-secondary over HTTP(S); jetstream_link.cpp: a NATS JetStream log),
// chosen once, where the link is built (make_link); nothing else in the
// primary asks which one it has.
#pragma once

#include "../common/db_worker.hpp"
#include "config.hpp"
#include "decide.hpp"
#include "metrics.hpp"
#include "outbox.hpp"

#include <steadfast/conditions.hpp>
#include <steadfast/engine.hpp>
#include <steadfast/replication/conditions.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace steadfast::primary {

/// What a link uses of the primary it serves, given when it is built.
struct link_env {
    const primary_config& o;
    boost::asio::any_io_executor ex;  // the event loop's
    outbox& out;                      // read on the database thread only (through worker)
    app::db_worker& worker;
    cond stop;                               // shutdown or demotion
    std::shared_ptr<epoch_fence> demoted;    // observe() a newer epoch: the primary stops (exit 3)
    const std::vector<std::string>& tokens;  // --token-file's (the first is sent), reloaded in place
    metrics& m;                              // the primary's series (the same whichever link runs)
};

/// What a link asks of the primary while it runs (the node answers).
class link_host {
public:
    virtual bool stopping() const = 0;
    /// The secondary's probe passes (the gate of every attempt).
    virtual cond online() const = 0;
    /// The highest seq of `stream` acknowledged in memory (nullopt: the stream
    /// has no processor, or its position is not read yet).
    virtual std::optional<std::uint64_t> acked_max(const std::string& stream) const = 0;
    /// Why `stream` is blocked (nullopt: it is not).
    virtual std::optional<std::string> blocked(const std::string& stream) const = 0;
    /// The recheck: `stream`, acknowledged up to `upto` and held for less by
    /// the secondary, sends its last acknowledged message again. False:
    /// nothing to do now (it has messages to send: its next send finds out).
    virtual bool resend_last(const std::string& stream, std::uint64_t upto) = 0;
    /// Every stream waiting for a ladder step tries at once (`why`: logged).
    virtual void retry_now(const char* why) = 0;
    /// A send saw the secondary fail in a way its probe should see at once
    /// (its connection refused: restarting?), not at the probe's next check.
    virtual void check_secondary_soon() = 0;
    /// Reading `stream`'s outbox failed (a failing disk fails every
    /// stream's read at once): logged, at most one line a second for the
    /// primary, whichever part read.
    virtual void outbox_read_failed(const std::string& stream, const std::string& error) = 0;

protected:
    ~link_host() = default;
};

class link {
public:
    virtual ~link() = default;

    /// The log must be read before a stream's first send (stream_fsm).
    virtual bool reads_log() const noexcept = 0;
    /// Whether sends may start before a first check has passed.
    virtual bool initially_online() const noexcept = 0;
    /// One check of the secondary (make_secondary_online's).
    virtual boost::asio::awaitable<bool> probe() = 0;
    /// The wait between failing checks: how long a secondary that is back
    /// waits to be seen, against what a failing check costs the other side.
    virtual backoff probe_backoff() const {
        using namespace std::chrono_literals;
        return backoff::exponential(50ms, 1.5, 200ms);
    }
    /// The secondary is online after being offline (or for the first time).
    virtual void came_online() {}
    /// Why the last check failed, for the secondary_offline line ("": unknown).
    virtual std::string offline_error() const { return {}; }
    /// A configuration problem the other side reported ("": none): NATS
    /// refusing the credentials, or a TLS mismatch ("credentials_refused: ...",
    /// "tls_mismatch: ..."). /ready answers 503 while there is one.
    virtual std::string configuration_problem() const { return {}; }
    /// The quick retries' policy for a send over this link.
    virtual retry_policy quick(retry_policy p) const { return p; }

    /// Sends `batch` (seqs of `stream`, in order) with the quick retries, and
    /// says what the answer means (decide.hpp). `server_wait`: a Retry-After.
    virtual boost::asio::awaitable<decision> send(const std::string& stream, const std::vector<pending_message>& batch,
                                                  const retry_policy& quick, std::chrono::nanoseconds& server_wait) = 0;
    /// Reads where the log stands for `stream` (acknowledged up to `acked`
    /// here) and what that means (decide_log()). Only for reads_log() links.
    virtual boost::asio::awaitable<decision> sync(const std::string& stream, std::uint64_t acked,
                                                  const retry_policy& quick);
    /// `stream` retired: nothing of it stays in the link.
    virtual void forget(const std::string& stream) { (void)stream; }
    /// `stream`'s processor ended with messages left and starts again: what
    /// the link expects of the secondary for it is learnt afresh.
    virtual void restarted(const std::string& stream) { (void)stream; }

    /// Intake: a stream name this link cannot carry (the 400's text).
    virtual std::optional<std::string> refuse_stream(std::string_view stream) const {
        (void)stream;
        return std::nullopt;
    }
    /// Intake: a message of `bytes` as an envelope that this link cannot
    /// carry (the 413's text; nullopt: it fits, or it is not known yet).
    virtual std::optional<std::string> too_large(std::size_t bytes) const {
        (void)bytes;
        return std::nullopt;
    }
    /// /health's fields about the link.
    virtual void health(nlohmann::json& j) const { (void)j; }
    /// At each scrape of /metrics.
    virtual void refresh_metrics() {}
    /// Why a newer epoch means demotion, for the log.
    virtual std::string_view demoted_reason() const = 0;
    /// Stops taking anything from the secondary's side (subscriptions):
    /// called before the event loop's pending handlers are destroyed.
    virtual void close() {}
};

/// The link `env.o.secondary` names: nats:// JetStream, else HTTP(S).
std::unique_ptr<link> make_link(const link_env& env, link_host& host);

// ---- What both links send: the wire format's batches (envelope.hpp) ----

/// A batch's envelopes, comma-joined: one stream's part of a request.
std::string encode_list(const std::string& stream, const std::vector<pending_message>& batch, std::uint64_t epoch);
/// One envelope, or a batch of them: a JetStream message's data (and, put
/// together by the combiner, an HTTP request's body).
std::string encode_body(const std::string& stream, const std::vector<pending_message>& batch, std::uint64_t epoch);
/// The Idempotency-Key (HTTP) and Nats-Msg-Id (JetStream) of a batch: the
/// message's id, or the first id and the last seq.
std::string batch_key(const std::vector<pending_message>& batch);

/// Waits until `c` holds or `deadline` passes, without polling.
boost::asio::awaitable<void> wait_until(boost::asio::any_io_executor ex, std::chrono::steady_clock::time_point deadline,
                                        cond c);

}  // namespace steadfast::primary
