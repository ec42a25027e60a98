// What a circuit breaker is set up with, and what it reports: the types that
// circuit_breaker (breaker.hpp) and its decision core (detail/breaker_fsm.hpp)
// share. Nothing here includes Asio.
#pragma once

#include <steadfast/engine/classify.hpp>

#include <chrono>
#include <cstdint>
#include <functional>

namespace steadfast {

using std::chrono::nanoseconds;

/// closed: calls pass; open: calls are rejected until the break ends;
/// half_open: a bounded number of trial calls decide whether it closes;
/// isolated: opened by hand until reset().
enum class breaker_state : unsigned char { closed, open, half_open, isolated };
const char* to_string(breaker_state s) noexcept;

/// A state change, for hooks and metrics. Hooks run outside the breaker's
/// lock and may be told of two changes in either order: `generation` (1, 2,
/// ...: one more each change) orders them.
struct breaker_transition {
    breaker_state from, to;
    std::uint32_t generation = 0;
};

/// resilience4j's knobs, with its defaults, and Polly v8's break-duration
/// generator. A circuit_breaker refuses values out of range
/// (std::invalid_argument naming the field).
struct breaker_options {
    enum class window_kind : unsigned char { count, time };
    /// The sliding window: the last `window_size` calls (count) or the calls
    /// of the last `window_size` seconds (time, one-second buckets). Either
    /// keeps a running sum: a call costs the same whatever the size.
    window_kind window = window_kind::count;
    std::uint32_t window_size = 100;  // 1 to 1,000,000 (24 bytes a bucket, taken at construction)
    std::uint32_t minimum_calls =
        100;                    // calls in the window before a rate counts; >= 1 (a count window: at most its size)
    double failure_rate = 0.5;  // opens at or above (0 < r <= 1)
    double slow_rate = 1.0;     // opens at or above (0 < r <= 1)
    nanoseconds slow_call = std::chrono::seconds(60);  // a call this long or longer is slow (> 0)
    std::uint32_t consecutive_failures = 0;            // opens after this many in a row; 0: not used
    /// The n-th break in a row lasts break_duration(n) (n >= 1, back to 1
    /// once it closes): a generator may grow it while the service keeps
    /// failing (Polly v8's generator also sees the failure counts; this one
    /// sees n). Negative counts as zero; nanoseconds::max() is a break
    /// without end (until reset()). Empty: 60 s. It runs under the breaker's
    /// lock: it must not call the breaker.
    std::function<nanoseconds(std::uint32_t)> break_duration;
    std::uint32_t half_open_calls = 10;  // trial calls in half-open; >= 1
    /// resilience4j's maxWaitDurationInHalfOpenState: trials still out this
    /// long after the breaker went half-open open it again (seen at the next
    /// call or outcome; their outcomes then do not count). Zero (the
    /// default, as resilience4j's): wait for every trial. >= 0.
    nanoseconds half_open_max_wait{0};

    /// Which outcomes of a retry's attempts count as failures (the retry's
    /// own classification, shared). Empty: retryable ones (timeouts
    /// included); a permanent failure is the service answering, so it
    /// counts as a success, as resilience4j counts exceptions it does not
    /// record. Cancelled attempts are never counted.
    std::function<bool(const classification&)> is_failure;
    /// Called after every state change, on the thread that caused it (the
    /// one that recorded the outcome, asked for a permit or called isolate()
    /// or reset()), outside the breaker's lock; it must not throw (what it
    /// throws is dropped). An open
    /// breaker whose break is over moves to half-open at the next call's
    /// permit (state() already reads half-open).
    std::function<void(const breaker_transition&)> on_transition;
};

}  // namespace steadfast
