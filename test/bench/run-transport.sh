#!/usr/bin/env bash
# Builds (Release) and runs the transport benchmark: the client's sequential
# keep-alive rate next to wrk -t1 -c1 against the same server, in one run.
#   bash test/bench/run-transport.sh [seconds per measurement]
set -euo pipefail
cd "$(dirname "$0")/../.."
bash .ci/setup --bench
cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DSTEADFAST_BUILD_TESTS=ON -DSTEADFAST_BUILD_BENCHMARKS=ON \
      -DSTEADFAST_BUILD_APPS=OFF >/dev/null
cmake --build build/bench -j "$(nproc)" --target steadfast_transport_bench
./build/bench/test/bench/steadfast_transport_bench "$@"
