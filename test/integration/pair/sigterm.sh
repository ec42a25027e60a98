#!/usr/bin/env bash
# SIGTERM to the primary while a big batch is in flight (a secondary that takes 500 ms to answer): the primary
# exits 0 promptly; a restart delivers everything, exactly once.
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
