#!/usr/bin/env bash
# The pair over JetStream next to the pair over HTTP, in one run (Release
# build, a 3-node NATS cluster on loopback, a stream with 3 replicas):
#  1. --stdin end to end, fsync on both ends (the primary's outbox and the
#     secondary's store; the NATS servers keep their default sync interval):
#     from the primary's start to the secondary's last message applied;
#  2. /publish to 16 streams from 16 concurrent publishers (wrk -t2 -c16, 5 s),
#     acknowledged, and delivered end to end (to the secondary's last applied);
#  3. failover (test/bench/js_failover.py), default flags, a publisher
#     sending all the while: KILLS rounds of kill -9 of the stream's leader
#     node (CONNECTED of them the node the primary is connected to), then a
#     SIGTERM of the leader; per round, the cluster's new leader (its
#     advisory), the primary's next acknowledged publish and the difference.
#   bash test/bench/run-jetstream.sh [messages] [kills] [connected]   (200000 6 3)
#   ONLY_FAILOVER=1 bash test/bench/run-jetstream.sh: section 3 alone
N=${1:-200000}
KILLS=${2:-6}
CONNECTED=${3:-3}
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
if [ -z "${ONLY_FAILOVER:-}" ]; then
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
echo "JetStream (3 replicas): acknowledged $j_ack msg/s, delivered end to end $j_del msg/s"

fi

echo "== 3. failover: kill -9 of the stream's leader node ($KILLS times, $CONNECTED of them the node the primary is connected to), then a SIGTERM of it: the cluster's new leader and the primary's next acknowledged publish (default flags)"
P=$(port)
"$BIN/steadfast-primary" --secondary "$URLS" --js-stream failover --js-replicas 3 --data "$WORK/f-p" \
  --listen "127.0.0.1:$P" 2>"$WORK/f-p.log" & PIDS+=($!)
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
python3 test/bench/js_failover.py "$WORK/nats" failover "http://127.0.0.1:$P" "$CLUSTER" "$KILLS" "$CONNECTED"
echo "the primary's log: $(grep -c jetstream_leader_elected "$WORK/f-p.log") leader advisories, $(grep -c '"link_error"' "$WORK/f-p.log") link_error lines, $(grep -c '"secondary_offline"' "$WORK/f-p.log") secondary_offline"
