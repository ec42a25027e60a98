// The decisions of concurrency_limit and rate_limit (steadfast/engine/
// limits.hpp), apart from locks, timers and handlers: who is let in, who
// waits (first come, first served, in a bounded queue), who is refused, and
// when a waiter's turn comes. Time is passed in (nanoseconds since any fixed
// origin), so every rule is tested on made-up times
// (test/unit/engine/limits.cpp). Nothing here includes Asio.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace steadfast::detail {

enum class admission : unsigned char {
    granted,   // in now
    queued,    // waits its turn (told later, or cancelled)
    rejected,  // the queue is full
};

/// A bulkhead: at most `limit` holders at once; up to `queue` callers wait
/// in arrival order. A caller that arrives while others wait queues behind
/// them even if a holder just left (no overtaking).
class bulkhead_core {
public:
    /// Throws std::invalid_argument for a zero limit.
    bulkhead_core(std::size_t limit, std::size_t queue);

    admission acquire(std::uint64_t id);
    /// Only when room is free and nobody waits (for try_acquire).
    bool try_acquire();
    /// A holder left: the waiter let in now, if any (it holds the place).
    std::optional<std::uint64_t> release();
    /// Removes a queued waiter (false: not queued: already let in, or unknown).
    bool cancel(std::uint64_t id);

    std::size_t in_use() const noexcept { return in_use_; }
    std::size_t waiting() const noexcept { return waiters_.size(); }
    std::size_t limit() const noexcept { return limit_; }
    /// Whether a caller arriving now would be let in at once.
    bool room() const noexcept { return in_use_ < limit_ && waiters_.empty(); }

private:
    std::size_t limit_, queue_, in_use_ = 0;
    std::deque<std::uint64_t> waiters_;
};

/// A token bucket: `per_second` tokens a second, at most `burst` saved up; a
/// call takes one. Up to `queue` callers wait in arrival order for theirs.
class token_bucket_core {
public:
    /// Throws std::invalid_argument for a rate that is not positive and
    /// finite, or a zero burst. Starts full at `now`.
    token_bucket_core(double per_second, std::uint32_t burst, std::size_t queue, std::chrono::nanoseconds now);

    admission acquire(std::uint64_t id, std::chrono::nanoseconds now);
    /// Only when a token is there and nobody waits.
    bool try_acquire(std::chrono::nanoseconds now);
    /// The waiters whose token has come by `now`, in order (they have it).
    std::vector<std::uint64_t> due(std::chrono::nanoseconds now);
    /// When the first waiter's token comes (nullopt: nobody waits).
    std::optional<std::chrono::nanoseconds> next_due() const;
    bool cancel(std::uint64_t id);

    /// Tokens saved up at `now` (fractions included).
    double tokens(std::chrono::nanoseconds now) const;
    std::size_t waiting() const noexcept { return waiters_.size(); }
    /// Whether a caller arriving at `now` would be let in at once.
    bool room(std::chrono::nanoseconds now) const { return waiters_.empty() && tokens(now) >= 1.0; }
    /// When room() turns true, if nobody else comes (now if it is true).
    std::chrono::nanoseconds room_at(std::chrono::nanoseconds now) const;

private:
    void refill(std::chrono::nanoseconds now);
    std::chrono::nanoseconds when(double tokens_needed) const;

    double rate_;  // tokens a nanosecond
    double burst_;
    std::size_t queue_;
    double tokens_;
    std::chrono::nanoseconds at_;  // when tokens_ was true
    std::deque<std::uint64_t> waiters_;
};

}  // namespace steadfast::detail
