#include "release_memory.hpp"

#include <malloc.h>

#include <cstddef>

// jemalloc's control interface: defined when the program runs on jemalloc
// (weak: null otherwise; the library never requires jemalloc).
extern "C" int mallctl(const char* name, void* oldp, std::size_t* oldlenp, void* newp, std::size_t newlen)
    __attribute__((weak));

namespace steadfast::app {

void release_free_memory() noexcept {
    // (jemalloc's own purge of every arena took 6 ms after 50 MB were freed,
    // 63 ms after 500 MB: too long for an event loop; its background thread
    // does it beside the loop.)
    if (mallctl != nullptr) return;
    ::malloc_trim(0);
}

}  // namespace steadfast::app
