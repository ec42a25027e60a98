#include "release_memory.hpp"

#include <malloc.h>

#include <cstddef>

// jemalloc's control interface, when the program is linked with jemalloc
// (weak: null otherwise; the library itself never requires jemalloc).
extern "C" int mallctl(const char* name, void* oldp, std::size_t* oldlenp, void* newp, std::size_t newlen)
    __attribute__((weak));

namespace steadfast::app {

void release_free_memory() noexcept {
    if (mallctl != nullptr) {
        // "arena.<MALLCTL_ARENAS_ALL>.purge" (jemalloc.h: MALLCTL_ARENAS_ALL is 4096).
        if (mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0) == 0) return;
    }
    ::malloc_trim(0);
}

}  // namespace steadfast::app
