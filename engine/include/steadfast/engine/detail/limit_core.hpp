// The decisions of concurrency_limit and rate_limit (steadfast/engine/
// limits.hpp: a token bucket or a sliding window), apart from locks, timers
// and handlers: who is let in, who waits (first come, first served, in a
// bounded queue), who is refused, and when a waiter's turn comes. Time is passed in (nanoseconds since any fixed
// origin), so every rule is tested on made-up times
// (test/unit/engine/limits.cpp). Nothing here includes Asio.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

namespace steadfast::detail {

enum class admission : unsigned char {
    granted,   // in now
    queued,    // waits its turn (told later, or cancelled)
    rejected,  // the queue is full
};

/// The callers that wait for their turn, in arrival order, at most
/// `bound` of them: the queue every limiter below keeps.
class waiting_line {
public:
    explicit waiting_line(std::size_t bound) : bound_(bound) {}

    /// queued, or rejected when `bound` callers wait already.
    admission join(std::uint64_t id);
    /// Takes a waiter out (false: not waiting: let in already, or unknown).
    bool leave(std::uint64_t id);
    /// The first waiter, taken out (the line must not be empty).
    std::uint64_t take_first();

    bool empty() const noexcept { return ids_.empty(); }
    std::size_t size() const noexcept { return ids_.size(); }

private:
    std::size_t bound_;
    std::deque<std::uint64_t> ids_;
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
    std::size_t limit_, in_use_ = 0;
    waiting_line waiters_;
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
    double tokens_;
    std::chrono::nanoseconds at_;  // when tokens_ was true
    waiting_line waiters_;
};

/// A sliding window (as System.Threading.RateLimiting's
/// SlidingWindowRateLimiter counts): time goes in steps of window/segments
/// (rounded down to whole nanoseconds, from the time the core was made), and
/// the calls of any `segments` steps in a row are at most `limit`: a step's
/// calls give their room back `segments` steps after theirs. So any stretch
/// of `window` less one step holds at most `limit` calls, at any offset (a
/// whole window, not aligned to the steps, up to twice that if the calls
/// come at its two edges); more segments follow the true sliding window more
/// closely, fewer keep less state. Up to `queue` callers wait in arrival
/// order for room.
class sliding_window_core {
public:
    /// Throws std::invalid_argument, naming the setting, for a zero limit,
    /// segments not from 1 to 1000, a window that is not positive or longer
    /// than a year, or a window shorter than one nanosecond a segment.
    sliding_window_core(std::uint32_t limit, std::chrono::nanoseconds window, std::uint32_t segments, std::size_t queue,
                        std::chrono::nanoseconds now);

    admission acquire(std::uint64_t id, std::chrono::nanoseconds now);
    /// Only when there is room and nobody waits.
    bool try_acquire(std::chrono::nanoseconds now);
    /// The waiters let in by `now`, in order (they count in the window).
    std::vector<std::uint64_t> due(std::chrono::nanoseconds now);
    /// When the first waiter's room comes: the end of the step whose calls
    /// leave the window first, or a time already past if the window has
    /// room (nullopt: nobody waits).
    std::optional<std::chrono::nanoseconds> next_due() const;
    bool cancel(std::uint64_t id);

    /// Calls that would be let in at `now` (the limit less the window's).
    double tokens(std::chrono::nanoseconds now) const;
    std::size_t waiting() const noexcept { return waiters_.size(); }
    bool room(std::chrono::nanoseconds now) const { return waiters_.empty() && tokens(now) >= 1.0; }
    /// When room() turns true, if nobody else comes (now if it is true; with
    /// callers waiting, when the first of them is let in: a later time is
    /// told by letting them in).
    std::chrono::nanoseconds room_at(std::chrono::nanoseconds now) const;

private:
    std::int64_t step_of(std::chrono::nanoseconds now) const noexcept;
    void advance(std::chrono::nanoseconds now);
    // Calls in the window at `now`, without moving it.
    std::uint64_t in_window(std::chrono::nanoseconds now) const;
    // When the oldest step with calls leaves the window (nullopt: none).
    std::optional<std::chrono::nanoseconds> next_release() const;

    std::uint64_t limit_;
    std::chrono::nanoseconds origin_, step_;
    std::vector<std::uint32_t> counts_;  // calls of step k at [k % segments]
    std::int64_t step_now_ = 0;          // the latest step counted in
    std::uint64_t sum_ = 0;              // the window's calls as of step_now_
    waiting_line waiters_;
};

/// rate_limit's decisions: a token bucket or a sliding window, chosen when
/// it is made.
class rate_core {
public:
    explicit rate_core(token_bucket_core c) : c_(std::move(c)) {}
    explicit rate_core(sliding_window_core c) : c_(std::move(c)) {}

    admission acquire(std::uint64_t id, std::chrono::nanoseconds now) {
        return std::visit([&](auto& c) { return c.acquire(id, now); }, c_);
    }
    bool try_acquire(std::chrono::nanoseconds now) {
        return std::visit([&](auto& c) { return c.try_acquire(now); }, c_);
    }
    std::vector<std::uint64_t> due(std::chrono::nanoseconds now) {
        return std::visit([&](auto& c) { return c.due(now); }, c_);
    }
    std::optional<std::chrono::nanoseconds> next_due() const {
        return std::visit([](const auto& c) { return c.next_due(); }, c_);
    }
    bool cancel(std::uint64_t id) {
        return std::visit([&](auto& c) { return c.cancel(id); }, c_);
    }
    double tokens(std::chrono::nanoseconds now) const {
        return std::visit([&](const auto& c) { return c.tokens(now); }, c_);
    }
    std::size_t waiting() const noexcept {
        return std::visit([](const auto& c) { return c.waiting(); }, c_);
    }
    bool room(std::chrono::nanoseconds now) const {
        return std::visit([&](const auto& c) { return c.room(now); }, c_);
    }
    std::chrono::nanoseconds room_at(std::chrono::nanoseconds now) const {
        return std::visit([&](const auto& c) { return c.room_at(now); }, c_);
    }

private:
    std::variant<token_bucket_core, sliding_window_core> c_;
};

}  // namespace steadfast::detail
