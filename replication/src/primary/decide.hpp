// What an answer means for the batch that was sent: the primary's decision
// table, as plain code (no sockets, no timers, no database), so that each row
// has a unit test. The delivery processor carries out what it returns.
#pragma once

#include <steadfast/replication/envelope.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace steadfast::primary {

/// The batch as sent: seqs first..last of one stream, contiguous.
struct sent_batch {
    std::uint64_t first = 0, last = 0;
    std::size_t count() const noexcept { return static_cast<std::size_t>(last - first + 1); }
};

/// How the quick retries around one batch ended.
struct delivery_outcome {
    enum class kind {
        answered,   // the secondary answered (any status); the last answer
        transport,  // no answer: connect, write or read failed or timed out
        tls,        // no answer: the TLS handshake failed (a certificate, a name, not TLS)
        stopped,    // shutdown or demotion cancelled the send
    };
    kind what = kind::answered;
    unsigned status = 0;  // answered: the HTTP status
    std::string body;     // answered: the body (409s are decoded from it)
    std::string detail;   // transport, tls: what failed, for the log
    // transport: the request went out whole and its answer did not come
    // within the attempt's timeout (http::transport_error::answer_timed_out:
    // a slow or hung secondary, or a dropped connection; not a missing one).
    bool no_answer_in_time = false;
};

enum class verdict {
    ack,          // the secondary has everything up to `upto`: go on after it
    demote,       // a newer primary exists (`epoch`): stop, exit 3
    isolate,      // a permanent reject of a batch: resend one at a time to find the message
    dead_letter,  // the single message sent is invalid: a dead letter, then go on
    redeliver,    // keep the messages, wait for the next ladder step, send again
    rewind,       // the secondary lost messages it had acknowledged: resend from `upto` + 1
    block,        // stop this stream (conflict): nothing acknowledged, nothing dead-lettered
    stop,         // the processor is stopping
    resync,       // JetStream: the log's last message is not the one expected: read it, decide_log()
};

/// Why a delivery failed through no fault of its messages (a redeliver's
/// cause): the link, or the secondary, is wrong. Its label() names it on
/// /metrics (steadfast_primary_link_errors_total{reason}) and in the log.
struct link_fault {
    enum class kind : unsigned char {
        none,
        transport,              // no answer: connect, write or read failed or timed out
        tls,                    // no answer: the TLS handshake failed
        auth,                   // 401 or 403
        http_status,            // another status a secondary may give (`status`)
        foreign_status,         // a 400, 413 or 422 without the secondary's {"error":..} body (`status`)
        jetstream_unavailable,  // no server, no responders, no leader, timeouts
        jetstream_refused,      // JetStream refused (a permission, a limit)
    };
    kind what = kind::none;
    unsigned status = 0;  // http_status, foreign_status
    /// "transport", "tls", "auth", "http_503", "foreign_400",
    /// "jetstream_unavailable", "jetstream_refused" ("" for none).
    std::string label() const;
    bool operator==(const link_fault&) const = default;
};

struct decision {
    verdict what = verdict::redeliver;
    std::uint64_t upto = 0;   // ack: the last seq applied; rewind: the seq to resend after
    std::uint64_t epoch = 0;  // demote: the epoch the secondary reported
    std::string reason;       // for the log and the dead letter; block: "conflict" or "beyond_retention"
    link_fault link_error;    // redeliver: what failed (its label() on /metrics)
    std::string detail;       // block and rewind: what was seen, for the log
    // redeliver: the answer is not one a steadfast-secondary gives (404, 405,
    // 415, 501, or a 400/413/422 without its {"error":..} body): --secondary
    // points at something else (a typo, another service, a proxy's page).
    bool not_a_secondary = false;
    // redeliver, transport: the request went out and no answer came in time
    // (it may have been applied: the resend is deduplicated).
    bool no_answer_in_time = false;
    // redeliver: the secondary refuses this primary's epoch as more than its
    // --max-epoch-step above its fence: --epoch is wrong, not the messages.
    bool epoch_refused = false;
};

/// The decision table (contract v2):
/// - 2xx: ack the batch;
/// - 409 stale_epoch: demote; 409 conflict: block;
/// - 409 gap: expected inside the batch acks only what precedes it within the
///   batch; expected at or below the batch's first seq means the secondary is
///   behind what it acknowledged (restored from an older copy): rewind;
/// - 400 refusing the epoch as too far above the fence (contract v3): the
///   primary's configuration, not the message: redeliver, `epoch_refused`;
/// - 400, 413, 422 with the secondary's {"error":..} body: isolate a batch,
///   dead-letter a single message; without it (a proxy's page, another
///   service at a wrong address): redeliver, link error "foreign_NNN";
/// - 404, 405, 415 and 501 (routes, methods and a content type that every
///   steadfast-secondary has): redeliver, marked `not_a_secondary` like the
///   foreign answers above;
/// - every other answer and every transport failure: the link or the
///   secondary is wrong, not the message: redeliver (reported as a link error).
decision decide(const sent_batch& b, const delivery_outcome& o);

/// What an operator should check after a redeliver `d` (the link_error
/// line's hint): the token, the address, the secondary's speed against
/// --attempt-timeout, TLS, NATS.
std::string_view hint_for(const decision& d);

// ---- JetStream (a nats:// --secondary): the log is the secondary ----

/// How the quick retries of one publish to JetStream ended.
struct publish_outcome {
    enum class kind {
        published,       // stored (or found stored: a duplicate of the same batch)
        wrong_sequence,  // the subject's last message is not the one this primary last wrote
        unavailable,     // no server, no responders, no leader, timeouts: retried quickly, in vain
        refused,         // JetStream refused the publish (a permission, a limit): misconfiguration
        too_large,       // larger than the server's max_payload
        stopped,         // shutdown or demotion cancelled the publish
    };
    kind what = kind::published;
    std::string detail;  // unavailable, refused, too_large: what failed, for the log
};

/// The decision for a publish (the JetStream counterpart of decide()):
/// published: ack the batch; a wrong expected sequence: resync (read the
/// log's last message, then decide_log); unavailable or refused: redeliver
/// (a link error, messages kept, the ladder); too large: isolate a batch,
/// block a single message (the server's max_payload must grow; never a
/// dead letter for the server's limit).
decision decide_publish(const sent_batch& b, const publish_outcome& o);

/// The last message of a stream's subject in the log, as found.
struct log_head {
    bool empty = true;                 // no message on the subject
    bool envelope = true;              // decodes as envelopes of this stream (false: something else wrote it)
    std::uint64_t seq = 0, epoch = 0;  // its last envelope's
    std::string id;
};
/// What the outbox knows of the stream.
struct outbox_facts {
    std::uint64_t acked = 0;                // acknowledged up to here
    std::uint64_t next_seq = 1;             // the next seq it would assign
    std::uint64_t oldest = 0;               // the lowest seq still retained (0: none)
    std::optional<std::string> id_at_head;  // the outbox's id at the log head's seq, if still retained
};
/// Whether the log continues this primary's stream:
/// - another writer's message, or a seq this primary never assigned, or
///   another id at a seq: block (conflict), nothing written;
/// - a newer epoch: demote;
/// - behind what was acknowledged (the log lost messages): rewind from
///   retention, or block beyond retention;
/// - else: ack up to the log's head and go on after it.
decision decide_log(const log_head& h, std::uint64_t own_epoch, const outbox_facts& f);

/// A rewind to `expected` is possible only while the outbox still holds it.
/// `oldest` is the stream's lowest seq still in the outbox (0: none).
decision decide_rewind(std::uint64_t expected, std::uint64_t oldest, std::uint64_t next_seq);

/// A secondary found seqs from..to of a stream missing from the log (a hole
/// JetStream lost; its later messages are there):
/// - nothing of it acknowledged yet (from > acked): ack (nothing to do: the
///   range is still to be sent as usual);
/// - within retention: rewind (resend from `from`, upto = from - 1; the
///   caller resends up to `to` and no further than what was acknowledged);
/// - beyond retention: block, with what is missing (the caller reports it;
///   the stream itself goes on for the other secondaries).
decision decide_repair(std::uint64_t from, std::uint64_t acked, std::uint64_t oldest, std::uint64_t next_seq);

/// Several streams' batches sent as one request (combiner.hpp): what its
/// answer means for each part, so that each stream gets the answer it would
/// have had alone. The secondary applies such a request atomically: nothing
/// of it on a 409 or a 4xx.
enum class part_fate {
    answer,        // this part's answer is the request's: decide() it
    resend,        // nothing of it was applied, through no fault of its own: send it again
    resend_alone,  // a 400, 413 or 422 names no stream: send it by itself to learn its own answer
};
/// `streams`: the parts' streams, in the request's order. `answered`: false
/// when no answer came (a transport or TLS failure: every part gets it).
/// A 409 conflict or gap is the named stream's (the others are resent); a
/// stale epoch and every other status are everyone's; a 409 naming none of
/// them sends each part by itself.
std::vector<part_fate> split_answer(const std::vector<std::string_view>& streams, bool answered, unsigned status,
                                    std::string_view body);

}  // namespace steadfast::primary
