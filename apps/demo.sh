#!/usr/bin/env bash
# The demo: a secondary and a primary on loopback. The primary ingests a few
# thousand messages from standard input while the secondary answers 503s and
# drops connections, and is killed (kill -9) and restarted twice. Live progress
# on the terminal; at the end, a verification read from the secondary. Exits 1
# if any check fails: the two kills happened, the primary exited 0, and every
# message was applied once, in order, with its payload text as it was sent.
#   bash apps/demo.sh BIN_DIR [messages]      (DEMO_TIMEOUT=seconds, default 300)
set -euo pipefail
BIN="${1:?usage: demo.sh BIN_DIR [messages]}"
N="${2:-3000}"
TIMEOUT="${DEMO_TIMEOUT:-300}"
WORK="$(mktemp -d /tmp/steadfast-demo.XXXXXX)"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
SPORT=$(free_port); PPORT=$(free_port)
SEC=(--listen "127.0.0.1:$SPORT" --data "$WORK/secondary" --fault-rate 0.15 --drop-rate 0.05 --delay 1ms)
PIDS=()
failures=()  # every failed check; the demo exits 1 if there is any
trap 'for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done' EXIT

# metric URL NAME: a value from a /metrics page, or "-" (never fails: the page may be gone).
metric() { { curl -fs --max-time 2 "$1" 2>/dev/null || true; } | awk -v m="$2" '$1==m {printf "%d", $2; f=1} END {if (!f) printf "-"}'; }
start_secondary() {
  "$BIN/steadfast-secondary" "${SEC[@]}" 2>>"$WORK/secondary.log" &
  SPID=$!; PIDS+=("$SPID")
}

echo "(applied = acknowledged by the secondary after its commit; pending = in the primary's outbox)"
echo "steadfast demo: secondary on 127.0.0.1:$SPORT (15% 503s with Retry-After, 5% dropped connections),"
echo "primary on 127.0.0.1:$PPORT ingesting $N messages from stdin; data and logs in $WORK"
start_secondary
for ((i = 0; i < 200; i++)); do curl -fs -o /dev/null "http://127.0.0.1:$SPORT/health" && break; sleep 0.05; done

# The publisher: N JSON lines, about 250 a second, so that delivery and the
# secondary's crashes overlap (also on a loaded machine, where each progress
# line takes a while). The payloads are deterministic: the verification
# rebuilds each one and compares the text the secondary stored.
( for ((i = 1; i <= N; i++)); do
    printf '{"order":%d,"item":"sku-%d","qty":%d}\n' "$i" $((i % 97)) $((i % 5 + 1))
    if ((i % 50 == 0)); then sleep 0.2; fi
  done ) | "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$SPORT" --data "$WORK/primary" \
      --listen "127.0.0.1:$PPORT" --stdin --exit-when-drained --batch-max 100 --max-backoff 2s \
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
deadline=$(( $(date +%s) + TIMEOUT ))
t=0; kills=0; tries=0; last_retries=0  # kills: the kill -9s that happened; tries: attempted
while kill -0 "$PPID_" 2>/dev/null; do
  sleep 0.5
  kill -0 "$PPID_" 2>/dev/null || break
  t=$(python3 -c "import time; print(round(time.time()-$start,1))")
  r=$(metric "http://127.0.0.1:$PPORT/metrics" steadfast_primary_retries_total); [ "$r" != "-" ] && last_retries=$r
  progress "$t"
  applied=$(metric "http://127.0.0.1:$PPORT/metrics" steadfast_primary_delivered_total)
  # The kills at a quarter and at half of the messages: the second one with
  # half the run still ahead, so that it happens however slow the machine.
  if [ "$tries" -lt 2 ] && [ "$applied" != "-" ] && [ "$applied" -ge $(( (tries + 1) * N / 4 )) ]; then
    tries=$((tries + 1))
    # A kill counts only if it happened: the signal was delivered and the
    # secondary died of it (exit status 128 + 9).
    krc=none
    if kill -9 "$SPID" 2>/dev/null; then wait "$SPID" 2>/dev/null && krc=0 || krc=$?; fi
    if [ "$krc" = 137 ]; then
      kills=$((kills + 1))
      echo "        >>> secondary killed (kill -9), #$kills"
    else
      echo "        >>> the kill -9 of the secondary did not happen (pid $SPID, status $krc)"
      failures+=("a kill -9 of the secondary did not happen (status $krc): had it stopped already?")
    fi
    sleep 1.5
    start_secondary
    echo "        >>> secondary restarting"
  fi
  if (( $(date +%s) > deadline )); then
    echo "        >>> the primary has not drained after ${TIMEOUT}s: stopping it"
    failures+=("the primary did not drain within ${TIMEOUT}s (DEMO_TIMEOUT)")
    kill -9 "$PPID_" 2>/dev/null || true
    break
  fi
done
wait "$PPID_" && rc=0 || rc=$?
echo
echo "primary exited with $rc after $(python3 -c "import time; print(round(time.time()-$start,1))") s"
[ "$rc" = 0 ] || failures+=("the primary exited with $rc, not 0 (--exit-when-drained exits 0 once all is acknowledged)")
[ "$kills" = 2 ] || failures+=("the secondary was killed $kills times, not 2: the demo did not show what it says")

# Verification: every message applied exactly once, in publish order, with the
# payload text byte for byte as the publisher wrote it.
dumped=0
for ((i = 0; i < 100; i++)); do  # bounded: the secondary may be restarting
  if "$BIN/steadfast-secondary" dump --data "$WORK/secondary" >"$WORK/dump" 2>>"$WORK/dump.err"; then dumped=1; break; fi
  sleep 0.1
done
[ "$dumped" = 1 ] || failures+=("steadfast-secondary dump failed: $(tail -1 "$WORK/dump.err" 2>/dev/null)")
status=$("$BIN/steadfast-primary" status --data "$WORK/primary" 2>>"$WORK/status.err") \
  || { failures+=("steadfast-primary status failed: $(tail -1 "$WORK/status.err" 2>/dev/null)"); status='{}'; }
if python3 "$(dirname "$0")/demo_verify.py" "$WORK/dump" "$N" "$status" "$last_retries"
then :; else failures+=("the verification above failed"); fi
echo "logs: $WORK/primary.log, $WORK/secondary.log (one JSON line per event)"
if ((${#failures[@]})); then
  echo "demo FAILED:"
  for f in "${failures[@]}"; do echo "  - $f"; done
  exit 1
fi
echo "demo passed: the secondary killed twice, the primary exited 0, every order applied once, in order, as sent"
