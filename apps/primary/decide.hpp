// What an answer means for the batch that was sent: the primary's decision
// table, as plain code (no sockets, no timers, no database), so that each row
// has a unit test. The delivery processor carries out what it returns.
#pragma once

#include <steadfast/transport/envelope.hpp>

#include <cstdint>
#include <string>

namespace steadfast::primary {

/// The batch as sent: seqs first..last of one stream, contiguous.
struct sent_batch {
    std::uint64_t first = 0, last = 0;
    std::size_t count() const noexcept { return static_cast<std::size_t>(last - first + 1); }
};

/// How the quick retries around one batch ended.
struct delivery_outcome {
    enum class kind {
        answered,  // the secondary answered (any status); the last answer
        transport, // no answer: connect, write or read failed or timed out
        tls,       // no answer: the TLS handshake failed (a certificate, a name, not TLS)
        stopped,   // shutdown or demotion cancelled the send
    };
    kind what = kind::answered;
    unsigned status = 0;  // answered: the HTTP status
    std::string body;     // answered: the body (409s are decoded from it)
    std::string detail;   // transport, tls: what failed, for the log
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
};

struct decision {
    verdict what = verdict::redeliver;
    std::uint64_t upto = 0;   // ack: the last seq applied; rewind: the seq to resend after
    std::uint64_t epoch = 0;  // demote: the epoch the secondary reported
    std::string reason;       // for the log and the dead letter; block: "conflict" or "beyond_retention"
    std::string link_error;   // redeliver: a metric label ("http_404", "auth", "transport", ...)
    std::string detail;       // block and rewind: what was seen, for the log
};

/// The decision table (contract v2):
/// - 2xx: ack the batch;
/// - 409 stale_epoch: demote; 409 conflict: block;
/// - 409 gap: expected inside the batch acks only what precedes it within the
///   batch; expected at or below the batch's first seq means the secondary is
///   behind what it acknowledged (restored from an older copy): rewind;
/// - 400, 413, 422: isolate a batch, dead-letter a single message;
/// - every other answer and every transport failure: the link or the
///   secondary is wrong, not the message: redeliver (reported as a link error).
decision decide(const sent_batch& b, const delivery_outcome& o);

/// A rewind to `expected` is possible only while the outbox still holds it.
/// `oldest` is the stream's lowest seq still in the outbox (0: none).
decision decide_rewind(std::uint64_t expected, std::uint64_t oldest, std::uint64_t next_seq);

}  // namespace steadfast::primary
