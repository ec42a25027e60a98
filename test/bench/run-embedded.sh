#!/usr/bin/env bash
# Issue 29's embedded figure, beside --stdin in the same run: 300,000
# messages, fsync on both sides (a steadfast-secondary), delivered end to end:
#   1. steadfast-primary --stdin (the daemon's fastest intake);
#   2. primary_node::async_publish_batch from 16 coroutines (batches of 500),
#      no HTTP (steadfast_embedded_bench).
# Goals: the embedded rate >= 150,000 msg/s and >= the --stdin rate.
# Then, once: SPREAD (20,000) new streams of one message each, published by
# 16 coroutines one at a time: each stream's first batch goes by itself, so
# thousands of sends wait in the request combiner at once (20,000 took 86 s
# when each waiting send woke every 20 ms; delivery should grow in step with
# the streams: the time a stream at 5,000 and at SPREAD).
BENCH_NAME=embedded
source "$(dirname "$0")/lib.sh"
build_apps
cmake -S . -B build/bench -DSTEADFAST_BUILD_TESTS=ON -DSTEADFAST_BUILD_BENCHMARKS=ON >/dev/null
cmake --build build/bench -j "$(nproc)" --target steadfast_embedded_bench >/dev/null
N=${N:-300000}
ROUNDS=${ROUNDS:-3}
for r in $(seq "$ROUNDS"); do
  S=$(port)
  "$BIN/steadfast-secondary" --listen "127.0.0.1:$S" --data "$WORK/s$r" --sync full 2>"$WORK/s$r.log" &
  PIDS+=($!); wait_up "http://127.0.0.1:$S/health"
  lines "$N" >"$WORK/in"
  "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$S" --data "$WORK/p$r" --sync full --stdin \
    --exit-when-drained <"$WORK/in" 2>"$WORK/p$r.log"
  t0=$(ts "$WORK/p$r.log" started); t2=$(ts "$WORK/p$r.log" drained)
  stdin_rate=$(python3 -c "print(round($N/($t2-$t0)))")
  S2=$(port)
  "$BIN/steadfast-secondary" --listen "127.0.0.1:$S2" --data "$WORK/e$r" --sync full 2>"$WORK/e$r.log" &
  PIDS+=($!); wait_up "http://127.0.0.1:$S2/health"
  out=$(build/bench/test/bench/steadfast_embedded_bench "http://127.0.0.1:$S2" "$WORK/q$r" "$N" 16 500 2>"$WORK/q$r.log")
  emb=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['delivered_rate'])" "$out")
  echo "round $r: --stdin delivered $stdin_rate msg/s; embedded (16 coroutines, batches of 500) delivered $emb msg/s; ratio $(python3 -c "print(round($emb/$stdin_rate,3))") (goals: >= 150000 and >= 1.0)"
  echo "  $out"
  echo "  applied at the secondaries: $("$BIN/steadfast-secondary" dump --data "$WORK/s$r" | wc -l) (--stdin), $("$BIN/steadfast-secondary" dump --data "$WORK/e$r" | wc -l) (embedded) of $N each"
  kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; PIDS=()
done
SPREAD=${SPREAD:-20000}
for n in 5000 "$SPREAD"; do
  S=$(port)
  "$BIN/steadfast-secondary" --listen "127.0.0.1:$S" --data "$WORK/spread$n" --sync full 2>"$WORK/spread$n.log" &
  PIDS+=($!); wait_up "http://127.0.0.1:$S/health"
  out=$(build/bench/test/bench/steadfast_embedded_bench "http://127.0.0.1:$S" "$WORK/sp$n" "$n" 16 0 spread 2>"$WORK/sp$n.err")
  python3 -c "import json,sys; j=json.loads(sys.argv[1]); print(f'{j[\"streams\"]} new streams of one message each: delivered in {j[\"delivered_s\"]} s, {1e6*j[\"delivered_s\"]/j[\"streams\"]:.0f} us a stream')" "$out"
  kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; PIDS=()
done
