// Backoff: how long to wait before retry number n.
//
// A backoff is a small immutable value type (cheap to copy: the variable-size
// parts are shared). It is pure: the delay depends only on the retry index, the
// previous delay and a random source, so it is unit-tested without timers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

namespace steadfast {

using std::chrono::nanoseconds;

class previous_outcome;  // the failed attempt's outcome (classify.hpp)

/// Jitter on top of the computed delay, as in the AWS Architecture Blog
/// "Exponential Backoff And Jitter":
///   none:          d
///   full:          random_between(0, d)
///   equal:         d/2 + random_between(0, d/2)
///   decorrelated:  min(cap, random_between(base, previous * 3)), previous starts at base
enum class jitter { none, full, equal, decorrelated };

/// Source of 64-bit random numbers. Must be callable from the retry's executor.
using random_source = std::function<std::uint64_t()>;

/// Uniformly random duration in [lo, hi] (lo <= hi) from one draw: lo + r % (hi - lo + 1).
nanoseconds random_between(nanoseconds lo, nanoseconds hi, std::uint64_t r) noexcept;

class backoff {
public:
    /// Default: exponential, 100 ms doubling to a 30 s cap, full jitter.
    backoff();

    /// Always `d` (zero is allowed: retry at once, yielding to the event loop).
    static backoff fixed(nanoseconds d);
    /// initial + increment * (n - 1), capped.
    static backoff linear(nanoseconds initial, nanoseconds increment, nanoseconds cap);
    /// initial * multiplier^(n - 1), capped. multiplier >= 1, initial > 0.
    static backoff exponential(nanoseconds initial, double multiplier, nanoseconds cap);
    /// Step n of `steps`; the last step repeats.
    static backoff schedule(std::vector<nanoseconds> steps);
    /// Parses a ladder such as "1s 5s 10s 30s 1m 2m 1h 2h" (units ms, s, m, h, d).
    /// Throws std::invalid_argument naming the bad token.
    static backoff schedule(std::string_view ladder);
    /// RocketMQ's consumer retry ladder: its 16 retries use delay levels 3 to 18,
    /// 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h (4 h 45 min 40 s in
    /// all); the last step repeats.
    static backoff rocketmq();
    /// RocketMQ's full table of delay levels (message delay, not retries):
    /// 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h.
    static backoff rocketmq_delay_levels();
    /// A user function of (retry index starting at 1, previous delay).
    static backoff custom(std::function<nanoseconds(std::uint64_t, nanoseconds)> fn);
    /// The same, also given the outcome of the attempt that just failed (its
    /// error, exception or returned value: a reply that says how long to wait).
    static backoff custom(std::function<nanoseconds(std::uint64_t, nanoseconds, const previous_outcome&)> fn);

    /// Returns a copy with the given jitter.
    backoff with_jitter(jitter j) const;

    /// The delay before retry `n` (1 = the wait after the first attempt).
    /// `previous` is the delay returned for n - 1 (ignored for n == 1);
    /// `draw` is called only when jitter needs a random number.
    nanoseconds delay(std::uint64_t n, nanoseconds previous, const std::function<std::uint64_t()>& draw) const;
    /// Same, with the base delay first clamped to `max_base` (then jittered
    /// within it), for a policy whose max delay is below this backoff's cap;
    /// `outcome` (if any) is what a custom function sees of the failed attempt.
    nanoseconds delay(std::uint64_t n, nanoseconds previous, const std::function<std::uint64_t()>& draw,
                      nanoseconds max_base, const previous_outcome* outcome = nullptr) const;
    /// Same without jitter (the deterministic base delay).
    nanoseconds base_delay(std::uint64_t n, nanoseconds previous, const previous_outcome* outcome = nullptr) const;

    jitter jitter_kind() const noexcept { return jitter_; }
    /// The number of steps of a schedule (0 for the other kinds).
    std::size_t steps() const noexcept { return steps_ ? steps_->size() : 0; }
    /// Smallest base delay (the first one) and the largest one (the cap).
    nanoseconds first() const noexcept { return first_; }
    nanoseconds cap() const noexcept { return cap_; }

private:
    enum class kind { fixed, linear, exponential, schedule, custom };
    backoff(kind k, nanoseconds first, nanoseconds cap);
    kind kind_ = kind::exponential;
    jitter jitter_ = jitter::none;
    nanoseconds first_{};
    nanoseconds step_{};  // linear increment
    nanoseconds cap_{};
    double multiplier_ = 2.0;
    std::shared_ptr<const std::vector<nanoseconds>> steps_;
    std::shared_ptr<const std::function<nanoseconds(std::uint64_t, nanoseconds, const previous_outcome&)>> fn_;
};

/// Parses one duration such as "250ms", "30s", "2m", "1h", "1d". Throws
/// std::invalid_argument with the token in the message.
nanoseconds parse_duration(std::string_view text);

}  // namespace steadfast
