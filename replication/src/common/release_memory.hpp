// Gives the allocator's freed memory back to the system, whichever allocator
// the program runs on: jemalloc (the daemons link it) keeps freed pages until
// its decay runs, and decay runs only as the program allocates, so an idle
// process kept them for good; glibc's malloc keeps its heap's top until
// malloc_trim.
#pragma once

namespace steadfast::app {

/// Returns freed memory to the system (jemalloc: every arena purged; glibc:
/// malloc_trim). Costs about a millisecond: call it after a burst of frees,
/// not on a hot path.
void release_free_memory() noexcept;

}  // namespace steadfast::app
