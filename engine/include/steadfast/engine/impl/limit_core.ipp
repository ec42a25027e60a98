#pragma once
#include <steadfast/engine/detail/limit_core.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace steadfast::detail {

admission waiting_line::join(std::uint64_t id) {
    if (ids_.size() >= bound_) return admission::rejected;
    ids_.push_back(id);
    return admission::queued;
}

bool waiting_line::leave(std::uint64_t id) {
    const auto it = std::find(ids_.begin(), ids_.end(), id);
    if (it == ids_.end()) return false;
    ids_.erase(it);
    return true;
}

std::uint64_t waiting_line::take_first() {
    const std::uint64_t id = ids_.front();
    ids_.pop_front();
    return id;
}

bulkhead_core::bulkhead_core(std::size_t limit, std::size_t queue) : limit_(limit), waiters_(queue) {
    if (limit == 0) throw std::invalid_argument("concurrency_limit: limit must be at least 1");
}

admission bulkhead_core::acquire(std::uint64_t id) {
    if (room()) {
        ++in_use_;
        return admission::granted;
    }
    return waiters_.join(id);
}

bool bulkhead_core::try_acquire() {
    if (!room()) return false;
    ++in_use_;
    return true;
}

std::optional<std::uint64_t> bulkhead_core::release() {
    if (in_use_ == 0) return std::nullopt;                // nothing held: a caller's mistake, not counted below zero
    if (!waiters_.empty()) return waiters_.take_first();  // takes the place over
    --in_use_;
    return std::nullopt;
}

bool bulkhead_core::cancel(std::uint64_t id) {
    return waiters_.leave(id);
}

token_bucket_core::token_bucket_core(double per_second, std::uint32_t burst, std::size_t queue,
                                     std::chrono::nanoseconds now)
    : rate_(per_second / 1e9), burst_(burst), tokens_(burst), at_(now), waiters_(queue) {
    if (!(per_second > 0) || !std::isfinite(per_second))
        throw std::invalid_argument("rate_limit: per_second must be positive and finite");
    if (burst == 0) throw std::invalid_argument("rate_limit: burst must be at least 1");
}

double token_bucket_core::tokens(std::chrono::nanoseconds now) const {
    if (now <= at_) return tokens_;
    const double grown = tokens_ + static_cast<double>((now - at_).count()) * rate_;
    // While callers wait, what came in is theirs (a timer that fires late
    // must not cost them tokens): the burst caps what is left after them.
    return waiters_.empty() ? std::min(burst_, grown) : grown;
}

void token_bucket_core::refill(std::chrono::nanoseconds now) {
    if (now <= at_) return;
    tokens_ = tokens(now);
    at_ = now;
}

std::chrono::nanoseconds token_bucket_core::when(double tokens_needed) const {
    // The first nanosecond at which tokens_ has grown to tokens_needed,
    // saturating (a tiny rate or a long queue: far enough to be never).
    const double missing = tokens_needed - tokens_;
    if (missing <= 0) return at_;
    const double ns = std::ceil(missing / rate_);
    const double room = static_cast<double>((std::chrono::nanoseconds::max() - at_).count());
    if (!(ns < room)) return std::chrono::nanoseconds::max();
    return at_ + std::chrono::nanoseconds(static_cast<std::int64_t>(ns));
}

admission token_bucket_core::acquire(std::uint64_t id, std::chrono::nanoseconds now) {
    if (try_acquire(now)) return admission::granted;
    return waiters_.join(id);
}

bool token_bucket_core::try_acquire(std::chrono::nanoseconds now) {
    refill(now);
    if (!waiters_.empty() || tokens_ < 1.0) return false;
    tokens_ -= 1.0;
    return true;
}

std::vector<std::uint64_t> token_bucket_core::due(std::chrono::nanoseconds now) {
    refill(now);
    std::vector<std::uint64_t> out;
    while (!waiters_.empty() && tokens_ >= 1.0) {
        tokens_ -= 1.0;
        out.push_back(waiters_.take_first());
    }
    if (waiters_.empty()) tokens_ = std::min(tokens_, burst_);
    return out;
}

std::optional<std::chrono::nanoseconds> token_bucket_core::next_due() const {
    if (waiters_.empty()) return std::nullopt;
    return when(1.0);
}

std::chrono::nanoseconds token_bucket_core::room_at(std::chrono::nanoseconds now) const {
    // Every waiter takes a token first: room comes with the one after theirs.
    const auto t = when(static_cast<double>(waiters_.size()) + 1.0);
    return std::max(t, now);
}

bool token_bucket_core::cancel(std::uint64_t id) {
    if (!waiters_.leave(id)) return false;
    if (waiters_.empty()) tokens_ = std::min(tokens_, burst_);
    return true;
}

sliding_window_core::sliding_window_core(std::uint32_t limit, std::chrono::nanoseconds window, std::uint32_t segments,
                                         std::size_t queue, std::chrono::nanoseconds now)
    : limit_(limit), origin_(now), step_(0), waiters_(queue) {
    if (limit == 0) throw std::invalid_argument("rate_limit: limit must be at least 1");
    if (segments == 0 || segments > 1000) throw std::invalid_argument("rate_limit: segments must be 1 to 1000");
    if (window <= std::chrono::nanoseconds::zero() || window > std::chrono::hours(24 * 366))
        throw std::invalid_argument("rate_limit: window must be positive and at most a year");
    step_ = window / segments;
    if (step_ <= std::chrono::nanoseconds::zero())
        throw std::invalid_argument("rate_limit: window must be at least one nanosecond a segment");
    counts_.assign(segments, 0);
}

std::int64_t sliding_window_core::step_of(std::chrono::nanoseconds now) const noexcept {
    // A clock that went back counts in the step it left (never an earlier one).
    return now <= origin_ ? step_now_ : std::max<std::int64_t>((now - origin_) / step_, step_now_);
}

void sliding_window_core::advance(std::chrono::nanoseconds now) {
    const std::int64_t k = step_of(now);
    if (k == step_now_) return;
    const std::int64_t n = static_cast<std::int64_t>(counts_.size());
    // The steps from step_now_ + 1 to k begin: each takes the place of the
    // one `segments` before it, whose calls leave the window.
    for (std::int64_t j = step_now_ + 1, last = std::min(k, step_now_ + n); j <= last; ++j) {
        std::uint32_t& c = counts_[static_cast<std::size_t>(j % n)];
        sum_ -= c;
        c = 0;
    }
    step_now_ = k;
}

std::uint64_t sliding_window_core::in_window(std::chrono::nanoseconds now) const {
    const std::int64_t k = step_of(now), n = static_cast<std::int64_t>(counts_.size());
    std::uint64_t sum = sum_;
    // The steps that have left the window since step_now_.
    for (std::int64_t j = step_now_ + 1 - n, last = std::min(k - n, step_now_); j <= last; ++j)
        if (j >= 0) sum -= counts_[static_cast<std::size_t>(j % n)];
    return sum;
}

double sliding_window_core::tokens(std::chrono::nanoseconds now) const {
    const std::uint64_t used = in_window(now);
    return used >= limit_ ? 0.0 : static_cast<double>(limit_ - used);
}

admission sliding_window_core::acquire(std::uint64_t id, std::chrono::nanoseconds now) {
    if (try_acquire(now)) return admission::granted;
    return waiters_.join(id);
}

bool sliding_window_core::try_acquire(std::chrono::nanoseconds now) {
    advance(now);
    if (!waiters_.empty() || sum_ >= limit_) return false;
    ++counts_[static_cast<std::size_t>(step_now_ % static_cast<std::int64_t>(counts_.size()))];
    ++sum_;
    return true;
}

std::vector<std::uint64_t> sliding_window_core::due(std::chrono::nanoseconds now) {
    advance(now);
    std::vector<std::uint64_t> out;
    std::uint32_t& c = counts_[static_cast<std::size_t>(step_now_ % static_cast<std::int64_t>(counts_.size()))];
    while (!waiters_.empty() && sum_ < limit_) {
        ++c;
        ++sum_;
        out.push_back(waiters_.take_first());
    }
    return out;
}

std::optional<std::chrono::nanoseconds> sliding_window_core::next_release() const {
    const std::int64_t n = static_cast<std::int64_t>(counts_.size());
    for (std::int64_t j = std::max<std::int64_t>(0, step_now_ + 1 - n); j <= step_now_; ++j)
        if (counts_[static_cast<std::size_t>(j % n)] > 0) return origin_ + (j + n) * step_;
    return std::nullopt;
}

std::optional<std::chrono::nanoseconds> sliding_window_core::next_due() const {
    if (waiters_.empty()) return std::nullopt;
    // Room already (a newcomer's try_acquire moved the window on, and queued
    // behind the waiters): their turn is now, not at the next release.
    if (sum_ < limit_) return origin_ + step_now_ * step_;
    return next_release();
}

std::chrono::nanoseconds sliding_window_core::room_at(std::chrono::nanoseconds now) const {
    if (room(now)) return now;
    if (!waiters_.empty()) return std::max(now, next_release().value_or(now));
    // The first end of a step after which a call fits: scanned from the
    // window as of `now` (steps that have left it by then free nothing more).
    const std::int64_t k = step_of(now), n = static_cast<std::int64_t>(counts_.size());
    std::uint64_t used = in_window(now);
    for (std::int64_t j = std::max<std::int64_t>(0, k + 1 - n); j <= step_now_; ++j) {
        used -= std::min<std::uint64_t>(used, counts_[static_cast<std::size_t>(j % n)]);
        if (used < limit_) return std::max(now, origin_ + (j + n) * step_);
    }
    return now;  // (nothing in the window: room already, unless callers wait)
}

bool sliding_window_core::cancel(std::uint64_t id) {
    return waiters_.leave(id);
}

}  // namespace steadfast::detail
