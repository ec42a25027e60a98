// A stream's send window: the rows read from the outbox or handed over by
// their commit, waiting to be sent in order. What may join it, plain code
// without the database or the event loop (unit-tested), and the window itself
// (send_window), which the stream's machine (stream_fsm.hpp) owns.
#pragma once

#include "outbox.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string_view>
#include <vector>

namespace steadfast::primary::window {

/// What joins a window in memory at most: 1,000 rows of at most 4 KiB of
/// payload (4 MiB, as much as a read of the outbox holds by default:
/// node::read_window). Bigger payloads are read back from the outbox.
constexpr std::size_t in_memory_rows = 1000;
constexpr std::size_t in_memory_payload = 4096;

/// Whether `m`, just committed, joins a window holding `rows` that reaches seq
/// `end` (0: the window is not known, nothing joins until a read): only the
/// seq right after `end`, within the bounds above.
bool joins(const std::deque<pending_message>& rows, std::uint64_t end, const pending_message& m);

/// Of `rows`, read from the outbox after seq `after`, those the window
/// reaching `end` lacks. Commits answered while the read ran may have joined
/// the window meanwhile (the read saw them too): only the rows past `end`
/// are new, and only if they continue it. When all of them had joined,
/// nothing is read again even if the read was cut at its bound: a commit
/// that did not join marked the window for reading (more_maybe) itself.
struct fresh {
    std::size_t from = 0;     // rows[from..] continue the window (rows.size(): none)
    bool read_again = false;  // the outbox may hold rows the window still lacks
};
fresh fresh_rows(std::uint64_t end, std::uint64_t after, const std::vector<pending_message>& rows);

/// The next batch, moved out of the front of `rows`: at most `max` messages
/// and, by their exact encoded size in a batch envelope of `stream` and
/// `epoch`, at most `body_limit` bytes; a message too big to share a request
/// goes alone (never an empty batch while rows remain).
std::vector<pending_message> take_batch(std::deque<pending_message>& rows, std::size_t max, std::size_t body_limit,
                                        std::string_view stream, std::uint64_t epoch);

}  // namespace steadfast::primary::window

namespace steadfast::primary {

/// The rows after the window, read on the database thread while a batch is
/// in flight (shared with that job, which may finish after the window is
/// gone).
struct read_ahead {
    bool running = false;
    std::uint64_t gen = 0, after = 0;  // the window it continues
    std::vector<pending_message> rows;
    bool failed = false;
};

/// The window: its rows, where it reaches, whether the outbox may hold more,
/// and its read-ahead. Forgetting it (a failure, a rewind, a recheck) makes a
/// read or read-ahead still running for the old one count for nothing.
class send_window {
public:
    bool empty() const noexcept { return rows_.empty(); }
    std::size_t size() const noexcept { return rows_.size(); }
    const pending_message& front() const { return rows_.front(); }
    /// Everything committed was sent and acknowledged up to `acked`, and the
    /// outbox holds nothing the window lacks: nothing to read.
    bool settled(std::uint64_t acked) const noexcept;
    void forget() noexcept;
    /// The outbox may hold rows the window lacks (read before retiring).
    void more_maybe() noexcept { more_maybe_ = true; }
    /// A message committed: it joins when it continues the window (and the
    /// secondary is online), else the window is marked for reading.
    void committed(pending_message* one, bool online);

    /// A read of the window starts: nothing joins it meanwhile. Returns the
    /// generation the read is for.
    std::uint64_t begin_read() noexcept {
        end_ = 0;
        return gen_;
    }
    /// The window was not forgotten since begin_read() returned `gen`.
    bool current(std::uint64_t gen) const noexcept { return gen == gen_; }
    /// The read's rows (after `acked`) become the window.
    void read(std::uint64_t acked, std::vector<pending_message>& rows);
    /// A finished read-ahead joins the window, if it continues it.
    void take_read_ahead();
    /// The next batch (window::take_batch).
    std::vector<pending_message> take_batch(std::size_t max, std::size_t body_limit, std::string_view stream,
                                            std::uint64_t epoch) {
        return window::take_batch(rows_, max, body_limit, stream, epoch);
    }
    /// With fewer than `max` rows left and the outbox maybe holding more, sets
    /// up a read-ahead of the rows after the window (true: start it).
    bool start_read_ahead(std::size_t max);
    bool reading_ahead() const noexcept { return next_ && next_->running; }
    const std::shared_ptr<read_ahead>& read_ahead_slot() const noexcept { return next_; }

private:
    std::deque<pending_message> rows_;
    std::uint64_t end_ = 0;    // the seq the window (with the batch in flight) reaches (0: not known)
    std::uint64_t gen_ = 0;    // changes whenever the window is forgotten
    bool more_maybe_ = false;  // the outbox may hold rows after end_ that the window lacks
    std::shared_ptr<read_ahead> next_;
};

}  // namespace steadfast::primary
