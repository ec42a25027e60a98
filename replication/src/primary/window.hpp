// A stream's send window: the rows read from the outbox or handed over by
// their commit, waiting to be sent in order. What may join it, plain code
// without the database or the event loop (unit-tested); node (delivery.cpp,
// intake.cpp) keeps the window and carries these out.
#pragma once

#include "outbox.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
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
