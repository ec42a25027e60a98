// The secondary's store (SQLite), used only on the database thread: applies
// envelopes per stream, in seq order, idempotently, behind one epoch fence.
//
//   streams(stream, last_seq, max_epoch)    per-stream position
//   applied(n, stream, seq, id, payload)    every applied message, in apply order
//   meta('epoch_fence')                     highest epoch of any applied message
//
// The decision for each message, in the contract's order: stale epoch, then
// conflict (an applied seq with another id), then gap. A batch applies
// atomically: the caller rolls back when the answer is a 409.
#pragma once

#include "../common/sqlite.hpp"

#include <steadfast/transport/envelope.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace steadfast::secondary {

class store {
public:
    explicit store(app::database& db);

    struct answer {
        unsigned status = 200;
        std::string body;
        std::string reject_reason;  // for metrics: stale_epoch, conflict, gap
        std::uint64_t applied = 0, duplicates = 0;
    };

    /// Applies one envelope or a batch inside the caller's transaction.
    /// `keep` is set to false when nothing of it may stay (a 409).
    answer apply(const envelope::decoded& d, bool& keep);

    /// A small write that tells whether the store can commit again.
    void touch();

private:
    std::optional<envelope::rejection> apply_one(const envelope::message& m, std::uint64_t& fence, std::string_view& status);
    app::statement& stmt(std::optional<app::statement>& s, std::string_view sql);

    app::database& db_;
    std::optional<app::statement> sel_stream_, sel_id_, ins_, up_stream_, get_fence_, put_fence_, touch_;
};

}  // namespace steadfast::secondary
