#pragma once
#include <steadfast/engine/backoff.hpp>
#include <steadfast/engine/classify.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace steadfast {

namespace {
[[noreturn]] void invalid(const std::string& what) {
    throw std::invalid_argument("steadfast::backoff: " + what);
}

std::string str(nanoseconds d) {
    return std::to_string(d.count()) + "ns";
}

}  // namespace

nanoseconds random_between(nanoseconds lo, nanoseconds hi, std::uint64_t r) noexcept {
    if (hi <= lo) return lo;
    auto span = static_cast<std::uint64_t>(hi.count() - lo.count());
    if (span == std::numeric_limits<std::uint64_t>::max())
        return lo + nanoseconds(static_cast<nanoseconds::rep>(r >> 1));
    return lo + nanoseconds(static_cast<nanoseconds::rep>(r % (span + 1)));
}

backoff::backoff()
    : kind_(kind::exponential),
      jitter_(jitter::full),
      first_(std::chrono::milliseconds(100)),
      cap_(std::chrono::seconds(30)),
      multiplier_(2.0) {}

backoff::backoff(kind k, nanoseconds first, nanoseconds cap)
    : kind_(k), jitter_(jitter::none), first_(first), cap_(cap) {}

backoff backoff::fixed(nanoseconds d) {
    if (d.count() < 0) invalid("fixed delay must not be negative, got " + str(d));
    return backoff(kind::fixed, d, d);
}

backoff backoff::linear(nanoseconds initial, nanoseconds increment, nanoseconds cap) {
    if (initial.count() < 0) invalid("linear initial delay must not be negative, got " + str(initial));
    if (increment.count() < 0) invalid("linear increment must not be negative, got " + str(increment));
    if (cap < initial) invalid("linear cap " + str(cap) + " is below the initial delay " + str(initial));
    backoff b = fixed(initial);
    b.kind_ = kind::linear;
    b.step_ = increment;
    b.cap_ = cap;
    return b;
}

backoff backoff::exponential(nanoseconds initial, double multiplier, nanoseconds cap) {
    if (initial.count() <= 0) invalid("exponential initial delay must be positive, got " + str(initial));
    if (!(multiplier >= 1.0) || !std::isfinite(multiplier))
        invalid("exponential multiplier must be a finite number >= 1, got " + std::to_string(multiplier));
    if (cap < initial) invalid("exponential cap " + str(cap) + " is below the initial delay " + str(initial));
    backoff b = fixed(initial);
    b.kind_ = kind::exponential;
    b.multiplier_ = multiplier;
    b.cap_ = cap;
    return b;
}

backoff backoff::schedule(std::vector<nanoseconds> steps) {
    if (steps.empty()) invalid("a schedule needs at least one step");
    for (std::size_t i = 0; i < steps.size(); ++i)
        if (steps[i].count() < 0) invalid("schedule step " + std::to_string(i + 1) + " is negative");
    backoff b = fixed(steps.front());
    b.kind_ = kind::schedule;
    b.cap_ = *std::max_element(steps.begin(), steps.end());
    b.steps_ = std::make_shared<const std::vector<nanoseconds>>(std::move(steps));
    return b;
}

backoff backoff::schedule(std::string_view ladder) {
    std::vector<nanoseconds> steps;
    std::size_t i = 0;
    while (i < ladder.size()) {
        while (i < ladder.size() && (ladder[i] == ' ' || ladder[i] == ',' || ladder[i] == '\t')) ++i;
        std::size_t j = i;
        while (j < ladder.size() && ladder[j] != ' ' && ladder[j] != ',' && ladder[j] != '\t') ++j;
        if (j > i) steps.push_back(parse_duration(ladder.substr(i, j - i)));
        i = j;
    }
    if (steps.empty()) invalid("the schedule \"" + std::string(ladder) + "\" has no steps");
    return schedule(std::move(steps));
}

backoff backoff::rocketmq() {
    return schedule("10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h");
}

backoff backoff::rocketmq_delay_levels() {
    return schedule("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h");
}

backoff backoff::custom(std::function<nanoseconds(std::uint64_t, nanoseconds)> fn) {
    if (!fn) invalid("a custom backoff needs a function");
    return custom([fn = std::move(fn)](std::uint64_t n, nanoseconds previous, const previous_outcome&) {
        return fn(n, previous);
    });
}

backoff backoff::custom(std::function<nanoseconds(std::uint64_t, nanoseconds, const previous_outcome&)> fn) {
    if (!fn) invalid("a custom backoff needs a function");
    backoff b = fixed(nanoseconds(0));
    b.kind_ = kind::custom;
    b.cap_ = nanoseconds::max();
    b.fn_ = std::make_shared<const std::function<nanoseconds(std::uint64_t, nanoseconds, const previous_outcome&)>>(
        std::move(fn));
    return b;
}

backoff backoff::with_jitter(jitter j) const {
    backoff b = *this;
    b.jitter_ = j;
    return b;
}

nanoseconds backoff::base_delay(std::uint64_t n, nanoseconds previous, const previous_outcome* outcome) const {
    if (n == 0) n = 1;
    switch (kind_) {
        case kind::fixed:
            return first_;
        case kind::linear: {
            const std::uint64_t k = n - 1;  // compared unsigned: n may exceed the signed range
            if (step_.count() != 0 && k > static_cast<std::uint64_t>((cap_ - first_).count() / step_.count()))
                return cap_;
            return std::min(cap_, first_ + step_ * static_cast<nanoseconds::rep>(k));
        }
        case kind::exponential: {
            const double v = static_cast<double>(first_.count()) * std::pow(multiplier_, static_cast<double>(n - 1));
            if (!(v < static_cast<double>(cap_.count()))) return cap_;
            return std::min(cap_, nanoseconds(static_cast<nanoseconds::rep>(v)));
        }
        case kind::schedule:
            return (*steps_)[std::min<std::size_t>(n, steps_->size()) - 1];
        case kind::custom: {
            static const previous_outcome none;  // asked without an attempt (a ladder's plan)
            return std::max(nanoseconds(0), (*fn_)(n, previous, outcome ? *outcome : none));
        }
    }
    return first_;
}

nanoseconds backoff::delay(std::uint64_t n, nanoseconds previous, const std::function<std::uint64_t()>& draw) const {
    return delay(n, previous, draw, cap_);
}

nanoseconds backoff::delay(std::uint64_t n, nanoseconds previous, const std::function<std::uint64_t()>& draw,
                           nanoseconds max_base, const previous_outcome* outcome) const {
    // The base is clamped before jitter: clamping after would put most delays
    // exactly on the cap, and clients would retry in step again.
    const nanoseconds cap = std::min(cap_, max_base);
    auto base = [&] { return std::min(cap, base_delay(n, previous, outcome)); };
    switch (jitter_) {
        case jitter::none:
            return base();
        case jitter::full: {
            // The base first, then the draw (as for equal jitter): both may
            // run the caller's code, and as two arguments of one call their
            // order would be the compiler's.
            const nanoseconds b = base();
            return random_between(nanoseconds(0), b, draw());
        }
        case jitter::equal: {
            const nanoseconds half = base() / 2;
            return half + random_between(nanoseconds(0), half, draw());
        }
        case jitter::decorrelated: {
            const nanoseconds lo = std::min(first_, cap);
            const nanoseconds prev = n <= 1 ? lo : std::min(previous, cap);
            const nanoseconds hi = prev > nanoseconds::max() / 3 ? nanoseconds::max() : prev * 3;
            return std::min(cap, random_between(lo, std::max(lo, hi), draw()));
        }
    }
    return base();
}

nanoseconds parse_duration(std::string_view text) {
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == 0) invalid("duration \"" + std::string(text) + "\" must start with a number (such as 30s)");
    std::uint64_t v = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + digits, v);
    if (ec != std::errc()) invalid("duration \"" + std::string(text) + "\" is out of range");
    const std::string_view unit = text.substr(digits);
    std::uint64_t scale = 0;
    if (unit == "ms")
        scale = 1'000'000ull;
    else if (unit == "s")
        scale = 1'000'000'000ull;
    else if (unit == "m" || unit == "min")
        scale = 60'000'000'000ull;
    else if (unit == "h")
        scale = 3'600'000'000'000ull;
    else if (unit == "d")
        scale = 86'400'000'000'000ull;
    else
        invalid("duration \"" + std::string(text) +
                "\" needs a unit: ms, s, m, h or d, after a whole number (1500ms, not 1.5s; 90m, not 1h30m)");
    if (v > static_cast<std::uint64_t>(std::numeric_limits<nanoseconds::rep>::max()) / scale)
        invalid("duration \"" + std::string(text) + "\" is out of range");
    return nanoseconds(static_cast<nanoseconds::rep>(v * scale));
}

}  // namespace steadfast
