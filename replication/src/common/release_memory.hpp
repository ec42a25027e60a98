// Gives the allocator's freed memory back to the system after a burst of
// frees (streams retiring), whichever allocator the program runs on.
#pragma once

namespace steadfast::app {

/// glibc's malloc: malloc_trim (it keeps freed memory in its heaps until
/// asked). jemalloc: nothing: it returns freed pages by its own decay, which
/// an idle program runs only with its background thread (the daemons turn it
/// on: apps/common/allocator.cpp).
void release_free_memory() noexcept;

}  // namespace steadfast::app
