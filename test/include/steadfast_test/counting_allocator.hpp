// An allocator that counts what an operation allocates through its
// handler's associated allocator (asio::bind_allocator), and what it still
// holds: the Asio rule that a composed operation's state comes from there
// and is given back before the handler runs.
#pragma once

#include <cstddef>
#include <memory>

namespace steadfast_test {

struct alloc_stats {
    int allocations = 0, live = 0;
};

template <class T>
struct counting_allocator {
    using value_type = T;
    alloc_stats* stats;
    explicit counting_allocator(alloc_stats* s) noexcept : stats(s) {}
    template <class U>
    counting_allocator(const counting_allocator<U>& o) noexcept : stats(o.stats) {}
    T* allocate(std::size_t n) {
        ++stats->allocations;
        ++stats->live;
        return std::allocator<T>{}.allocate(n);
    }
    void deallocate(T* p, std::size_t n) noexcept {
        --stats->live;
        std::allocator<T>{}.deallocate(p, n);
    }
    template <class U>
    bool operator==(const counting_allocator<U>& o) const noexcept {
        return stats == o.stats;
    }
};

}  // namespace steadfast_test
