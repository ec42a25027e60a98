#!/usr/bin/env bash
# The pair over JetStream next to the pair over HTTP, in one run (Release
# build, a 3-node NATS cluster on loopback, a stream with 3 replicas):
#  1. --stdin end to end, fsync on both ends (the primary's outbox and the
#     secondary's store; the NATS servers keep their default sync interval):
#     from the primary's start to the secondary's last message applied;
#  2. /publish to 16 streams from 16 concurrent publishers (wrk -t2 -c16, 5 s),
#     acknowledged, and delivered end to end (to the secondary's last applied);
#  3. the time from a kill -9 of the stream's leader node to the next publish
#     JetStream acknowledges (a publisher sending all the while), 3 rounds.
#   bash test/bench/run-jetstream.sh [messages]      (default 200000)
N=${1:-200000}
BENCH_NAME=bench-js source "$(dirname "$0")/lib.sh"
build_apps
CLUSTER=test/integration/jetstream/cluster.sh
trap 'exec 2>/dev/null; bash "$CLUSTER" stop "$WORK/nats" >/dev/null; bench_cleanup' EXIT
now() { date +%s.%N; }
wait_applied() {  # wait_applied METRICS_URL N: until the secondary applied N; prints the time
  until [ "$(metric "$1" steadfast_secondary_applied_total)" -ge "$2" ]; do sleep 0.02; done
  now
}
rate() { python3 -c "print(round($1/($3-$2)))"; }

URLS=$(bash "$CLUSTER" start "$WORK/nats" 3)
echo "NATS cluster: $URLS (nats-server $(nats-server --version | awk '{print $2}'))"
lines "$N" >"$WORK/in"

echo "== 1. --stdin end to end, $N messages, fsync on both ends"
# HTTP
S=$(port); "$BIN/steadfast-secondary" --listen "127.0.0.1:$S" --data "$WORK/h-s" 2>"$WORK/h-s.log" & PIDS+=($!)
wait_up "http://127.0.0.1:$S/health"
t0=$(now)
"$BIN/steadfast-primary" --secondary "http://127.0.0.1:$S" --data "$WORK/h-p" --stdin --exit-when-drained <"$WORK/in" 2>"$WORK/h-p.log"
t1=$(wait_applied "http://127.0.0.1:$S/metrics" "$N")
http_stdin=$(rate "$N" "$t0" "$t1")
# JetStream
S=$(port); "$BIN/steadfast-secondary" --source "$URLS" --js-stream bench1 --consumer c1 --data "$WORK/j-s" \
  --listen "127.0.0.1:$S" 2>"$WORK/j-s.log" & PIDS+=($!)
wait_up "http://127.0.0.1:$S/metrics"
t0=$(now)
"$BIN/steadfast-primary" --secondary "$URLS" --js-stream bench1 --js-replicas 3 --data "$WORK/j-p" --stdin \
  --exit-when-drained <"$WORK/in" 2>"$WORK/j-p.log"
tp=$(now)
t1=$(wait_applied "http://127.0.0.1:$S/metrics" "$N")
js_stdin=$(rate "$N" "$t0" "$t1")
echo "HTTP: $http_stdin msg/s; JetStream (3 replicas): $js_stdin msg/s end to end (into the stream: $(rate "$N" "$t0" "$tp") msg/s); goal >= 30000"

echo "== 2. /publish to 16 streams, 16 concurrent publishers (wrk -t2 -c16, 5 s), fsync on both ends"
publish16() {  # publish16 http|js NAME: prints "acknowledged/s delivered/s"
  local mode=$1 name=$2 S P
  S=$(port); P=$(port)
  if [ "$mode" = http ]; then
    "$BIN/steadfast-secondary" --data "$WORK/$name-s" --listen "127.0.0.1:$S" 2>"$WORK/$name-s.log" & PIDS+=($!)
    wait_up "http://127.0.0.1:$S/metrics"
    "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$S" --data "$WORK/$name-p" --listen "127.0.0.1:$P" \
      2>"$WORK/$name-p.log" & PIDS+=($!)
  else
    "$BIN/steadfast-secondary" --source "$URLS" --js-stream "$name" --consumer c1 --data "$WORK/$name-s" \
      --listen "127.0.0.1:$S" 2>"$WORK/$name-s.log" & PIDS+=($!)
    wait_up "http://127.0.0.1:$S/metrics"
    "$BIN/steadfast-primary" --secondary "$URLS" --js-stream "$name" --js-replicas 3 --data "$WORK/$name-p" \
      --listen "127.0.0.1:$P" 2>"$WORK/$name-p.log" & PIDS+=($!)
  fi
  wait_up "http://127.0.0.1:$P/health"
  until curl -fs "http://127.0.0.1:$P/health" | grep -q '"secondary_online":true'; do sleep 0.05; done
  local t0 t1 acked
  t0=$(now)
  wrk -t2 -c16 -d5s -s test/bench/publish16.lua "http://127.0.0.1:$P" >"$WORK/$name.wrk"
  acked=$(metric "http://127.0.0.1:$P/metrics" steadfast_primary_published_total)
  t1=$(wait_applied "http://127.0.0.1:$S/metrics" "$acked")
  echo "$(awk '/Requests\/sec/ {print int($2)}' "$WORK/$name.wrk") $(rate "$acked" "$t0" "$t1")"
}
read -r h_ack h_del < <(publish16 http h16)
read -r j_ack j_del < <(publish16 js bench16)
echo "HTTP: acknowledged $h_ack msg/s, delivered end to end $h_del msg/s"
echo "JetStream (3 replicas): acknowledged $j_ack msg/s, delivered end to end $j_del msg/s (goal >= 30000)"

echo "== 3. kill -9 of the stream's leader node -> the next publish JetStream acknowledges"
P=$(port)
"$BIN/steadfast-primary" --secondary "$URLS" --js-stream failover --js-replicas 3 --data "$WORK/f-p" \
  --listen "127.0.0.1:$P" --attempt-timeout 1s --max-backoff 500ms 2>"$WORK/f-p.log" & PIDS+=($!)
wait_up "http://127.0.0.1:$P/health"
until curl -fs "http://127.0.0.1:$P/health" | grep -q '"secondary_online":true'; do sleep 0.05; done
# A publisher all the while: one message every 2 ms.
python3 - "$P" >"$WORK/publisher.log" 2>&1 <<'PY' &
import http.client, sys, time
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
i = 0
while True:
    i += 1
    try:
        c.request("POST", "/publish?stream=f", body=b'{"i":%d}' % i, headers={"Content-Type": "application/json"})
        c.getresponse().read()
    except Exception as e:
        print(e, flush=True); c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=30)
    time.sleep(0.002)
PY
PIDS+=($!)
sleep 2
for round in 1 2 3; do
  node=$(bash "$CLUSTER" leader "$WORK/nats" failover)
  bash "$CLUSTER" kill "$WORK/nats" "$node"
  t0=$(now)
  sleep 0.05  # what was in flight at the kill is answered (or lost) by now
  base=$(metric "http://127.0.0.1:$P/metrics" steadfast_primary_delivered_total)
  tl=""
  until [ "$(metric "http://127.0.0.1:$P/metrics" steadfast_primary_delivered_total)" -gt "$base" ]; do
    # When the cluster itself reports a new leader (its monitoring endpoint).
    if [ -z "$tl" ]; then l=$(bash "$CLUSTER" leader "$WORK/nats" failover 2>/dev/null || true); [ -n "$l" ] && [ "$l" != "$node" ] && tl=$(now); fi
    sleep 0.01
  done
  t1=$(now)
  [ -n "$tl" ] || tl=$t1
  echo "round $round: node $node (the leader) killed; a new leader (node $(bash "$CLUSTER" leader "$WORK/nats" failover || echo '?')) reported after" \
       "$(python3 -c "print(round(($tl-$t0)*1000))") ms; next publish acknowledged after $(python3 -c "print(round(($t1-$t0)*1000))") ms (goal < 5000)"
  bash "$CLUSTER" restart "$WORK/nats" "$node"
  sleep 5  # the restarted node catches up
done
