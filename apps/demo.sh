#!/usr/bin/env bash
# The demo: a secondary and a primary on loopback. The primary ingests a few
# thousand messages from standard input while the secondary answers 503s and
# drops connections, and is killed (kill -9) and restarted twice. Live progress
# on the terminal; at the end, a verification read from the secondary.
#   bash apps/demo.sh BIN_DIR [messages]
set -euo pipefail
BIN="${1:?usage: demo.sh BIN_DIR [messages]}"
N="${2:-3000}"
WORK="$(mktemp -d /tmp/steadfast-demo.XXXXXX)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
SPORT=$(free_port); PPORT=$(free_port)
SEC=(--listen "127.0.0.1:$SPORT" --data "$WORK/secondary" --fault-rate 0.15 --drop-rate 0.05 --delay-ms 1)
PIDS=()
trap 'for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done' EXIT

# metric URL NAME: a value from a /metrics page, or "-" (never fails: the page may be gone).
metric() { { curl -fs --max-time 1 "$1" 2>/dev/null || true; } | awk -v m="$2" '$1==m {printf "%d", $2; f=1} END {if (!f) printf "-"}'; }
start_secondary() {
  "$BIN/steadfast-secondary" "${SEC[@]}" 2>>"$WORK/secondary.log" &
  SPID=$!; PIDS+=("$SPID")
}

echo "(applied = acknowledged by the secondary after its commit; pending = in the primary's outbox)"
echo "steadfast demo: secondary on 127.0.0.1:$SPORT (15% 503s with Retry-After, 5% dropped connections),"
echo "primary on 127.0.0.1:$PPORT ingesting $N messages from stdin; data and logs in $WORK"
start_secondary
until curl -fs -o /dev/null "http://127.0.0.1:$SPORT/health"; do sleep 0.05; done

# The publisher: N JSON lines, a few hundred a second, so that delivery and the
# secondary's crashes overlap.
( for ((i = 1; i <= N; i++)); do
    printf '{"order":%d,"item":"sku-%d","qty":%d}\n' "$i" $((i % 97)) $((i % 5 + 1))
    if ((i % 50 == 0)); then sleep 0.1; fi
  done ) | "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$SPORT" --data "$WORK/primary" \
      --listen "127.0.0.1:$PPORT" --stdin --exit-when-drained --batch-max 100 --max-backoff-ms 2000 \
      2>>"$WORK/primary.log" &
PPID_=$!; PIDS+=("$PPID_")

progress() {
  local p="http://127.0.0.1:$PPORT/metrics" s="http://127.0.0.1:$SPORT/metrics"
  printf '%6.1fs  published %6s  applied %6s  pending %6s  retries %5s  secondary %s\n' "$1" \
    "$(metric "$p" steadfast_primary_published_total)" "$(metric "$p" steadfast_primary_delivered_total)" \
    "$(metric "$p" steadfast_primary_outbox_depth)" "$(metric "$p" steadfast_primary_retries_total)" \
    "$( [ "$(metric "$p" steadfast_primary_secondary_online)" = 1 ] && echo online || echo OFFLINE)"
}
start=$(date +%s.%N)
t=0; kills=0; last_retries=0
while kill -0 "$PPID_" 2>/dev/null; do
  sleep 0.5
  kill -0 "$PPID_" 2>/dev/null || break
  t=$(python3 -c "import time; print(round(time.time()-$start,1))")
  r=$(metric "http://127.0.0.1:$PPORT/metrics" steadfast_primary_retries_total); [ "$r" != "-" ] && last_retries=$r
  progress "$t"
  applied=$(metric "http://127.0.0.1:$PPORT/metrics" steadfast_primary_delivered_total)
  if [ "$kills" -lt 2 ] && [ "$applied" != "-" ] && [ "$applied" -ge $(( (kills + 1) * N / 3 )) ]; then
    { kill -9 "$SPID"; wait "$SPID"; } 2>/dev/null || true
    kills=$((kills + 1))
    echo "        >>> secondary killed (kill -9), #$kills"
    sleep 1.5
    start_secondary
    echo "        >>> secondary restarting"
  fi
done
wait "$PPID_" && rc=0 || rc=$?
echo
echo "primary exited with $rc after $(python3 -c "import time; print(round(time.time()-$start,1))") s (drained)"

# Verification: every acknowledged message applied exactly once, in order.
"$BIN/steadfast-secondary" dump --data "$WORK/secondary" >"$WORK/dump" 2>/dev/null || {
  until curl -fs -o /dev/null "http://127.0.0.1:$SPORT/health"; do sleep 0.05; done
  "$BIN/steadfast-secondary" dump --data "$WORK/secondary" >"$WORK/dump"; }
status=$("$BIN/steadfast-primary" status --data "$WORK/primary")
python3 - "$WORK/dump" "$N" "$status" "$last_retries" "$WORK/primary.log" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
n, status, retries = int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
seqs = [r["seq"] for r in rows]
orders = [r["payload"]["order"] for r in rows]
ok_once = seqs == list(range(1, len(rows) + 1)) and len({r["id"] for r in rows}) == len(rows)
ok_order = orders == list(range(1, n + 1))
skipped = sum(1 for l in open(sys.argv[5]) if '"event":"dead_letter"' in l)
print(f"verification: {len(rows)} applied at the secondary, {n} published, {status['pending']} pending at the primary")
print(f"  exactly once (seqs 1..{len(rows)}, unique ids): {'yes' if ok_once else 'NO'}")
print(f"  in publish order: {'yes' if ok_order else 'NO'}")
print(f"  dead letters: {status.get('dead_letter', 0)}; retries it took: {retries}")
sys.exit(0 if ok_once and ok_order and status["pending"] == 0 else 1)
PY
echo "logs: $WORK/primary.log, $WORK/secondary.log (one JSON line per event)"
