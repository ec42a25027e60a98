#!/usr/bin/env bash
# SIGTERM to the primary while a big batch is in flight (a secondary that takes 500 ms to answer): the primary
# exits 0 promptly; a restart delivers everything, exactly once. And SIGTERM to a --stdin primary while its
# input still flows: every line it read is stored (they are gone from the pipe), and input_stopped says how many.
source "$(dirname "$0")/lib.sh"
start_secondary --delay-ms 500
# Batches of 100 at 500 ms a request: delivering 800 messages takes 4 s or more,
# however long publishing takes (a slow sanitizer build took long enough for
# bigger batches to drain everything before the SIGTERM).
start_primary --sync off --batch-max 100
publish_streams 100 big big big big big big big big   # 8 publishers, 800 messages
# Publishing took a while: within 0.6 s the request in flight ends and the next batch goes out.
sleep 0.6
[ "$(metric "$PPORT" steadfast_primary_attempts_total)" -ge 2 ] || fail "the primary is not sending"
before=$(pending)
[ "$before" -gt 0 ] || fail "nothing pending at the SIGTERM: the test would test nothing"
t0=$(now_ms)
stop "$PPID_" 10
echo "primary stopped with $before pending: exit $EXIT_RC after $(( $(now_ms) - t0 )) ms"
[ "$EXIT_RC" = 0 ] || fail "SIGTERM: exit code $EXIT_RC, expected 0"
start_primary --sync off
wait_drained 60
verify big
dups=$(metric "$SPORT" steadfast_secondary_duplicates_total)
echo "the secondary saw $dups duplicates (resent after the restart, not applied twice)"

# --stdin, stopped mid-input.
mkfifo "$WORK/fifo"
python3 -c '
import sys, time
for i in range(1, 200001):
    sys.stdout.write("{\"i\":%d}\n" % i)
    if i % 5000 == 0:
        sys.stdout.flush(); time.sleep(0.05)' >"$WORK/fifo" 2>/dev/null &
FEED=$!; PIDS+=("$FEED")
"$BIN/steadfast-primary" --secondary "http://127.0.0.1:1" --data "$WORK/pstdin" --stdin <"$WORK/fifo" 2>"$WORK/stdin.log" &
SP=$!; PIDS+=("$SP")
stdin_stored() { [ -f "$WORK/pstdin/primary.db" ] && [ "$("$BIN/steadfast-primary" status --data "$WORK/pstdin" 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["pending"] > 0)')" = True ]; }
wait_for 20 "the --stdin primary storing its input" stdin_stored
kill -TERM "$SP"
wait_exit "$SP" 10
[ "$EXIT_RC" = 0 ] || fail "--stdin primary: SIGTERM exit code $EXIT_RC"
kill "$FEED" 2>/dev/null || true
python3 - "$WORK/stdin.log" "$WORK/pstdin/primary.db" <<'PY' || fail "--stdin after SIGTERM: $(tail -3 "$WORK/stdin.log")"
import json, sqlite3, sys
read = [json.loads(l) for l in open(sys.argv[1]) if '"input_stopped"' in l]
assert read, "no input_stopped event"
n = read[0]["lines_read"]
assert "first_line_not_stored" not in read[0], read[0]  # nothing failed: every line read was stored
stored = [json.loads(p)["i"] for (p,) in sqlite3.connect(sys.argv[2]).execute("SELECT payload FROM (SELECT seq, payload FROM outbox UNION ALL SELECT seq, payload FROM outbox_tail) ORDER BY seq")]
assert stored == list(range(1, n + 1)), f"{n} lines read, stored {len(stored)}: {stored[:2]}..{stored[-2:]}"
assert 0 < n < 200000, f"lines_read {n}: the input should have been cut off mid-way"
# Nothing was delivered (the secondary is a closed port): the last line's pending is everything stored, as
# `status` says, including the groups committed after the event loop stopped.
stopped = [json.loads(l) for l in open(sys.argv[1]) if '"event":"stopped"' in l]
assert stopped and stopped[-1]["pending"] == len(stored), f"stopped says pending {stopped and stopped[-1]['pending']}, {len(stored)} stored"
print(f"--stdin stopped by SIGTERM after {n} lines: all {n} stored, in order")
PY
