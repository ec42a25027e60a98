// The daemons' jemalloc settings (linked only when the daemons run on
// jemalloc: apps/CMakeLists.txt). Its background thread returns freed pages
// to the system by their decay (10 s) while the daemon idles: without it
// jemalloc decays only as the program allocates, and a primary whose 5,000
// streams had retired kept 31-37 MiB where it started at 12
// (test/bench/RESULTS.md, 2026-12-06). One such thread is enough for two
// threads that allocate. MALLOC_CONF in the environment still applies on top.
extern "C" {
// NOLINTNEXTLINE: the name and type jemalloc reads (its malloc_conf(3)).
const char* malloc_conf = "background_thread:true,max_background_threads:1";
}
