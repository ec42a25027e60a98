#!/usr/bin/env bash
# Builds (Release) and runs the engine and conditions benchmarks, one after the
# other in this one run; prints Google Benchmark's tables.
set -euo pipefail
cd "$(dirname "$0")/../.."
bash .ci/setup
cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DSTEADFAST_BUILD_TESTS=ON -DSTEADFAST_BUILD_BENCHMARKS=ON \
      -DSTEADFAST_BUILD_APPS=OFF >/dev/null
cmake --build build/bench -j "$(nproc)" --target steadfast_engine_bench steadfast_conditions_bench \
  steadfast_pipeline_bench steadfast_pipeline_bench_frames
./build/bench/test/bench/steadfast_engine_bench "$@"
./build/bench/test/bench/steadfast_conditions_bench "$@"
./build/bench/test/bench/steadfast_pipeline_bench "$@"
# Heap beyond the coroutine frames: the overhead benchmark alone, with frames recycled.
./build/bench/test/bench/steadfast_pipeline_bench_frames --benchmark_filter=pipeline_overhead "$@"
