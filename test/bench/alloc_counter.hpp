// Counts heap allocations and live heap bytes in a benchmark binary.
// Include from exactly one translation unit: it replaces global new/delete.
#pragma once

#include <execinfo.h>
#include <malloc.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>

namespace steadfast_bench {
inline std::atomic<long long> allocations{0};
inline std::atomic<long long> live_bytes{0};
// While true, each allocation's size and call stack go to stderr (a
// benchmark turns it on around one call, to show what allocates).
inline bool trace = false;

// An allocation of `n` bytes at `p`: counted, and traced while `trace` is on.
inline void counted(void* p, std::size_t n) {
    allocations.fetch_add(1, std::memory_order_relaxed);
    if (trace) {
        trace = false;  // (what follows may allocate)
        void* stack[8];
        const int depth = backtrace(stack, 8);
        std::fprintf(stderr, "allocation of %zu bytes from:\n", n);
        backtrace_symbols_fd(stack + 2, depth - 2, 2);  // from the caller of operator new / aligned_alloc
        trace = true;
    }
    live_bytes.fetch_add(static_cast<long long>(malloc_usable_size(p)), std::memory_order_relaxed);
}
}  // namespace steadfast_bench

void* operator new(std::size_t n) {
    void* p = std::malloc(n ? n : 1);
    if (!p) throw std::bad_alloc();
    steadfast_bench::counted(p, n);
    return p;
}
void operator delete(void* p) noexcept {
    if (!p) return;
    steadfast_bench::live_bytes.fetch_sub(static_cast<long long>(malloc_usable_size(p)), std::memory_order_relaxed);
    std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
    operator delete(p);
}
void* operator new(std::size_t n, std::align_val_t a) {
    void* p = memalign(static_cast<std::size_t>(a), n ? n : 1);
    if (!p) throw std::bad_alloc();
    steadfast_bench::counted(p, n);
    return p;
}
// Asio allocates coroutine frames and handlers with aligned_alloc (through its
// per-thread recycling cache): count those too.
extern "C" void* aligned_alloc(std::size_t align, std::size_t n) noexcept {
    void* p = memalign(align, n);
    if (p) steadfast_bench::counted(p, n);
    return p;
}
void operator delete(void* p, std::align_val_t) noexcept {
    operator delete(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
    operator delete(p);
}
