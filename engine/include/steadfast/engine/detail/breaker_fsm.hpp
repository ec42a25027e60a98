// breaker_fsm: a circuit breaker's decisions, apart from I/O and clocks.
// circuit_breaker (steadfast/engine/breaker.hpp) wraps it with a lock, a
// clock, hooks, counters and a condition.
//
// In the style of retry_fsm: the owner asks before each call whether it may
// start (try_acquire), tells the outcome when it ends (record, or release for
// a call that ended without one: cancelled), and reads the state; time is
// passed in (nanoseconds since any fixed origin), so that every rule is
// tested on made-up times (test/unit/engine/breaker.cpp). Nothing here
// includes Asio.
//
// The rules, as resilience4j and Polly v8 document them:
// - closed: every call is permitted. Outcomes go to a sliding window, by
//   count (the last N calls) or by time (the calls of the last N seconds, in
//   one-second buckets). Once the window holds at least `minimum_calls`, the
//   breaker opens when the failure rate, or the slow-call rate (calls that
//   took at least `slow_call`), is at or above its threshold. It also opens
//   after `consecutive_failures` failures in a row (0: not used), whatever
//   the window holds.
// - open: every call is rejected until the break ends: `break_duration(n)`
//   for the n-th opening in a row (1, 2, ...: a generator can grow it while
//   the service keeps failing; n starts again at 1 once the breaker closes).
// - half-open (the break over, seen at the next call or state read):
//   `half_open_calls` trial calls are permitted, no more at once; when they
//   have all ended, their failure and slow-call rates against the same
//   thresholds open it again (the next break) or close it (a fresh window).
//   A failure among them that already decides it (the rest cannot bring the
//   rate under the threshold) opens it at once. With `half_open_max_wait`,
//   trials still out after that long open it again (at the next call or
//   outcome).
// - isolated: opened by hand until reset(); reset() closes it with a fresh
//   window from any state.
#pragma once

#include <steadfast/engine/breaker_options.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <type_traits>
#include <vector>

namespace steadfast::detail {

using nanoseconds = std::chrono::nanoseconds;
using breaker_state = steadfast::breaker_state;
using breaker_transition = steadfast::breaker_transition;
using breaker_settings = steadfast::breaker_options;

/// The time for one decision, read only if the decision needs it: a closed
/// breaker needs none to permit a call, and with a count window none to
/// count an outcome unless it opens (a clock read costs as much as the rest
/// of a closed breaker's work). A time, or a callable that reads it (kept
/// by reference: it must outlive the call).
class lazy_time {
public:
    template <class Rep, class Period>
    lazy_time(std::chrono::duration<Rep, Period> t) : t_(t) {}  // (implicit: a time already read)
    template <class Read>
    requires std::is_invocable_r_v<nanoseconds, const Read&>
    explicit lazy_time(const Read& read)
        : read_([](const void* r) -> nanoseconds { return (*static_cast<const Read*>(r))(); }), arg_(&read) {}
    // Not from a temporary: it would be gone before get() reads it.
    template <class Read>
    requires(!std::is_lvalue_reference_v<Read> &&
             std::is_invocable_r_v<nanoseconds, const Read&>) explicit lazy_time(Read&&) = delete;

    /// The time: read at the first call, the same at every later one.
    nanoseconds get() {
        if (read_) {
            t_ = read_(arg_);
            read_ = nullptr;
        }
        return t_;
    }

private:
    nanoseconds t_{};
    nanoseconds (*read_)(const void*) = nullptr;
    const void* arg_ = nullptr;
};

class breaker_fsm {
public:
    /// Throws std::invalid_argument naming a setting out of range.
    explicit breaker_fsm(breaker_settings s);

    /// Whether a call may start at `now` (a half-open trial takes a permit).
    /// `changed`: set when asking moved the state (open -> half-open).
    bool try_acquire(lazy_time now, std::optional<breaker_transition>* changed = nullptr);
    /// A permitted call ended at `now` after `took`: a failure or not.
    std::optional<breaker_transition> record(lazy_time now, bool failure, nanoseconds took);
    /// A permitted call ended without an outcome (cancelled): its half-open
    /// permit is given back, nothing is counted.
    void release();

    /// Opened by hand until reset().
    std::optional<breaker_transition> isolate(nanoseconds now);
    /// Closed, with a fresh window and no consecutive count, from any state.
    std::optional<breaker_transition> reset();

    /// The state at `now` (an open breaker whose break is over reads
    /// half-open; the move happens at the next try_acquire).
    breaker_state state(nanoseconds now) const noexcept;
    /// When the current break ends (open only).
    nanoseconds open_until() const noexcept { return open_until_; }
    /// The settings as validated (a count window's minimum clamped).
    const breaker_settings& settings() const noexcept { return s_; }
    /// Breaks in a row (0 while closed).
    std::uint32_t openings() const noexcept { return openings_; }

    /// The window's counts now (closed), or the trials' (half-open).
    struct counts {
        std::uint32_t calls = 0, failures = 0, slow = 0;
        counts& operator+=(const counts& o) noexcept {
            calls += o.calls;
            failures += o.failures;
            slow += o.slow;
            return *this;
        }
        counts& operator-=(const counts& o) noexcept {
            calls -= o.calls;
            failures -= o.failures;
            slow -= o.slow;
            return *this;
        }
    };
    counts window(nanoseconds now) const;

private:
    struct bucket {
        std::int64_t second = -1;  // time windows: the second it counts
        counts c;
    };
    void clear();
    void add(nanoseconds now, bool failure, bool slow);
    void advance(std::int64_t second);
    bool tripped(const counts& c, std::uint32_t minimum) const;
    breaker_transition open(nanoseconds now);
    breaker_transition move(breaker_state to);
    bool half_open_expired(nanoseconds now) const noexcept;

    breaker_settings s_;
    breaker_state state_ = breaker_state::closed;
    std::vector<bucket> ring_;       // count: one a call (its outcome); time: one a second
    std::size_t next_ = 0;           // count windows: where the next call goes
    counts total_;                   // the ring's sum (time windows: as of last_second_)
    std::int64_t last_second_ = -1;  // time windows: the latest second counted (-1: none)
    std::uint32_t in_a_row_ = 0;
    std::uint32_t openings_ = 0;
    nanoseconds open_until_{};
    // Half-open: permits taken, and the trials' outcomes.
    std::uint32_t trials_started_ = 0;
    counts trials_;
    nanoseconds half_open_since_{};
};

}  // namespace steadfast::detail
