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

#include <steadfast/replication/envelope.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace steadfast::secondary {

/// The store's own tables (beside `meta`, the database's): an
/// application's schema in the same file may not touch them.
inline const std::vector<std::string_view> own_tables{"streams", "applied", "meta"};

class store {
public:
    explicit store(app::database& db);

    struct answer {
        unsigned status = 200;
        std::string body;
        std::string reject_reason;  // for metrics: stale_epoch, conflict, gap
        std::uint64_t applied = 0, duplicates = 0;
    };

    /// An application's handler of each message applied (not of duplicates),
    /// in order, inside the transaction that records it: its writes commit
    /// with the message's seq, or neither does. A throw undoes its writes
    /// and calls it again at once, `attempts` times in all; then the whole
    /// request fails (nothing of it stays; the primary sends it again).
    using apply_handler = std::function<void(sqlite3* db, const envelope::message& m)>;
    void set_apply_handler(apply_handler h, std::uint32_t attempts = 3) {
        apply_ = std::move(h);
        apply_attempts_ = attempts < 1 ? 1 : attempts;
    }

    /// From any thread: a request being applied, or applied from now on, is
    /// given up before its next message (db_error with db_abandoned; the
    /// caller's transaction keeps nothing of it). For a node being destroyed
    /// while a slow handler works through a batch.
    void abandon() noexcept { abandoned_.store(true, std::memory_order_relaxed); }

    /// Applies one envelope or a batch inside the caller's transaction.
    /// `keep` is set to false when nothing of it may stay (a 409).
    answer apply(const envelope::decoded& d, bool& keep);

    /// Raises the epoch fence to `epoch` (never lowers it), in the caller's
    /// transaction: a primary that took over said so in the log.
    void raise_fence(std::uint64_t epoch);

    /// The epoch fence: the highest epoch of any applied message.
    std::uint64_t fence();

    /// Sets the fence to `epoch`, lower or higher (the offline `set-fence`
    /// command, for a fence raised by mistake), in the caller's transaction.
    void set_fence(std::uint64_t epoch);

    /// Refuse (400) a message whose epoch is more than `step` above the fence;
    /// 0: no bound (the JetStream source, whose log only a primary writes).
    void set_max_epoch_step(std::uint64_t step) noexcept { max_epoch_step_ = step; }

    /// At most `limit` streams after `after` in name order, with their last
    /// applied seq; `more` when others follow (GET /api/streams).
    envelope::positions_page positions_after(std::string_view after, std::size_t limit);

    /// Each stream's last applied seq (for metrics).
    std::vector<std::pair<std::string, std::uint64_t>> last_applied();

private:
    // A stream's position while one envelope or batch is applied: read once,
    // written back once at the end (not one SELECT and one UPSERT a message).
    struct position {
        std::uint64_t last_seq = 0, max_epoch = 0;
        bool changed = false;
    };
    using positions = std::map<std::string_view, position, std::less<>>;
    position& position_of(positions& ps, std::string_view stream);
    std::optional<envelope::rejection> apply_one(const envelope::message& m, std::uint64_t& fence,
                                                 envelope::apply_status& status, positions& ps);
    app::statement& stmt(std::optional<app::statement>& s, std::string_view sql);
    void run_handler(const envelope::message& m);

    app::database& db_;
    apply_handler apply_;
    std::uint32_t apply_attempts_ = 3;
    std::atomic<bool> abandoned_{false};
    std::uint64_t max_epoch_step_ = 0;
    std::optional<app::statement> sel_page_, sel_stream_, sel_id_, ins_, up_stream_, get_fence_, put_fence_, sp_begin_,
        sp_release_;
};

}  // namespace steadfast::secondary
