// Retry budget: a token bucket shared by many retrying operations, so a failing
// dependency cannot set off a retry storm (the AWS SDK "standard" retry quota;
// gRPC's retry throttling is the same idea).
//
// Every retry takes `retry_cost` tokens (`timeout_cost` after a timeout); a
// success gives back what its retries took, or `success_refund` when it needed
// no retry. With too few tokens a retry stops with stop_reason::budget. First
// attempts are never refused. Thread-safe: share one budget across strands.
#pragma once

#include <atomic>
#include <cstdint>

namespace steadfast {

class retry_budget {
public:
    struct options {
        std::uint32_t capacity = 500;
        std::uint32_t retry_cost = 5;
        std::uint32_t timeout_cost = 10;
        std::uint32_t success_refund = 1;
    };

    retry_budget();
    /// Throws std::invalid_argument for a zero capacity or cost, or a cost above capacity.
    explicit retry_budget(options o);
    retry_budget(const retry_budget&) = delete;
    retry_budget& operator=(const retry_budget&) = delete;

    /// Takes `cost` tokens if that many are left.
    bool try_acquire(std::uint32_t cost) noexcept;
    /// Gives back up to `n` tokens (never above capacity).
    void release(std::uint32_t n) noexcept;
    std::uint32_t available() const noexcept { return tokens_.load(std::memory_order_relaxed); }
    const options& settings() const noexcept { return opts_; }

private:
    options opts_;
    std::atomic<std::uint32_t> tokens_;
};

}  // namespace steadfast
