// The primary's durable outbox (SQLite), used only on the database thread.
//
//   streams(stream, next_seq, acked_seq)      per-stream positions
//   outbox(stream, seq, id, payload, at_ms)   accepted, not yet acknowledged
//   schedule(stream, attempts, next_at_ms)    durable redelivery of a stream's head
//   dead_letter(...)                          messages given up on, kept
#pragma once

#include "../common/sqlite.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace steadfast::primary {

struct published {
    std::string stream;
    std::uint64_t seq = 0;
    std::string id;
};

struct pending_message {
    std::uint64_t seq = 0;
    std::string id;
    std::string payload;  // JSON text
    std::int64_t at_ms = 0;  // when it was accepted
};

struct schedule {
    std::uint32_t attempts = 0;   // ladder steps used on the head message
    std::int64_t next_at_ms = 0;  // not before this (0: now)
};

struct stream_status {
    std::uint64_t next_seq = 1, acked_seq = 0, pending = 0;
};

class outbox {
public:
    explicit outbox(app::database& db);

    /// Assigns seqs and ids and stores the messages (in the caller's transaction).
    std::vector<published> publish(const std::vector<std::pair<std::string, std::string>>& stream_payloads,
                                   std::int64_t now_ms);
    /// Up to `max_count` messages / `max_bytes` of payload after `after_seq`, in seq order.
    std::vector<pending_message> pending(const std::string& stream, std::uint64_t after_seq, std::size_t max_count,
                                         std::size_t max_bytes);
    /// Removes messages up to `seq` (acknowledged) and clears the schedule.
    void acknowledge(const std::string& stream, std::uint64_t seq);
    /// Moves a message to the dead-letter table; it stays in the outbox with a
    /// tombstone payload so that the secondary's seqs stay contiguous.
    void dead_letter(const std::string& stream, const pending_message& m, const std::string& reason, std::int64_t now_ms);
    schedule get_schedule(const std::string& stream);
    void set_schedule(const std::string& stream, const schedule& s);

    std::map<std::string, stream_status> status();
    std::uint64_t dead_letter_count();
    std::uint64_t pending_count();
    const std::string& instance() const noexcept { return instance_; }

private:
    app::statement& stmt(std::optional<app::statement>& s, std::string_view sql);
    app::database& db_;
    std::string instance_;  // makes ids unique across data directories
    std::map<std::string, std::uint64_t, std::less<>> next_seq_;
    std::optional<app::statement> get_next_, put_stream_, insert_, select_, delete_, ack_, get_sched_, put_sched_,
        del_sched_, dl_insert_, tombstone_;
};

}  // namespace steadfast::primary
