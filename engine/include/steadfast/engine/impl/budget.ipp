#pragma once
#include <steadfast/engine/budget.hpp>

#include <algorithm>
#include <stdexcept>

namespace steadfast {

retry_budget::retry_budget() : retry_budget(options{}) {}

retry_budget::retry_budget(options o) : opts_(o), tokens_(o.capacity) {
    if (o.capacity == 0) throw std::invalid_argument("steadfast::retry_budget: capacity must be at least 1");
    if (o.retry_cost == 0 || o.timeout_cost == 0)
        throw std::invalid_argument("steadfast::retry_budget: retry and timeout costs must be at least 1");
    if (o.retry_cost > o.capacity || o.timeout_cost > o.capacity)
        throw std::invalid_argument("steadfast::retry_budget: a cost above the capacity would refuse every retry");
}

bool retry_budget::try_acquire(std::uint32_t cost) noexcept {
    auto cur = tokens_.load(std::memory_order_relaxed);
    do {
        if (cur < cost) return false;
    } while (!tokens_.compare_exchange_weak(cur, cur - cost, std::memory_order_relaxed));
    return true;
}

void retry_budget::release(std::uint32_t n) noexcept {
    auto cur = tokens_.load(std::memory_order_relaxed);
    std::uint32_t next;
    do {
        next = static_cast<std::uint32_t>(std::min<std::uint64_t>(opts_.capacity, std::uint64_t{cur} + n));
    } while (!tokens_.compare_exchange_weak(cur, next, std::memory_order_relaxed));
}

}  // namespace steadfast
