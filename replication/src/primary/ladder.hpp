// The durable redelivery ladder's arithmetic, as plain code: where a stream's
// head stands on the ladder (its schedule, kept in the outbox) and when it is
// tried next after another failure. No clock is read here: `now_ms` comes in.
#pragma once

#include <steadfast/engine/backoff.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace steadfast::primary {

// The durable retry state of a stream's head message.
struct schedule {
    std::uint32_t attempts = 0;   // ladder steps used on the head message
    std::int64_t next_at_ms = 0;  // not before this (0: now)
    std::uint64_t head_seq = 0;   // the head message's seq (0: not recorded, by an older version)
    /// Whether this is the ladder of the head message `seq`: one left for
    /// another head (acknowledged since, or above where a rewind went back
    /// to) is not; one of an older version (head_seq 0) is taken as its.
    bool is_for(std::uint64_t seq) const noexcept { return head_seq == 0 || head_seq == seq; }
};

/// The next durable attempt after the head `head_seq` failed again.
struct ladder_plan {
    schedule next;                       // to write to the outbox
    std::chrono::milliseconds delay{0};  // from now to next.next_at_ms
    // The secondary's Retry-After was longer than the ladder's last step and
    // was cut to it (a wrong clock or a hostile answer must not park a
    // stream for years): the caller says so.
    bool retry_after_bounded = false;
};

/// `current`: the schedule as read (another head's is started afresh). The
/// step is the ladder's `attempts`-th (its last repeating); never earlier
/// than `server_wait` (a Retry-After), never later than the last step.
/// `ladder` must have steps (backoff::schedule).
ladder_plan plan_next_step(schedule current, std::uint64_t head_seq, const backoff& ladder,
                           std::chrono::nanoseconds server_wait, std::int64_t now_ms);

/// What is wrong with a ladder as written ("1s, 10s, 1m"), nullopt when
/// nothing is: an empty step between commas (a typo, not a separator), what
/// backoff::schedule refuses, or a step under 100ms (a 0s step is a busy loop
/// writing a log line an attempt: the ladder is the slow, durable retry).
/// The daemon's --ladder and primary_config::ladder both use it.
std::optional<std::string> ladder_problem(const std::string& ladder);

}  // namespace steadfast::primary
