// Stop conditions: when a failing retry gives up.
//
//   stop::max_attempts(5) || stop::max_elapsed(30s)   // whichever comes first
//   stop::max_attempts(3) && stop::max_elapsed(10s)   // only when both hold
//
// max_elapsed covers attempts and sleeps: a retry never sleeps past it, and an
// attempt's time left is bounded by it.
#pragma once

#include <steadfast/engine/error.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

namespace steadfast {

using std::chrono::nanoseconds;

class stop_condition {
public:
    /// Never stops (on its own; permanent errors, cancellation and budget still do).
    stop_condition();

    /// Checked after a retryable failure, before sleeping `next_delay`:
    /// `attempts` made so far, `elapsed` since the retry started.
    /// Returns the reason to stop, or nullopt to go on.
    std::optional<stop_reason> check(std::uint64_t attempts, nanoseconds elapsed, nanoseconds next_delay) const;

    /// The elapsed-time limit this condition enforces, if any.
    std::optional<nanoseconds> deadline() const;

    friend stop_condition operator||(stop_condition a, stop_condition b);
    friend stop_condition operator&&(stop_condition a, stop_condition b);

    struct node;

private:
    explicit stop_condition(std::shared_ptr<const node> n) : node_(std::move(n)) {}
    std::shared_ptr<const node> node_;
    friend struct stop;
};

struct stop {
    static stop_condition never();
    /// Gives up after `n` attempts in total (n >= 1; 1 means no retry).
    static stop_condition max_attempts(std::uint64_t n);
    /// Gives up when the next attempt would start at or after `d` since the start (d > 0).
    static stop_condition max_elapsed(nanoseconds d);
};

}  // namespace steadfast
