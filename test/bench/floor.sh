#!/usr/bin/env bash
# What one hop costs on this machine, for the 16-stream /publish goal: each
# side alone under 16 concurrent clients, one message a request, in one run.
#  1. the secondary alone: wrk -t16 -c16 posting envelopes (each connection its
#     own stream), fsync: requests applied a second, and its CPU per request;
#  2. the primary's intake alone (no secondary: nothing is delivered):
#     wrk -t2 -c16 on /publish over 16 streams, fsync, then --sync off;
#  3. the ceiling of the load generator and the HTTP server on this machine:
#     wrk -t2 -c16 on the primary's GET /health (no storage, no JSON input).
#   bash test/bench/floor.sh
BENCH_NAME=floor source "$(dirname "$0")/lib.sh"
build_apps
rate() { awk '/Requests\/sec/ {print int($2)}' "$1"; }
total() { awk '/requests in/ {print $1}' "$1"; }

echo "== 1. the secondary alone, wrk -t16 -c16, one message a request, fsync"
S=$(port)
"$BIN/steadfast-secondary" --listen "127.0.0.1:$S" --data "$WORK/s" --sync full 2>/dev/null &
SP=$!; PIDS+=($SP); wait_up "http://127.0.0.1:$S/health"
c0=$(cpu_s $SP)
wrk -t16 -c16 -d5s -s test/bench/sec16.lua "http://127.0.0.1:$S" >"$WORK/w1"
if grep -q Non-2xx "$WORK/w1"; then echo "the secondary refused some of wrk's requests: $(grep Non-2xx "$WORK/w1")" >&2; exit 1; fi
applied=$(metric "http://127.0.0.1:$S/metrics" steadfast_secondary_applied_total)
echo "requests: $(rate "$WORK/w1")/s, applied $applied in 5 s ($((applied / 5))/s), secondary CPU $(python3 -c "print(round(($(cpu_s $SP)-$c0)/max($(total "$WORK/w1"),1)*1e6))") us a request"

# primary_under_wrk WHAT UNIT SYNC PATH [wrk options]: a primary with no
# reachable secondary, wrk -t2 -c16 for 5 s on PATH; its rate and the
# primary's CPU a request.
primary_under_wrk() {
  local what=$1 unit=$2 sync=$3 path=$4 P PP c0; shift 4
  P=$(port)
  "$BIN/steadfast-primary" --secondary "http://127.0.0.1:1" --data "$WORK/p-$sync-${path//[^a-z]/}" \
    --listen "127.0.0.1:$P" --sync "$sync" 2>/dev/null &
  PP=$!; PIDS+=($PP); wait_up "http://127.0.0.1:$P/health"
  c0=$(cpu_s $PP)
  wrk -t2 -c16 -d5s "$@" "http://127.0.0.1:$P$path" >"$WORK/w2"
  echo "$what: $(rate "$WORK/w2")/s, primary CPU $(python3 -c "print(round(($(cpu_s $PP)-$c0)/max($(total "$WORK/w2"),1)*1e6))") us $unit"
  echo "  its database thread: $(db_stats "http://127.0.0.1:$P/metrics" primary)"
  kill -9 $PP
}
for sync in full off; do
  echo "== 2. the primary's intake alone, wrk -t2 -c16 on /publish over 16 streams, --sync $sync"
  primary_under_wrk acknowledged "a publish" "$sync" / -s test/bench/publish16.lua
done

echo "== 3. the ceiling: wrk -t2 -c16 on the primary's GET /health (nothing stored)"
primary_under_wrk answered "a request" full /health
