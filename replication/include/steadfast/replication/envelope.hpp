// The wire format of the primary/secondary pair (docs/contract.md), in
// one place for both apps, the tests and the fuzzer:
//   - the envelope {"id": string, "stream": string, "seq": uint64 >= 1,
//     "epoch": uint64 (optional, 0), "payload": any JSON} and the batch
//     {"messages": [envelope, ...]} (seqs contiguous within each stream);
//   - the secondary's answers (applied/duplicate, 409 stale_epoch, conflict, gap);
//   - the primary's /publish answer, its dead-letter tombstone and the dump line.
//
// Payloads travel byte for byte: decoding validates the payload (as JSON, with
// the depth limit) and keeps its original text; encoding embeds that text. No
// number is re-printed and no key re-ordered. Decoding is strict, never throws
// for bad input, and returns errors as values naming the field and the problem.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace steadfast::envelope {

struct limits {
    std::size_t max_body_bytes = 1 << 20;
    std::size_t max_id_bytes = 256;
    std::size_t max_stream_bytes = 128;
    std::size_t max_batch = 10'000;
    std::size_t max_depth = 64;  // JSON nesting of one envelope, its own level included
};

struct message {
    std::string id;
    std::string stream;
    std::uint64_t seq = 0;
    std::uint64_t epoch = 0;
    std::string payload;  // the payload's JSON text, exactly as received
};

struct batch {
    std::vector<message> messages;
};

struct decode_error {
    std::string what;  // for the 400 answer: {"error": what}
};

using decoded = std::variant<message, batch>;

/// Why a JSON text could not be parsed.
struct json_error {
    std::string message;  // "JSON nested deeper than N levels", or the parser's (position, token)
    bool too_deep = false;
};

/// Parses one JSON value with a nesting limit (guarding memory and the
/// recursive destruction of deep documents). Never throws for bad input.
std::variant<nlohmann::json, json_error> parse_json(std::string_view text, std::size_t max_depth);

/// Decodes one envelope or a batch. Never throws for bad input. The depth
/// limit applies to each envelope (a batch's own two levels do not count), so
/// that a message accepted alone is accepted in a batch too.
std::variant<decoded, decode_error> decode(std::string_view body, const limits& l = {});

/// Appends one encoded envelope to `out`; `payload` is embedded as it is (it
/// must be valid JSON text). `id` is escaped; `stream` must be a valid name.
void encode_to(std::string& out, std::string_view id, std::string_view stream, std::uint64_t seq, std::uint64_t epoch,
               std::string_view payload);
/// The size encode_to() would append, without encoding (for limits).
std::size_t encoded_size(std::string_view id, std::string_view stream, std::uint64_t seq, std::uint64_t epoch,
                         std::size_t payload_bytes);
std::string encode(const message& m);
std::string encode(const batch& b);
/// The batch wrapper around already-encoded envelopes: prefix + e1 + "," + e2 ... + suffix.
inline constexpr std::string_view batch_prefix = "{\"messages\":[";
inline constexpr std::string_view batch_suffix = "]}";
/// A request body from already-encoded envelopes: `lists` are comma-joined
/// runs of them (one run per stream's batch), `count` envelopes in all. The
/// envelope itself when there is one, else a batch of them all.
std::string encode_body(const std::vector<std::string_view>& lists, std::size_t count);

/// Streams are names: 1 to max_stream_bytes of [A-Za-z0-9._-].
bool valid_stream_name(std::string_view s, const limits& l = {});

/// Checks a /publish body as a payload: one JSON value which, carried alone in
/// an envelope of `envelope_overhead` bytes (encoded_size with an empty
/// payload), a secondary with limits `l` would accept, and not one that
/// is_tombstone() takes for a dead letter's tombstone (that shape is the
/// primary's alone). On success, the payload text with surrounding
/// whitespace trimmed; else the status (400 or 413) and why.
struct payload_error {
    unsigned status = 400;
    std::string what;
};
std::variant<std::string_view, payload_error> check_payload(std::string_view body, std::size_t envelope_overhead,
                                                            const limits& l = {});

// ---- the secondary's answers ----

/// What the secondary did with a message it accepted: applied it now, or
/// found it applied already (the same id at that seq).
enum class apply_status : unsigned char { applied, duplicate };
/// "applied" or "duplicate", as the answers spell it.
std::string_view to_string(apply_status s) noexcept;

/// 200 bodies.
std::string encode_applied(apply_status status, std::uint64_t seq);  // {"status":..,"seq":N}
struct result_item {
    std::uint64_t seq = 0;
    apply_status status = apply_status::applied;
};
std::string encode_results(const std::vector<result_item>& items);  // {"results":[{"seq":N,"status":..},...]}

/// GET /api/streams?after=NAME&limit=N: a page of what the secondary holds,
/// each stream's last applied seq in name order (byte order), after `after`:
/// {"streams":[{"stream":S,"last_seq":N},...],"more":true|false}. A primary
/// compares it with what it had acknowledged when it reconnects, and resends
/// only to the streams the secondary lacks (one restored from an older copy).
struct stream_position {
    std::string stream;
    std::uint64_t last_seq = 0;
};
struct positions_page {
    std::vector<stream_position> streams;
    bool more = false;  // there are streams after the last one here
};
std::string encode(const positions_page& p);
/// nullopt: not such a page (an older secondary's 404 page, a proxy's).
std::optional<positions_page> decode_positions(std::string_view body);
/// The page size a secondary answers at most.
inline constexpr std::size_t max_positions_page = 10'000;

/// A 409 answer: what it says, in a form the primary decides on.
struct rejection {
    enum class kind { stale_epoch, conflict, gap, unknown };
    kind what = kind::unknown;
    std::string stream;
    std::uint64_t epoch = 0;     // stale_epoch: the highest epoch the secondary has seen
    std::uint64_t seq = 0;       // conflict: the seq applied with another id
    std::uint64_t expected = 0;  // gap: the next seq the secondary expects
};
std::string encode(const rejection& r);
/// Decodes a 409 body; kind::unknown when it is none of the three.
rejection decode_rejection(std::string_view body);
/// What a 4xx body says, read once: not a secondary's own refusal (no
/// {"error":"..."}), or one of a message, or one of the request's framing or
/// of the primary's epoch (below), which no message causes.
enum class refusal { not_an_error_answer, of_a_message, framing, epoch_step };
refusal classify_refusal(std::string_view body);
/// Whether a 4xx body is a secondary's own refusal, {"error":"..."}: a 400,
/// 413 or 422 without it comes from something else (a proxy, another
/// service at a wrong address), which says nothing of the message.
bool is_error_answer(std::string_view body);
/// Whether a 400's body says the request's HTTP framing could not be read,
/// {"error":"malformed HTTP request: ..."} (the transport server's answer
/// to a request Beast cannot parse): the link's fault, a proxy mangling
/// requests, never a message's.
bool is_framing_refusal(std::string_view body);
/// The secondary's 400 for a request with an epoch more than its
/// --max-epoch-step above its fence F (contract v3):
/// {"error":"epoch E is more than S above this secondary's epoch fence F ..."}.
std::string encode_epoch_step_refusal(std::uint64_t epoch, std::uint64_t step, std::uint64_t fence);
/// Whether a 400's body is that refusal: the primary's --epoch is wrong, not
/// the message, which is kept and sent again once the epoch is fixed.
bool is_epoch_step_refusal(std::string_view body);

// ---- the primary ----

/// The 202 answer of /publish.
std::string encode_published(std::string_view id, std::string_view stream, std::uint64_t seq);
/// The answer to a requeued dead letter: {"requeued":N,"id":..,"stream":..,"seq":..}.
std::string encode_requeued(std::int64_t n, std::string_view id, std::string_view stream, std::uint64_t seq);
/// The payload that takes a dead letter's place in its stream.
std::string encode_tombstone(std::string_view id, std::string_view reason);
/// Whether a payload is a tombstone made by encode_tombstone.
bool is_tombstone(std::string_view payload) noexcept;
/// One line of `steadfast-secondary dump` (with the trailing newline). The
/// payload is printed as stored, except that a line break between its tokens
/// (CR or LF: JSON whitespace, never inside a string) prints as a space, so
/// that every message is one line.
void encode_dump_line(std::string& out, std::string_view stream, std::uint64_t seq, std::string_view id,
                      std::string_view payload);

// ---- JetStream: a secondary asks the primary to resend what the log lost ----

/// A hole in the log: `stream` seqs from..to (inclusive) are missing from
/// what JetStream delivers, `consumer` saw it. Published by the secondary on
/// repair_subject(); the primary resends that range from its retention.
struct repair_request {
    std::string stream, consumer;
    std::uint64_t from = 0, to = 0;
};
/// The core NATS subject of repair requests for JetStream stream `js_stream`
/// (outside the stream's subjects: nothing of it is stored).
std::string repair_subject(std::string_view js_stream);
std::string encode(const repair_request& r);  // {"repair":{"stream":..,"from":N,"to":N,"consumer":..}}
/// nullopt, with `why` set, when the text is no valid repair request.
std::optional<repair_request> decode_repair_request(std::string_view body, std::string& why);

}  // namespace steadfast::envelope
