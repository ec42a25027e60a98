#include <steadfast/engine/detail/breaker_fsm.hpp>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace steadfast {

const char* to_string(breaker_state s) noexcept {
    switch (s) {
        case breaker_state::closed:
            return "closed";
        case breaker_state::open:
            return "open";
        case breaker_state::half_open:
            return "half_open";
        case breaker_state::isolated:
            return "isolated";
    }
    return "?";
}

}  // namespace steadfast

namespace steadfast::detail {

breaker_fsm::breaker_fsm(breaker_settings s) : s_(std::move(s)) {
    auto refuse = [](const char* what) { throw std::invalid_argument(std::string("circuit breaker: ") + what); };
    if (s_.window_size == 0) refuse("window_size must be at least 1");
    // (A bucket a call or a second: a larger window is a mistake, and would
    // take its size times 24 bytes at once.)
    if (s_.window_size > 1'000'000) refuse("window_size must be at most 1000000 (calls, or seconds: 11.5 days)");
    if (s_.minimum_calls == 0) refuse("minimum_calls must be at least 1");
    if (!(s_.failure_rate > 0 && s_.failure_rate <= 1)) refuse("failure_rate must be above 0 and at most 1");
    if (!(s_.slow_rate > 0 && s_.slow_rate <= 1)) refuse("slow_rate must be above 0 and at most 1");
    if (s_.slow_call <= nanoseconds::zero()) refuse("slow_call must be positive");
    if (s_.half_open_calls == 0) refuse("half_open_calls must be at least 1");
    if (s_.half_open_max_wait < nanoseconds::zero()) refuse("half_open_max_wait must not be negative");
    // As resilience4j: a count window never holds more than its size.
    if (s_.window == breaker_settings::window_kind::count)
        s_.minimum_calls = std::min(s_.minimum_calls, s_.window_size);
    ring_.resize(s_.window_size);
}

void breaker_fsm::clear() {
    std::fill(ring_.begin(), ring_.end(), bucket{});
    next_ = 0;
    total_ = {};
    last_second_ = -1;
    in_a_row_ = 0;
}

void breaker_fsm::add(nanoseconds now, bool failure, bool slow) {
    const counts one{1, failure ? 1u : 0u, slow ? 1u : 0u};
    if (s_.window == breaker_settings::window_kind::count) {
        bucket& b = ring_[next_];
        total_ -= b.c;
        b.c = one;
        total_ += one;
        if (++next_ == ring_.size()) next_ = 0;
        return;
    }
    const std::int64_t second = std::chrono::duration_cast<std::chrono::seconds>(now).count();
    // A call older than the window as of the latest second counted (a clock
    // that went back, not a steady one) counts for nothing: its bucket holds
    // a second still in the window.
    if (last_second_ >= 0 && second <= last_second_ - static_cast<std::int64_t>(ring_.size())) return;
    advance(second);
    bucket& b = ring_[static_cast<std::size_t>(second) % ring_.size()];
    if (b.second != second) {  // (emptied since, or another second's: its counts leave total_)
        total_ -= b.c;
        b = bucket{second, {}};
    }
    b.c += one;
    total_ += one;
}

// Time windows: the ring's sum moves to `second`. Each second that passes
// empties its bucket, which held a second `window_size` or more before it:
// the sum is kept as calls come, not added up at each (a one-day window is
// 86,400 buckets), and a quiet spell costs a bucket a second, at most the
// ring once.
void breaker_fsm::advance(std::int64_t second) {
    if (second <= last_second_) return;
    const auto size = static_cast<std::int64_t>(ring_.size());
    if (last_second_ >= 0 && second - last_second_ >= size) {
        std::fill(ring_.begin(), ring_.end(), bucket{});
        total_ = {};
    } else if (last_second_ >= 0) {
        for (std::int64_t t = last_second_ + 1; t <= second; ++t) {
            bucket& b = ring_[static_cast<std::size_t>(t % size)];
            total_ -= b.c;
            b = bucket{};
        }
    }
    last_second_ = second;
}

breaker_fsm::counts breaker_fsm::window(nanoseconds now) const {
    if (state(now) == breaker_state::half_open) return trials_;
    if (s_.window == breaker_settings::window_kind::count) return total_;
    // The buckets of the last window_size seconds, this one included: the
    // sum as of the last call, less what the seconds since have emptied.
    const std::int64_t second = std::chrono::duration_cast<std::chrono::seconds>(now).count();
    const auto size = static_cast<std::int64_t>(ring_.size());
    if (second >= last_second_) {
        if (last_second_ >= 0 && second - last_second_ >= size) return {};
        counts c = total_;
        for (std::int64_t t = last_second_ + 1; last_second_ >= 0 && t <= second; ++t)
            c -= ring_[static_cast<std::size_t>(t % size)].c;
        return c;
    }
    // A clock that went back (not a steady one): the buckets one by one.
    counts c;
    for (const auto& b : ring_) {
        if (b.second < 0 || b.second > second || b.second <= second - size) continue;
        c += b.c;
    }
    return c;
}

bool breaker_fsm::tripped(const counts& c, std::uint32_t minimum) const {
    // Both thresholds are above zero: a window without a failure or a slow
    // call trips neither (and costs no division).
    if (c.calls == 0 || c.calls < minimum || (c.failures == 0 && c.slow == 0)) return false;
    const double calls = c.calls;
    return c.failures / calls >= s_.failure_rate || c.slow / calls >= s_.slow_rate;
}

breaker_transition breaker_fsm::move(breaker_state to) {
    const breaker_transition t{state_, to};
    state_ = to;
    return t;
}

breaker_transition breaker_fsm::open(nanoseconds now) {
    ++openings_;
    nanoseconds d = s_.break_duration ? s_.break_duration(openings_) : nanoseconds(std::chrono::seconds(60));
    if (d < nanoseconds::zero()) d = nanoseconds::zero();
    // Saturating: a break of nanoseconds::max() never ends by itself.
    open_until_ = d > nanoseconds::max() - now ? nanoseconds::max() : now + d;
    trials_started_ = 0;
    trials_ = {};
    return move(breaker_state::open);
}

breaker_state breaker_fsm::state(nanoseconds now) const noexcept {
    if (state_ == breaker_state::open && now >= open_until_) return breaker_state::half_open;
    return state_;
}

bool breaker_fsm::try_acquire(lazy_time when, std::optional<breaker_transition>* changed) {
    if (state_ == breaker_state::closed) return true;  // (no time read)
    if (state_ == breaker_state::isolated) return false;
    const nanoseconds now = when.get();
    if (state_ == breaker_state::open) {
        if (now < open_until_) return false;
        trials_started_ = 0;
        trials_ = {};
        half_open_since_ = now;
        const auto t = move(breaker_state::half_open);
        if (changed) *changed = t;
    }
    // Half-open.
    if (half_open_expired(now)) {
        // Trials that never ended: open again (resilience4j's
        // maxWaitDurationInHalfOpenState); they are the past's now.
        const auto t = open(now);
        if (changed) *changed = t;
        return false;
    }
    if (trials_started_ >= s_.half_open_calls) return false;
    ++trials_started_;
    return true;
}

bool breaker_fsm::half_open_expired(nanoseconds now) const noexcept {
    return s_.half_open_max_wait > nanoseconds::zero() && now - half_open_since_ >= s_.half_open_max_wait;
}

void breaker_fsm::release() {
    if (state_ == breaker_state::half_open && trials_started_ > trials_.calls) --trials_started_;
}

std::optional<breaker_transition> breaker_fsm::record(lazy_time when, bool failure, nanoseconds took) {
    const bool slow = took >= s_.slow_call;
    if (state_ == breaker_state::closed) {
        // A count window reads no time (window() of a closed breaker with one
        // does not look at it) unless the breaker opens.
        const nanoseconds now = s_.window == breaker_settings::window_kind::count ? nanoseconds{} : when.get();
        add(now, failure, slow);
        in_a_row_ = failure ? in_a_row_ + 1 : 0;
        if ((s_.consecutive_failures > 0 && in_a_row_ >= s_.consecutive_failures) ||
            tripped(window(now), s_.minimum_calls))
            return open(when.get());
        return std::nullopt;
    }
    switch (state_) {
        case breaker_state::closed:
            return std::nullopt;  // (above)
        case breaker_state::half_open: {
            const nanoseconds now = when.get();
            if (half_open_expired(now)) return open(now);  // too late: the wait ran out first
            trials_ += counts{1, failure ? 1u : 0u, slow ? 1u : 0u};
            // Decided already: even if every other trial succeeds quickly,
            // the rate over all of them is at or above the threshold.
            const double all = s_.half_open_calls;
            if (trials_.failures / all >= s_.failure_rate || trials_.slow / all >= s_.slow_rate) return open(now);
            if (trials_.calls < s_.half_open_calls) return std::nullopt;
            clear();
            openings_ = 0;
            return move(breaker_state::closed);
        }
        case breaker_state::open:
        case breaker_state::isolated:
            // A call permitted before the breaker opened: its outcome is
            // the past's (as resilience4j, not counted).
            return std::nullopt;
    }
    return std::nullopt;
}

std::optional<breaker_transition> breaker_fsm::isolate(nanoseconds) {
    if (state_ == breaker_state::isolated) return std::nullopt;
    return move(breaker_state::isolated);
}

std::optional<breaker_transition> breaker_fsm::reset() {
    clear();
    openings_ = 0;
    trials_started_ = 0;
    trials_ = {};
    if (state_ == breaker_state::closed) return std::nullopt;
    return move(breaker_state::closed);
}

}  // namespace steadfast::detail
