#!/usr/bin/env bash
# Issue 29's end-to-end figure: 16 streams, fsync on both sides, DELIVERED end
# to end, as a fraction of what the same load generator gets from the
# primary's GET /health with the same connections in the same run (the
# machine's floor for a request through this event loop).
#   for C in 16 64 (CONNS="16 64"):
#     1. a fresh pair (--sync full on both sides);
#     2. wrk -t2 -cC on /health for 4 s: requests a second, CPU a request;
#     3. wrk -t2 -cC on /publish (publish16.lua, 16 streams) for 5 s, then
#        until the secondary has everything: delivered a second (from the
#        start of publishing to the last delivery), the ratio to /health, the
#        CPU a message (both apps and wrk), each side's group commits.
#     4. the floor for this work: a fresh primary alone (its secondary a
#        closed port), the same wrk on /publish: acknowledged a second, its
#        ratio to /health, and the pair's delivered rate against it.
#     5. the machine's floor written the leanest way (lean_intake.cpp), in
#        the same run: its /health, and /publish with the outbox's layout and
#        with a table keyed by arrival (LEAN=0 skips it).
#   PERF=1: also perf-records the primary while it takes publishes, and
#   prints where its cycles go (self time by library and symbol).
#   SCHED=1: also records the scheduler for 1 s while the pair takes
#   publishes and prints which threads ran together (overlap.py): the time
#   the event loop and wrk wait for the database pipeline.
# Goals (issue 29): delivered / /health >= 0.28 with 16 publishers, >= 0.5 with 64.
BENCH_NAME=group
source "$(dirname "$0")/lib.sh"
build_apps
if [ "${LEAN:-1}" = 1 ]; then
  cmake -S . -B build/bench -DSTEADFAST_BUILD_TESTS=ON -DSTEADFAST_BUILD_BENCHMARKS=ON >/dev/null
  cmake --build build/bench -j "$(nproc)" --target steadfast_lean_intake >/dev/null
  LEAN_BIN=build/bench/test/bench/steadfast_lean_intake
fi
CONNS=${CONNS:-16 64}

# SCHED=1: sched_start TAG starts a 1 s scheduler recording 2 s from now
# (sched_pid); sched_report TAG WHAT PRIMARY_PID [SECONDARY_PID] prints which
# threads ran together in it.
sched_start() {
  sched_pid=""
  [ "${SCHED:-0}" = 1 ] || return 0
  (sleep 2; perf sched record -q -o "$WORK/sched$1.data" -- sleep 1 >/dev/null 2>&1) &
  sched_pid=$!
}
sched_report() {
  [ -n "$sched_pid" ] || return 0
  wait "$sched_pid" || true
  echo "  which threads ran together while $2 took publishes (perf sched, overlap.py):"
  { perf sched timehist -i "$WORK/sched$1.data" 2>/dev/null || true; } | python3 test/bench/overlap.py "${@:3}" || true
}

# run C: one round with C connections.
run() {
  local c=$1 S P SP PP h0 hc0p hc0s hrate hcpu c0p c0s t0 t2 pub published delivered
  S=$(port); P=$(port)
  "$BIN/steadfast-secondary" --listen "127.0.0.1:$S" --data "$WORK/s$c" --sync "${SSYNC:-full}" 2>"$WORK/s$c.log" &
  SP=$!; PIDS+=($SP); wait_up "http://127.0.0.1:$S/health"
  "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$S" --data "$WORK/p$c" --listen "127.0.0.1:$P" ${PFLAGS:-} \
    --sync "${PSYNC:-full}" 2>"$WORK/p$c.log" &
  PP=$!; PIDS+=($PP); wait_up "http://127.0.0.1:$P/health"
  # 2. The floor: /health through the same event loop, same connections.
  hc0p=$(cpu_s "$PP")
  run_timed "$WORK/wrkh$c.cpu" wrk -t2 -c"$c" -d4s "http://127.0.0.1:$P/health" >"$WORK/wrkh$c"
  hrate=$(awk '/Requests\/sec/ {print int($2)}' "$WORK/wrkh$c")
  hcpu=$(python3 -c "import sys; r=$hrate*4; print(round(((float(sys.argv[1])-float(sys.argv[2]))+float(sys.argv[3]))/max(r,1)*1e6,1))" \
    "$(cpu_s "$PP")" "$hc0p" "$(cat "$WORK/wrkh$c.cpu")")
  # 3. /publish, delivered end to end.
  c0p=$(cpu_s "$PP"); c0s=$(cpu_s "$SP"); local tp0 ts0; tp0=$(thread_cpu "$PP"); ts0=$(thread_cpu "$SP")
  local perf_pid=""
  if [ "${PERF:-0}" = 1 ]; then
    perf record -q -g -o "$WORK/perf$c.data" -p "$PP" -- sleep 5 >/dev/null 2>&1 &
    perf_pid=$!
  fi
  local sched_pid
  sched_start "pair$c"
  watch_delivered "$P"
  t0=$EPOCHREALTIME
  run_timed "$WORK/wrkp$c.cpu" wrk -t2 -c"$c" -d5s -s test/bench/publish16.lua "http://127.0.0.1:$P" >"$WORK/wrkp$c"
  pub=$(awk '/Requests\/sec/ {print int($2)}' "$WORK/wrkp$c")
  read -r published delivered t2 < <(delivered_at)
  [ -n "$perf_pid" ] && wait "$perf_pid" || true
  python3 - "$c" "$hrate" "$hcpu" "$pub" "$published" "$delivered" "$t0" "$t2" "$(cpu_s "$PP")" "$c0p" \
    "$(cpu_s "$SP")" "$c0s" "$(cat "$WORK/wrkp$c.cpu")" "$WORK/delivered$c" <<'PY'
import sys
c, hrate, hcpu, pub, published, delivered, t0, t2, p1, p0, s1, s0, w = sys.argv[1:14]
delivered = int(delivered); rate = delivered / (float(t2) - float(t0))
open(sys.argv[14], "w").write(f"{rate:.0f}\n")
n = max(delivered, 1)
p = (float(p1) - float(p0)) / n * 1e6; s = (float(s1) - float(s0)) / n * 1e6; wk = float(w) / n * 1e6
goal = {"16": 0.28, "64": 0.5}.get(c)
print(f"-c{c}: /health {int(hrate)}/s ({hcpu} us CPU a request, primary and wrk); /publish acknowledged {pub}/s; "
      f"delivered {rate:.0f} msg/s ({delivered} of {published}); ratio {rate / max(int(hrate), 1):.3f}"
      + (f" (goal >= {goal})" if goal else ""))
print(f"  CPU a message: primary {p:.0f} us, secondary {s:.0f} us, wrk {wk:.0f} us ({p + s + wk:.0f} us in all)")
PY
  echo "  a message's CPU by thread, primary: $(thread_cpu_delta "$tp0" "$(thread_cpu "$PP")" "$delivered")"
  echo "  a message's CPU by thread, secondary: $(thread_cpu_delta "$ts0" "$(thread_cpu "$SP")" "$delivered")"
  echo "  primary's database thread: $(db_stats "http://127.0.0.1:$P/metrics" primary)"
  echo "  secondary's database thread: $(db_stats "http://127.0.0.1:$S/metrics" secondary)"
  if [ -n "$perf_pid" ]; then
    echo "  the primary's cycles while taking publishes (perf: self time, [k] the kernel's, top 15):"
    { perf report -q -i "$WORK/perf$c.data" --no-children --sort dso,symbol --stdio 2>/dev/null || true; } |
      grep -E '^ +[0-9.]+%' | head -15 | cut -c1-110 | sed 's/ *$//; s/^/    /' || true
  fi
  sched_report "pair$c" "the pair" "$PP" "$SP"
  kill "$PP" "$SP" 2>/dev/null || true
  wait "$PP" "$SP" 2>/dev/null || true
  # 4. The floor for a durable publish on this machine in this run: the
  #    primary alone (its secondary a closed port, so nothing is delivered
  #    and delivery only backs off), fsync, the same load: what the pair's
  #    delivered rate would be if delivery cost nothing.
  local A AP arate
  A=$(port)
  "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$(port)" --data "$WORK/a$c" --listen "127.0.0.1:$A" \
    --sync "${PSYNC:-full}" 2>"$WORK/a$c.log" &
  AP=$!; PIDS+=($AP); wait_up "http://127.0.0.1:$A/health"
  local ta0 acount
  ta0=$(thread_cpu "$AP")
  sched_start "alone$c"
  run_timed "$WORK/wrka$c.cpu" wrk -t2 -c"$c" -d5s -s test/bench/publish16.lua "http://127.0.0.1:$A" >"$WORK/wrka$c"
  arate=$(awk '/Requests\/sec/ {print int($2)}' "$WORK/wrka$c")
  acount=$(awk '/requests in/ {print $1}' "$WORK/wrka$c")
  python3 -c "import sys; a, h, d = map(float, sys.argv[1:]); print(f'  the durable intake alone (no secondary): {a:.0f} publishes/s acknowledged, {a / max(h, 1):.3f} of /health; the pair delivered {d / max(a, 1):.2f} of it')" \
    "$arate" "$hrate" "$(cat "$WORK/delivered$c")"
  # Beside the pair's lines above: what delivery and the secondary add to a message.
  echo "  a publish's CPU by thread, the intake alone: $(thread_cpu_delta "$ta0" "$(thread_cpu "$AP")" "${acount:-0}"), wrk $(python3 -c "import sys; print(round(float(sys.argv[1]) / max(int(sys.argv[2]), 1) * 1e6))" "$(cat "$WORK/wrka$c.cpu")" "${acount:-0}") us"
  # Its commits and flushes beside the pair's: what a flush costs with nothing
  # delivered (the same disk, the same hour).
  echo "  the intake alone's database thread: $(db_stats "http://127.0.0.1:$A/metrics" primary)"
  sched_report "alone$c" "the intake alone" "$AP"
  kill "$AP" 2>/dev/null || true
  wait "$AP" 2>/dev/null || true
  # 5. The machine's floor for the same work, written the leanest way
  #    (lean_intake.cpp: Beast, simdjson, one SQLite thread, an fsync a
  #    commit, nothing else checked): its /health, then /publish with the
  #    outbox's layout (a table keyed by stream and seq) and keyed by arrival.
  [ "${LEAN:-1}" = 1 ] || return 0
  local L lh lrate
  for layout in stream arrival; do
    L=$(port)
    "$LEAN_BIN" "$L" "$WORK/lean-$layout$c.db" "$layout" 2>"$WORK/lean$c.log" &
    AP=$!; PIDS+=($AP); wait_up "http://127.0.0.1:$L/health"
    if [ "$layout" = stream ]; then
      wrk -t2 -c"$c" -d4s "http://127.0.0.1:$L/health" >"$WORK/wrklh$c"
      lh=$(awk '/Requests\/sec/ {print int($2)}' "$WORK/wrklh$c")
    fi
    wrk -t2 -c"$c" -d5s -s test/bench/publish16.lua "http://127.0.0.1:$L" >"$WORK/wrkl$layout$c"
    lrate=$(awk '/Requests\/sec/ {print int($2)}' "$WORK/wrkl$layout$c")
    python3 -c "import sys; l, lh, h, a, lay = sys.argv[1:]; l, lh, h, a = map(float, (l, lh, h, a)); print(f'  the lean intake ({lay}): {l:.0f} publishes/s, {l / max(lh, 1):.3f} of its /health ({lh:.0f}/s), {l / max(h, 1):.3f} of the primary\'s; the primary\'s intake alone is {a / max(l, 1):.2f} of it')" \
      "$lrate" "$lh" "$hrate" "$arate" "$([ "$layout" = stream ] && echo "the outbox's layout, keyed by stream and seq" || echo "keyed by arrival, one leaf a commit")"
    kill "$AP" 2>/dev/null || true
    wait "$AP" 2>/dev/null || true
  done
}

echo "== 16 streams, fsync on both sides, delivered end to end, against /health with the same connections"
for c in $CONNS; do run "$c"; done
