#!/usr/bin/env bash
# Issue 29's like-for-like figure as it asks for it: the median of ROUNDS (9)
# alternating rounds. Each round, on a fresh secondary with --sync off:
#   the primary delivers N (30,000) messages from --stdin, one a request, one
#   in flight (--batch-max 1, --sync off): messages a second, start to drained;
#   wrk -t1 -c1 posts the same kind of envelope to the same endpoint for 4 s
#   (envelope.lua, every request applied): requests a second.
# Odd rounds run the primary first, even rounds wrk first, so that the
# machine's drift hits both alike. Goal: median ratio >= 0.9.
BENCH_NAME=likeforlike
source "$(dirname "$0")/lib.sh"
build_apps
ROUNDS=${ROUNDS:-9}
N=${N:-30000}
lines "$N" >"$WORK/in"

primary_round() {  # primary_round SECONDARY_PORT ROUND: prints msg/s
  "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$1" --data "$WORK/p$2" --sync off --stdin \
    --exit-when-drained --batch-max 1 <"$WORK/in" 2>"$WORK/p$2.log"
  python3 -c "print(round($N/($(ts "$WORK/p$2.log" drained)-$(ts "$WORK/p$2.log" started))))"
}
wrk_round() {  # wrk_round SECONDARY_PORT ROUND: prints requests/s, each applied
  local out sent before after
  before=$(metric "http://127.0.0.1:$1/metrics" steadfast_secondary_applied_total)
  out=$(WRK_STREAM="wrk-$2" wrk -t1 -c1 -d4s -s test/bench/envelope.lua "http://127.0.0.1:$1")
  sent=$(awk '/requests in/ {print $1}' <<<"$out")
  after=$(metric "http://127.0.0.1:$1/metrics" steadfast_secondary_applied_total)
  if grep -q 'Non-2xx' <<<"$out" || [ $((after - before)) -lt "$sent" ]; then
    echo "round $2: the wrk baseline was not all applied ($((after - before)) of $sent)" >&2; exit 1
  fi
  awk '/Requests\/sec/ {print int($2)}' <<<"$out"
}

echo "== like-for-like: the primary's delivery (--batch-max 1, --sync off) / wrk -t1 -c1, same secondary endpoint"
ratios=()
for r in $(seq "$ROUNDS"); do
  S=$(port)
  "$BIN/steadfast-secondary" --listen "127.0.0.1:$S" --data "$WORK/s$r" --sync off 2>"$WORK/s$r.log" &
  SP=$!; PIDS+=($SP); wait_up "http://127.0.0.1:$S/health"
  if [ $((r % 2)) = 1 ]; then p=$(primary_round "$S" "$r"); w=$(wrk_round "$S" "$r")
  else w=$(wrk_round "$S" "$r"); p=$(primary_round "$S" "$r"); fi
  ratio=$(python3 -c "print(round($p/$w, 3))")
  ratios+=("$ratio")
  echo "round $r: primary $p msg/s, wrk $w req/s, ratio $ratio"
  kill "$SP"; wait "$SP" 2>/dev/null || true
done
python3 - "${ratios[@]}" <<'PY'
import statistics, sys
r = sorted(float(x) for x in sys.argv[1:])
print(f"median ratio {statistics.median(r):.3f} (goal >= 0.9); range {r[0]:.3f}-{r[-1]:.3f} over {len(r)} rounds")
PY
