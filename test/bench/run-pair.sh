#!/usr/bin/env bash
# Benchmarks of the primary/secondary pair, all in one run on this machine:
#  1. like-for-like: one message per request, one in flight, --sync off on both
#     sides, next to wrk -t1 -c1 posting envelopes to the same secondary endpoint;
#  2. end to end with fsync on both sides: --stdin ingestion and delivery;
#  3. /publish to 16 streams from 16 concurrent publishers (wrk -t2 -c16), fsync on
#     both sides: acknowledged, and delivered end to end (publish start to the
#     last message acknowledged by the secondary), with the CPU a message cost;
#     3b. the same with --sync off on both sides, for what the machine allows
#     without any flush;
#  4. recovery: time from a restarted secondary answering /health to the first
#     message applied, with a 30 s backoff cap;
#  5. the primary's resident memory with 1,000,000 messages waiting.
#   bash test/bench/run-pair.sh
source "$(dirname "$0")/lib.sh"
build_apps
secondary() {  # secondary NAME PORT flags...
  local name=$1 p=$2; shift 2
  "$BIN/steadfast-secondary" --listen "127.0.0.1:$p" --data "$WORK/$name" "$@" 2>"$WORK/$name.log" &
  PIDS+=($!); wait_up "http://127.0.0.1:$p/health"
}

echo "== 1. like-for-like, --sync off, one message per request, one in flight"
S1=$(port); secondary s1 "$S1" --sync off
applied_s1() { metric "http://127.0.0.1:$S1/metrics" steadfast_secondary_applied_total; }
N1=50000
lines $N1 >"$WORK/in1"
"$BIN/steadfast-primary" --secondary "http://127.0.0.1:$S1" --data "$WORK/p1" --sync off --stdin --exit-when-drained \
  --batch-max 1 <"$WORK/in1" 2>"$WORK/p1.log"
t0=$(ts "$WORK/p1.log" started); t1=$(ts "$WORK/p1.log" drained)
primary_rate=$(python3 -c "print(round($N1/($t1-$t0)))")
a0=$(applied_s1)
[ "$a0" -eq "$N1" ] || { echo "the primary's messages were not all applied: $a0 of $N1" >&2; exit 1; }
wrk -t1 -c1 -d5s -s test/bench/envelope.lua "http://127.0.0.1:$S1" >"$WORK/wrk1"
wrk_rate=$(awk '/Requests\/sec/ {print int($2)}' "$WORK/wrk1")
wrk_sent=$(awk '/requests in/ {print $1}' "$WORK/wrk1")
# The baseline counts only if every request wrk sent was applied (a 409 or a
# duplicate is cheaper for the secondary than an apply).
if ! [ "${wrk_sent:-0}" -gt 0 ] 2>/dev/null || grep -q 'Non-2xx' "$WORK/wrk1" || [ $(( $(applied_s1) - a0 )) -lt "$wrk_sent" ]; then
  echo "the wrk baseline was not applied: $(grep Non-2xx "$WORK/wrk1"); applied $(( $(applied_s1) - a0 )) of $wrk_sent" >&2
  exit 1
fi
echo "primary delivery: $primary_rate msg/s; wrk -t1 -c1: $wrk_rate req/s; ratio $(python3 -c "print(round($primary_rate/$wrk_rate,3))") (goal >= 0.9)"

echo "== 2. end to end, fsync on both sides, --stdin"
S2=$(port); secondary s2 "$S2" --sync full
N2=300000
lines $N2 >"$WORK/in2"
"$BIN/steadfast-primary" --secondary "http://127.0.0.1:$S2" --data "$WORK/p2" --sync full --stdin --exit-when-drained \
  <"$WORK/in2" 2>"$WORK/p2.log"
t0=$(ts "$WORK/p2.log" started); t1=$(ts "$WORK/p2.log" input_closed); t2=$(ts "$WORK/p2.log" drained)
echo "ingestion: $(python3 -c "print(round($N2/($t1-$t0)))") msg/s committed; delivered end to end: $(python3 -c "print(round($N2/($t2-$t0)))") msg/s (goal >= 150000)"
applied=$("$BIN/steadfast-secondary" dump --data "$WORK/s2" | wc -l)
echo "applied at the secondary: $applied of $N2"

# sixteen NAME SYNC: 16 streams from 16 concurrent publishers for 5 s, both
# apps with --sync SYNC; what was acknowledged and delivered, and what it cost.
sixteen() {
  local name=$1 sync=$2 S P SP PP c0p c0s t0 t2 pub_rate non2xx published delivered streams
  S=$(port); P=$(port); secondary "s$name" "$S" --sync "$sync"
  SP=${PIDS[-1]}
  "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$S" --data "$WORK/p$name" --listen "127.0.0.1:$P" \
    --connections 8 --sync "$sync" 2>"$WORK/p$name.log" &
  PP=$!; PIDS+=($PP); wait_up "http://127.0.0.1:$P/health"
  c0p=$(cpu_s "$PP"); c0s=$(cpu_s "$SP")
  watch_delivered "$P"
  t0=$EPOCHREALTIME
  run_timed "$WORK/wrk$name.cpu" wrk -t2 -c16 -d5s -s test/bench/publish16.lua "http://127.0.0.1:$P" >"$WORK/wrk$name"
  pub_rate=$(awk '/Requests\/sec/ {print int($2)}' "$WORK/wrk$name")
  non2xx=$(awk '/Non-2xx/ {print $5}' "$WORK/wrk$name"); non2xx=${non2xx:-0}
  read -r published delivered t2 < <(delivered_at)
  streams=$("$BIN/steadfast-primary" status --data "$WORK/p$name" | python3 -c 'import sys,json; print(len(json.load(sys.stdin)["acked_seq"]))')
  echo "acknowledged: $pub_rate msg/s, non-2xx answers: $non2xx; delivered end to end: $(python3 -c "print(round($delivered/($t2-$t0)))") msg/s ($delivered of $published on $streams streams)"
  # What the run cost in CPU (all three processes, publishing through the
  # last delivery), and where that cost alone would stop: every core busy,
  # nothing ever waiting. An upper bound for this build on this machine.
  python3 - "$delivered" "$(cpu_s "$PP")" "$c0p" "$(cpu_s "$SP")" "$c0s" "$(cat "$WORK/wrk$name.cpu")" "$(nproc)" <<'PY'
import sys
n, p1, p0, s1, s0, w, cores = sys.argv[1:]
n = max(int(n), 1); p = float(p1) - float(p0); s = float(s1) - float(s0); w = float(w)
us = lambda c: c / n * 1e6
total = max(us(p + s + w), 1e-9)
print(f"  CPU a message: primary {us(p):.0f} us, secondary {us(s):.0f} us, wrk {us(w):.0f} us; "
      f"{cores} cores at {total:.0f} us a message carry at most {int(cores) / total * 1e6:.0f} msg/s")
PY
  echo "  primary's database thread: $(db_stats "http://127.0.0.1:$P/metrics" primary)"
  echo "  secondary's database thread: $(db_stats "http://127.0.0.1:$S/metrics" secondary)"
}
echo "== 3. /publish to 16 streams, 16 concurrent publishers, fsync on both sides (goal >= 30000 acknowledged and delivered)"
sixteen 3 full
echo "== 3b. the same with --sync off on both sides: the pipeline without any flush, on this machine"
sixteen 3b off

echo "== 4. recovery with a 30 s backoff cap (5 rounds; goal: under 100 ms in every round)"
for round in 1 2 3 4 5; do
  S4=$(port); P4=$(port)
  "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$S4" --data "$WORK/p4-$round" --listen "127.0.0.1:$P4" \
    --max-backoff 30s 2>"$WORK/p4.log" &
  PP=$!; PIDS+=($PP); wait_up "http://127.0.0.1:$P4/health"
  curl -fs -X POST -H 'Content-Type: application/json' -d '{"x":1}' "http://127.0.0.1:$P4/publish" >/dev/null
  sleep 5   # the secondary is down: attempts fail, the probe marks it offline
  "$BIN/steadfast-secondary" --listen "127.0.0.1:$S4" --data "$WORK/s4-$round" 2>/dev/null &
  SP=$!; PIDS+=($SP)
  python3 - "$S4" <<'PY'
import sys, time, urllib.request
base = f"http://127.0.0.1:{sys.argv[1]}"
while True:
    try:
        urllib.request.urlopen(base + "/health", timeout=0.5).read(); t0 = time.time(); break
    except Exception: time.sleep(0.001)
while True:
    m = urllib.request.urlopen(base + "/metrics", timeout=0.5).read().decode()
    if any(l.startswith("steadfast_secondary_applied_total ") and float(l.split()[1]) >= 1 for l in m.splitlines()):
        print(f"recovery: {round((time.time() - t0) * 1000, 1)} ms from /health answering to the first message applied (goal < 100 ms)")
        break
    time.sleep(0.002)
PY
  kill -9 $PP $SP 2>/dev/null || true
done

echo "== 5. resident memory with 1,000,000 messages waiting (secondary down, --sync off)"
P5=$(port); S5=$(port)
N5=1000000
lines $N5 >"$WORK/in5"
"$BIN/steadfast-primary" --secondary "http://127.0.0.1:$S5" --data "$WORK/p5" --sync off --stdin --listen "127.0.0.1:$P5" \
  <"$WORK/in5" 2>"$WORK/p5.log" &
PP=$!; PIDS+=($PP)
wait_up "http://127.0.0.1:$P5/health"
for mark in 250000 500000 750000 1000000; do
  until [ "$(metric "http://127.0.0.1:$P5/metrics" steadfast_primary_outbox_depth)" -ge $mark ]; do sleep 0.05; done
  sleep 0.5
  echo "outbox $mark: RSS $(awk '/VmRSS/ {print int($2/1024)}' /proc/$PP/status) MiB"
done
echo "(goal: under 64 MiB, flat as the backlog grows)"

echo "== 6. memory of streams seen once: 5,000 streams, one message each, then idle"
S6=$(port); P6=$(port); secondary s6 "$S6" --sync off
"$BIN/steadfast-primary" --secondary "http://127.0.0.1:$S6" --data "$WORK/p6" --listen "127.0.0.1:$P6" --sync off \
  2>"$WORK/p6.log" &
PP=$!; PIDS+=($PP); wait_up "http://127.0.0.1:$P6/health"
rss() { awk '/VmRSS/ {print int($2/1024)}' /proc/$PP/status; }
before=$(rss)
python3 - "$P6" <<'PY'
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
for i in range(5000):
    c.request("POST", f"/publish?stream=idle{i}", body=b'{"n":1}', headers={"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    assert r.status == 202, r.status
PY
peak=$(rss)
until [ "$(curl -fs "http://127.0.0.1:$P6/metrics" | awk '/^steadfast_primary_active_streams /{print int($2)}')" = 0 ]; do sleep 0.5; done
sleep 11  # freed memory goes back to the system at the next purge tick (10 s at most)
echo "RSS: $before MiB at start, $peak MiB with 5,000 streams active, $(rss) MiB after they retired (active streams: 0)"
