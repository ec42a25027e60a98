#!/usr/bin/env bash
# (v2) A secondary restored from an older copy reports an expected seq below what it had acknowledged:
# the primary resends from its retention (a "rewind" log event, steadfast_primary_rewinds_total) and the
# secondary ends with everything, in order, exactly once. Beyond --retain, the stream is blocked instead
# ("beyond_retention" in status, the metric and the log).
source "$(dirname "$0")/lib.sh"

# restore_old_copy: stop the secondary, put back the copy taken by take_copy, start it again
take_copy() { stop "$SPID"; rm -rf "$SDATA.old"; cp -a "$SDATA" "$SDATA.old"; start_secondary; }
restore_old_copy() { stop "$SPID"; rm -rf "$SDATA"; mv "$SDATA.old" "$SDATA"; start_secondary; }

# --retain takes durations; anything else is a bad flag (exit 2).
rc=0; out=$("$BIN/steadfast-primary" --secondary "http://127.0.0.1:$SPORT" --data "$WORK/x" --retain banana 2>&1) || rc=$?
[ "$rc" = 2 ] || fail "--retain banana: expected exit 2, got $rc: $out"
echo "$out" | grep -q -- 'retain' || fail "--retain banana: the message does not name the flag: $out"

# 1. Within retention (--retain 90s).
start_secondary
start_primary --retain 90s
publish 30 r
wait_drained 30
take_copy
publish 30 r
wait_drained 30
"$BIN/steadfast-secondary" dump --data "$SDATA.old" | grep -c '"stream":"r"' | grep -qx 30 \
  || fail "the copy to restore should hold 30 messages of r"
restore_old_copy
publish 10 r          # (the primary may have rewound already: it rechecks a restarted secondary)
wait_drained 30
log_has "$WORK/primary.log" rewind || fail "no rewind log event"
[ "$(metric "$PPORT" steadfast_primary_rewinds_total)" -ge 1 ] || fail "steadfast_primary_rewinds_total did not count the rewind"
verify r
[ "$(blocked)" = "{}" ] || fail "nothing should be blocked after a rewind within retention: $(status_json)"
[ "$(dead_letters)" = 0 ] || fail "dead letters: $(status_json)"

# 2. Beyond retention: --retain 1s, and the copy is older than that.
stop "$PPID_"
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary --retain 1s
publish 20 q
wait_drained 30
take_copy
publish 20 q
wait_drained 30
sleep 3               # retention is over for q's 21..40
stop "$PPID_"         # and a restart, where a primary may drop what it no longer has to keep
start_primary --retain 1s
restore_old_copy
publish 5 q
q_blocked() { [ "$(status_get 'j.get("blocked", {}).get("q")')" = beyond_retention ]; }
wait_for 30 'status "blocked":{"q":"beyond_retention"}' q_blocked
log_has "$WORK/primary.log" blocked stream=q reason=beyond_retention \
  || fail 'no {"event":"blocked","stream":"q","reason":"beyond_retention"} log line'
[ "$(metric "$PPORT" steadfast_primary_blocked_streams)" = 1 ] || fail "steadfast_primary_blocked_streams is not 1"
json_is "$(status_json)" 'j["pending"] >= 5 and j.get("dead_letter") == 0' || fail "q's new messages must be kept: $(status_json)"
# The secondary still has q's 1..20 and nothing after: the primary did not skip ahead.
dump | grep '"stream":"q"' | python3 -c 'import json,sys; s=[json.loads(l)["seq"] for l in sys.stdin]; assert s == list(range(1, 21)), s' \
  || fail "the secondary's q is not exactly 1..20"
# Stream r is not affected.
publish 5 r
r_done() { [ "$(status_get 'j["acked_seq"].get("r")')" = 75 ]; }
wait_for 30 "stream r delivered next to the blocked q" r_done

# 3. Restored during a quiet period: nothing is published afterwards, yet the
# primary finds out that the secondary restarted (a new X-Steadfast-Instance on
# /health, however brief the restart), each quiet stream resends its last
# acknowledged message, and the gap rewinds it.
stop "$PPID_"
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary --retain 90s
quiet_acked() { [ "$(status_get 'j["acked_seq"].get("quiet")')" = "$1" ]; }   # (q stays blocked: not drained)
publish 10 quiet
wait_for 30 "quiet's first 10 delivered" quiet_acked 10
take_copy
publish 10 quiet
wait_for 30 "quiet's next 10 delivered" quiet_acked 20
LOG_FROM=$(log_size "$WORK/primary.log")
restore_old_copy
quiet_whole() { [ "$(dump | grep -c '"stream":"quiet"')" = 20 ]; }
wait_for 30 "the restored secondary brought back to 20 messages of quiet without a publish" quiet_whole
log_has "$WORK/primary.log" secondary_restarted || fail "no secondary_restarted logged"
log_has "$WORK/primary.log" rewind stream=quiet || fail "no rewind of quiet logged"
verify quiet
[ "$(status_get 'j.get("blocked", {}).get("r")')" = None ] || fail "the recheck blocked r: $(status_json)"

# 4. Restored while the primary was down: the restarted primary rechecks the
# secondary when it first sees it.
take_copy
publish 10 quiet
wait_for 30 "quiet's third 10 delivered" quiet_acked 30
stop "$PPID_"
restore_old_copy
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary --retain 90s
quiet_30() { [ "$(dump | grep -c '"stream":"quiet"')" = 30 ]; }
wait_for 30 "the secondary restored while the primary was down brought back to 30 messages of quiet" quiet_30
log_has "$WORK/primary.log" recheck || fail "no recheck logged by the restarted primary"
verify quiet
echo "rewind: resent within retention, blocked beyond it, and found after a quiet restore, also by a restarted primary"
