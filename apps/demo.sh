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
if python3 - "$WORK/dump" "$N" "$status" "$last_retries" <<'PY'
import json, re, sys
n, retries = int(sys.argv[2]), sys.argv[4]
try:
    status = json.loads(sys.argv[3])
except ValueError:
    status = {}
ok = True
def check(what, good, detail=""):
    global ok
    ok = ok and good
    print(f"  {what}: {'yes' if good else 'NO'}" + (f"  ({detail})" if detail and not good else ""))
# The dump: one JSON object a line, "payload" last; the payload's raw text is compared.
rows, bad = [], []
try:
    text = open(sys.argv[1], "rb").read().decode("utf-8", "replace")
except OSError as e:
    text, bad = "", [str(e)]
for k, line in enumerate(text.splitlines(), 1):
    if not line.strip():
        continue
    try:
        row = json.loads(line)
        m = re.search(r'"payload"\s*:', line)
        raw = line[m.end():line.rindex("}")].strip(" \t\r\n")
        if json.loads(raw) != row["payload"]:
            raise ValueError("payload is not the last key")
        rows.append((row["stream"], row["seq"], row["id"], raw))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        bad.append(f"line {k}: {e}: {line[:120]}")
expected = ['{"order":%d,"item":"sku-%d","qty":%d}' % (i, i % 97, i % 5 + 1) for i in range(1, n + 1)]
seqs = [r[1] for r in rows]
ids = [r[2] for r in rows]
print(f"verification: {len(rows)} applied at the secondary, {n} published, "
      f"{status.get('pending', '?')} pending at the primary")
check("the dump reads", not bad, "; ".join(bad[:3]))
check(f"exactly once (seqs 1..{n} of one stream, unique ids)",
      seqs == list(range(1, n + 1)) and len(set(ids)) == len(ids) and len({r[0] for r in rows}) <= 1,
      f"{len(rows)} rows, seqs begin {seqs[:5]}, {len(ids) - len(set(ids))} repeated ids")
orders = []
for r in rows:
    m = re.match(r'\{\s*"order"\s*:\s*(\d+)\s*[,}]', r[3])
    orders.append(int(m.group(1)) if m else None)
first = next((k for k, o in enumerate(orders) if o != k + 1), None)
check("each order once, in publish order", orders == list(range(1, n + 1)),
      (f"first wrong at row {first + 1}: order {orders[first]}" if first is not None
       else f"{len(orders)} rows for {n} orders"))
diff = [k for k, r in enumerate(rows) if k >= n or r[3] != expected[k]]
check("payloads byte for byte as sent", not diff and len(rows) == n,
      (f"{len(diff)} differ, e.g. row {diff[0] + 1} is {rows[diff[0]][3][:80]!r}, sent "
       f"{(expected[diff[0]] if diff[0] < n else 'nothing')!r}") if diff else f"{len(rows)} rows for {n}")
check("nothing pending at the primary", status.get("pending") == 0, f"status {json.dumps(status)}")
check("no dead letters", status.get("dead_letter", 0) == 0, f"dead_letter {status.get('dead_letter')}")
print(f"  retries it took: {retries}")
sys.exit(0 if ok else 1)
PY
then :; else failures+=("the verification above failed"); fi
echo "logs: $WORK/primary.log, $WORK/secondary.log (one JSON line per event)"
if ((${#failures[@]})); then
  echo "demo FAILED:"
  for f in "${failures[@]}"; do echo "  - $f"; done
  exit 1
fi
echo "demo passed: the secondary killed twice, the primary exited 0, every order applied once, in order, as sent"
