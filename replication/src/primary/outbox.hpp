// The primary's durable outbox (SQLite), used only on the database thread.
//
//   streams(stream, next_seq, acked_seq)            per-stream positions
//   outbox(stream, seq, id, payload, at_ms)         accepted messages; acknowledged
//                                                   ones are kept for --retain, to
//                                                   resend after a rewind
//   outbox_tail(n, stream, seq, id, payload, at_ms) the newest small messages, in
//                                                   arrival order, until folded into
//                                                   outbox (each message is in one
//                                                   of the two)
//   acks(stream, upto, from_ms, at_ms)              when they were acknowledged: one
//                                                   mark per stream and second
//   schedule(stream, attempts, next_at_ms, head_seq) durable redelivery of a stream's head
//   dead_letter(..., requeued_seq, requeued_ms)     messages given up on, kept; a
//                                                   requeue records its new seq
//   blocked(stream, reason, at_ms)                  streams stopped for a conflict or
//                                                   beyond retention (for status)
//
// Every method runs inside the database worker's transaction; nothing is
// cached across transactions, so a rolled-back commit leaves no trace (a
// failed publish takes no seq). (The tail's size is counted in memory, but
// only to decide when to fold: a count off after a rollback folds early or
// late, never loses a row.)
//
// Why a tail: `outbox` is keyed by stream and seq, so that a stream's
// messages are read in one range; but a commit of messages over N streams
// then writes N leaves (N pages to the log and to disk for a few hundred
// bytes of messages). The tail is keyed by arrival: a commit's small
// messages share one or two leaves, and a fold moves a few thousand of them
// into `outbox` at once, each stream's leaf written once for all of them.
// Payloads over tail_payload_max, and batches (--stdin's groups,
// primary_node's publish_batch), go to `outbox` directly: their own pages
// outweigh a leaf, and through the tail they would be written twice. Reads
// take both tables, merged by seq.
#pragma once

#include "../common/sqlite.hpp"
#include "ladder.hpp"

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace steadfast::primary {

struct published {
    std::string stream;
    std::uint64_t seq = 0;
    std::string id;
};

/// What a publish under a publisher's Idempotency-Key found (outbox::publish_once).
struct keyed_publish {
    enum class status {
        stored,    // the first time: stored as a new message
        replayed,  // the same key, stream and payload again: nothing stored, the first message's answer
        conflict,  // the same key with another stream or payload: refused
    };
    status what = status::stored;
    published p;  // stored: the new message; replayed and conflict: the key's first message
};

struct pending_message {
    std::uint64_t seq = 0;
    std::string id;
    std::string payload;     // JSON text, as published
    std::int64_t at_ms = 0;  // when it was accepted
};

struct stream_status {
    std::uint64_t next_seq = 1, acked_seq = 0, pending = 0;
};

struct dead_letter_row {
    std::int64_t n = 0;
    std::string stream, id, payload, reason;
    std::uint64_t seq = 0;
    std::int64_t at_ms = 0;
    std::optional<std::uint64_t> requeued_seq;  // requeued: the seq of the new message
    std::int64_t requeued_ms = 0;
};

struct requeue_result {
    enum class status { requeued, not_found, already } what = status::not_found;
    published p;  // requeued: the new message; already: its stream and seq
};

/// Dead letters after some n, in n order, and whether more follow.
struct dead_letter_page {
    std::vector<dead_letter_row> rows;
    bool more = false;
};

/// One dead letter as a JSON object on one line (its payload as stored, but
/// for line breaks between its tokens, which become spaces: a JSON text has
/// no other place for them): the line of `dead-letters` and an item of GET
/// /dead-letters.
std::string to_json(const dead_letter_row& d);

/// The outbox's own tables and indexes (beside `meta`, the database's):
/// an application's schema in the same file may not touch them.
inline const std::vector<std::string_view> own_tables{
    "streams",      "outbox",          "outbox_tail",         "acks", "schedule", "dead_letter", "blocked",
    "publish_keys", "publish_keys_at", "publish_keys_stream", "meta"};

class outbox {
public:
    explicit outbox(app::database& db);
    /// Makes the outbox's tables, or brings an older layout up to date
    /// (idempotent): before an application's schema runs beside them, so
    /// that it is checked against them on a fresh store as on an old one.
    static void prepare_tables(app::database& db);

    /// Payloads up to this size, published alone (tail_batch_max: HTTP's
    /// publishes, grouped or not, primary_node::async_publish), go to the tail; others to
    /// `outbox` directly: a batch fills its stream's leaf itself, and its
    /// rows are read back rather than handed to delivery (a read scans the
    /// tail).
    static constexpr std::size_t tail_payload_max = 2048, tail_batch_max = 1;
    /// The tail is folded into `outbox` once it holds this many messages or
    /// payload bytes (and at every purge).
    static constexpr std::size_t fold_rows = 2048, fold_bytes = 256 * 1024;

    /// A message id: unique across data directories (the instance), streams and seqs.
    static std::string make_id(std::string_view instance, std::string_view stream, std::uint64_t seq);

    /// Assigns seqs and ids and stores the messages (in the caller's
    /// transaction). `each_alone`: they were published one by one and only
    /// share a commit (publish_batcher): each goes where a publish alone goes.
    std::vector<published> publish(const std::vector<std::pair<std::string, std::string>>& stream_payloads,
                                   std::int64_t now_ms, bool each_alone = false);
    /// publish() of one message, remembered under `key` (a publisher's
    /// Idempotency-Key) until purge() drops it with its message (acknowledged
    /// before the cutoff). A publisher that lost an answer may send again
    /// without a second copy, however long the secondary is away.
    keyed_publish publish_once(const std::string& key, const std::string& stream, const std::string& payload,
                               std::int64_t now_ms);
    /// Up to `max_count` messages / `max_bytes` of payload after `after_seq`, in
    /// seq order; acknowledged ones still retained are included (for a rewind).
    std::vector<pending_message> pending(const std::string& stream, std::uint64_t after_seq, std::size_t max_count,
                                         std::size_t max_bytes);
    /// Marks messages up to `seq` acknowledged (kept until purge()), and ends
    /// the schedule if its head is at or below `head_acked` (the last
    /// acknowledgement's seq: below `seq` while a rewind resends).
    void acknowledge(const std::string& stream, std::uint64_t seq, std::uint64_t head_acked, std::int64_t now_ms);
    /// Deletes acknowledged messages acknowledged at or before `cutoff_ms`
    /// (the tail folded first; nothing while the tail cannot be folded, and
    /// after a failed fold the fold is tried at every tenth purge). Returns
    /// how many.
    std::uint64_t purge(std::int64_t cutoff_ms);
    /// Moves every message of the tail into `outbox`, in a savepoint of its
    /// own. Returns how many moved; nullopt when it failed: undone (the
    /// messages stay in the tail), logged (`fold_failed`), and tried again
    /// only after fold_rows messages or fold_bytes more. If SQLite rolled
    /// back the whole transaction under it (a full disk or temporary
    /// directory), SQLite's error is thrown instead, as any statement's.
    std::optional<std::uint64_t> fold();
    /// Folds that failed since the outbox was opened (from any thread).
    std::uint64_t fold_failures() const noexcept { return fold_failures_.load(std::memory_order_relaxed); }
    /// Each stream's last acknowledged seq, for streams acknowledged within
    /// --retain (those with an acknowledgement mark: their last acknowledged
    /// message is still kept). Reads only the marks, never the messages.
    std::map<std::string, std::uint64_t> recently_acknowledged();
    /// The lowest seq of the stream still in the outbox (acknowledged or not).
    std::optional<std::uint64_t> oldest_seq(const std::string& stream);
    /// Moves a message to the dead-letter table; it stays in the outbox with a
    /// tombstone payload so that the secondary's seqs stay contiguous.
    void dead_letter(const std::string& stream, const pending_message& m, const std::string& reason,
                     std::int64_t now_ms);
    schedule get_schedule(const std::string& stream);
    void set_schedule(const std::string& stream, const schedule& s);
    /// The stream delivers again: its ladder starts from the first step next time.
    void clear_schedule(const std::string& stream);
    void set_blocked(const std::string& stream, const std::string& reason, std::int64_t now_ms);
    /// Forgets every block (at start: a restart tries blocked streams again).
    void clear_blocked();

    /// One stream's positions (pending is not counted).
    stream_status position(const std::string& stream);
    std::map<std::string, stream_status> status();
    std::map<std::string, std::string> blocked();
    std::uint64_t dead_letter_count();
    std::vector<dead_letter_row> dead_letters();
    /// Those with n > `after`: at most `limit`, and no more once their
    /// payloads reach `max_bytes` (one at least, whatever its size).
    dead_letter_page dead_letters(std::int64_t after, std::size_t limit, std::size_t max_bytes);
    /// Publishes dead letter `n`'s payload again as a new message at the end
    /// of its stream (once: the dead letter records the new seq).
    requeue_result requeue(std::int64_t n, std::int64_t now_ms);
    const std::string& instance() const noexcept { return instance_; }

private:
    app::statement& stmt(std::optional<app::statement>& s, std::string_view sql);
    app::database& db_;
    std::string instance_;          // makes ids unique across data directories
    bool requeue_columns_ = false;  // dead_letter has requeued_seq (a database of this version)
    bool has_tail_ = false;         // outbox_tail exists (read-only, an older database may lack it)
    // The tail's size as this process wrote it: when to fold (see above).
    std::size_t tail_rows_ = 0, tail_bytes_ = 0, fold_at_rows_ = fold_rows, fold_at_bytes_ = fold_bytes;
    bool failing_ = false;                         // the last fold failed
    std::size_t purges_since_failure_ = 0;         // purge() tries again at every tenth
    std::atomic<std::uint64_t> fold_failures_{0};  // read by the metrics, on the event loop
    std::optional<app::statement> get_next_, put_stream_, insert_, insert_tail_, select_, select_tail_, ack_, ack_move_,
        ack_mark_, get_sched_, put_sched_, del_sched_, del_sched_acked_, dl_insert_, tombstone_, tombstone_tail_,
        purge_marks_, purge_, purge_done_, oldest_, oldest_tail_, put_blocked_, position_, get_key_, put_key_,
        purge_keys_, fold_move_, fold_clear_;
};

}  // namespace steadfast::primary
