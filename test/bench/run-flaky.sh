#!/usr/bin/env bash
# An embedded secondary whose apply handler throws with probability P a call
# (steadfast_flaky_handler_bench: 3 streams of 10,000 messages, batches of
# 4,000, no fsync, at most 10 s a run), with the handler called up to 3
# times a message within a request (apply_attempts, the default) beside 1
# (one throw fails the whole request, as before 2026-12-06), in one run.
BENCH_NAME=flaky
source "$(dirname "$0")/lib.sh"
bash .ci/setup --bench
cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DSTEADFAST_BUILD_TESTS=ON -DSTEADFAST_BUILD_BENCHMARKS=ON >/dev/null
cmake --build build/bench -j "$(nproc)" --target steadfast_flaky_handler_bench >/dev/null
for p in ${PS:-0 0.001 0.01 0.05 0.1}; do
  for attempts in 1 3; do
    rm -rf "$WORK/run"
    build/bench/test/bench/steadfast_flaky_handler_bench "$WORK/run" "$p" "$attempts" 2>"$WORK/log"
  done
done
