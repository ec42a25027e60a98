#pragma once
#include <steadfast/engine/detail/limit_core.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace steadfast::detail {

bulkhead_core::bulkhead_core(std::size_t limit, std::size_t queue) : limit_(limit), queue_(queue) {
    if (limit == 0) throw std::invalid_argument("concurrency_limit: limit must be at least 1");
}

admission bulkhead_core::acquire(std::uint64_t id) {
    if (room()) {
        ++in_use_;
        return admission::granted;
    }
    if (waiters_.size() >= queue_) return admission::rejected;
    waiters_.push_back(id);
    return admission::queued;
}

bool bulkhead_core::try_acquire() {
    if (!room()) return false;
    ++in_use_;
    return true;
}

std::optional<std::uint64_t> bulkhead_core::release() {
    if (in_use_ == 0) return std::nullopt;  // nothing held: a caller's mistake, not counted below zero
    if (!waiters_.empty()) {
        const std::uint64_t next = waiters_.front();  // takes the place over
        waiters_.pop_front();
        return next;
    }
    --in_use_;
    return std::nullopt;
}

bool bulkhead_core::cancel(std::uint64_t id) {
    const auto it = std::find(waiters_.begin(), waiters_.end(), id);
    if (it == waiters_.end()) return false;
    waiters_.erase(it);
    return true;
}

token_bucket_core::token_bucket_core(double per_second, std::uint32_t burst, std::size_t queue,
                                     std::chrono::nanoseconds now)
    : rate_(per_second / 1e9), burst_(burst), queue_(queue), tokens_(burst), at_(now) {
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
    if (waiters_.size() >= queue_) return admission::rejected;
    waiters_.push_back(id);
    return admission::queued;
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
        out.push_back(waiters_.front());
        waiters_.pop_front();
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
    const auto it = std::find(waiters_.begin(), waiters_.end(), id);
    if (it == waiters_.end()) return false;
    waiters_.erase(it);
    if (waiters_.empty()) tokens_ = std::min(tokens_, burst_);
    return true;
}

}  // namespace steadfast::detail
