#!/usr/bin/env bash
# The JetStream demo: a 3-node NATS JetStream cluster on loopback, a stream
# with 3 replicas, one primary ingesting a few thousand messages from standard
# input, two secondaries each with its own durable consumer. The stream's
# leader node is killed (kill -9) mid-run and restarted. Live progress on the
# terminal; at the end, the same verification as the HTTP demo, on both
# secondaries. Exits 1 if any check fails: the node's kill happened, the
# primary exited 0, and every message was applied once, in order, with its
# payload text as sent, on each secondary.
#   bash apps/demo-jetstream.sh BIN_DIR [messages]      (DEMO_TIMEOUT=seconds, default 300)
set -euo pipefail
BIN="${1:?usage: demo-jetstream.sh BIN_DIR [messages]}"
N="${2:-3000}"
TIMEOUT="${DEMO_TIMEOUT:-300}"
HERE="$(cd "$(dirname "$0")" && pwd)"
CLUSTER="$HERE/../test/integration/jetstream/cluster.sh"
WORK="$(mktemp -d /tmp/steadfast-demo-js.XXXXXX)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
PPORT=$(free_port); S1PORT=$(free_port); S2PORT=$(free_port)
PIDS=(); SPIDS=()
failures=()
trap 'for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; bash "$CLUSTER" stop "$WORK/nats" >/dev/null 2>&1 || true' EXIT
metric() { { curl -fs --max-time 2 "$1" 2>/dev/null || true; } | awk -v m="$2" '$1==m {printf "%d", $2; f=1} END {if (!f) printf "-"}'; }

command -v nats-server >/dev/null || { echo "nats-server is not installed: bash .ci/setup" >&2; exit 1; }
URLS=$(bash "$CLUSTER" start "$WORK/nats" 3)
echo "steadfast JetStream demo: a 3-node NATS cluster ($URLS),"
echo "a stream with 3 replicas, a primary on 127.0.0.1:$PPORT ingesting $N messages from stdin,"
echo "secondaries on 127.0.0.1:$S1PORT and 127.0.0.1:$S2PORT (durable consumers c1, c2); data and logs in $WORK"
echo "(delivered = stored in the stream by a quorum of its replicas; applied = committed by a secondary)"

for k in 1 2; do
  port_var="S${k}PORT"
  "$BIN/steadfast-secondary" --source "$URLS" --js-stream demo --consumer "c$k" --data "$WORK/secondary$k" \
    --listen "127.0.0.1:${!port_var}" 2>>"$WORK/secondary$k.log" &
  PIDS+=($!); SPIDS+=($!)
done
( for ((i = 1; i <= N; i++)); do
    printf '{"order":%d,"item":"sku-%d","qty":%d}\n' "$i" $((i % 97)) $((i % 5 + 1))
    if ((i % 50 == 0)); then sleep 0.2; fi
  done ) | "$BIN/steadfast-primary" --secondary "$URLS" --js-stream demo --js-replicas 3 --data "$WORK/primary" \
      --listen "127.0.0.1:$PPORT" --stdin --exit-when-drained --batch-max 100 --max-backoff 2s \
      2>>"$WORK/primary.log" &
PPID_=$!; PIDS+=("$PPID_")

progress() {
  local p="http://127.0.0.1:$PPORT/metrics"
  printf '%6.1fs  published %6s  delivered %6s  pending %6s  applied c1 %6s  c2 %6s  nodes up %s\n' "$1" \
    "$(metric "$p" steadfast_primary_published_total)" "$(metric "$p" steadfast_primary_delivered_total)" \
    "$(metric "$p" steadfast_primary_outbox_depth)" \
    "$(metric "http://127.0.0.1:$S1PORT/metrics" steadfast_secondary_applied_total)" \
    "$(metric "http://127.0.0.1:$S2PORT/metrics" steadfast_secondary_applied_total)" "$2"
}
start=$(date +%s.%N)
deadline=$(( $(date +%s) + TIMEOUT ))
killed=0; down=""; up=3; killed_at=0
while kill -0 "$PPID_" 2>/dev/null; do
  sleep 0.5
  t=$(python3 -c "import time; print(round(time.time()-$start,1))")
  progress "$t" "$up"
  delivered=$(metric "http://127.0.0.1:$PPORT/metrics" steadfast_primary_delivered_total)
  if [ "$killed" = 0 ] && [ "$delivered" != "-" ] && [ "$delivered" -ge $((N / 3)) ]; then
    if node=$(bash "$CLUSTER" leader "$WORK/nats" demo); then
      pid=$(cat "$WORK/nats/n$node.pid")
      bash "$CLUSTER" kill "$WORK/nats" "$node"
      for ((i = 0; i < 30; i++)); do  # gone (or a zombie, its parent is init)
        { kill -0 "$pid" 2>/dev/null && [ "$(ps -o stat= -p "$pid" | cut -c1)" != Z ]; } || break
        sleep 0.1
      done
      if kill -0 "$pid" 2>/dev/null && [ "$(ps -o stat= -p "$pid" | cut -c1)" != Z ]; then
        failures+=("the kill -9 of NATS node $node (pid $pid) did not happen")
      else
        killed=1; down=$node; up=2; killed_at=$(date +%s)
        echo "        >>> NATS node $node, the stream's leader, killed (kill -9)"
      fi
    fi
  fi
  if [ -n "$down" ] && (( $(date +%s) >= killed_at + 3 )); then
    bash "$CLUSTER" restart "$WORK/nats" "$down" && { echo "        >>> NATS node $down restarted"; up=3; }
    down=""
  fi
  if (( $(date +%s) > deadline )); then
    failures+=("the primary did not drain within ${TIMEOUT}s (DEMO_TIMEOUT)")
    kill -9 "$PPID_" 2>/dev/null || true
    break
  fi
done
wait "$PPID_" && rc=0 || rc=$?
echo
echo "primary exited with $rc after $(python3 -c "import time; print(round(time.time()-$start,1))") s"
[ "$rc" = 0 ] || failures+=("the primary exited with $rc, not 0 (--exit-when-drained exits 0 once all is stored in the stream)")
[ "$killed" = 1 ] || failures+=("no NATS node was killed: the demo did not show what it says")
[ -z "$down" ] || bash "$CLUSTER" restart "$WORK/nats" "$down" || true

status=$("$BIN/steadfast-primary" status --data "$WORK/primary" 2>>"$WORK/status.err") || status='{}'
retries=$(grep -c '"event":"link_error"' "$WORK/primary.log" || true)
for k in 1 2; do
  # The secondaries catch up from the stream: wait until each has all N.
  for ((i = 0; i < 600; i++)); do
    "$BIN/steadfast-secondary" dump --data "$WORK/secondary$k" >"$WORK/dump$k" 2>>"$WORK/dump.err" || true
    [ "$(wc -l <"$WORK/dump$k")" -ge "$N" ] && break
    sleep 0.1
  done
  echo "secondary c$k:"
  python3 "$HERE/demo_verify.py" "$WORK/dump$k" "$N" "$status" "$retries" || failures+=("the verification of secondary c$k failed")
done
for p in "${SPIDS[@]}"; do
  kill -TERM "$p" 2>/dev/null || true
  wait "$p" && src=0 || src=$?
  [ "$src" = 0 ] || failures+=("a secondary exited with $src on SIGTERM, not 0")
done
echo "logs: $WORK/primary.log, $WORK/secondary1.log, $WORK/secondary2.log, $WORK/nats/n*.log"
if ((${#failures[@]})); then
  echo "demo FAILED:"
  for f in "${failures[@]}"; do echo "  - $f"; done
  exit 1
fi
echo "demo passed: the stream's leader killed and restarted, the primary exited 0, every order applied once, in order, as sent, on both secondaries"
