#!/usr/bin/env bash
# Inspection needs no write access (issue 28): `steadfast-primary status` and `dead-letters`,
# `steadfast-secondary status` and `dump`
# 1. on a cleanly stopped data directory leave no file behind (no -wal, no -shm);
# 2. work on a read-only bind mount of it, and say the same as on the writable original.
source "$(dirname "$0")/mountns.sh"
source "$(dirname "$0")/lib.sh"
start_secondary
start_primary --ladder 1s --quick-retries 1
publish 6 a
publish_one b '{"b":1}'   # a second stream
wait_drained 30
stop "$PPID_"; stop "$SPID"
files() { (cd "$1" && ls -A | sort | tr '\n' ' '); }
before_p=$(files "$PDATA"); before_s=$(files "$SDATA")
case "$before_p $before_s" in *-wal*|*-shm*) fail "a stopped directory still has -wal/-shm: $before_p / $before_s" ;; esac
p_status=$("$BIN/steadfast-primary" status --data "$PDATA") || fail "primary status: $p_status"
p_dead=$("$BIN/steadfast-primary" dead-letters --data "$PDATA") || fail "primary dead-letters: $p_dead"
s_status=$("$BIN/steadfast-secondary" status --data "$SDATA") || fail "secondary status: $s_status"
s_dump=$("$BIN/steadfast-secondary" dump --data "$SDATA") || fail "secondary dump: $s_dump"
[ "$(files "$PDATA")" = "$before_p" ] || fail "inspection left files in the primary's directory: $(files "$PDATA") (was $before_p)"
[ "$(files "$SDATA")" = "$before_s" ] || fail "inspection left files in the secondary's directory: $(files "$SDATA") (was $before_s)"
json_is "$p_status" 'j["acked_seq"]["a"] == 6 and j["pending"] == 0' || fail "primary status: $p_status"
json_is "$s_status" 'j["last_seq"]["a"] == 6 and j["applied"] == 7' || fail "secondary status: $s_status"
[ "$(printf '%s\n' "$s_dump" | wc -l)" = 7 ] || fail "dump: $s_dump"

# 2. A read-only bind mount of the same directories.
mkdir -p "$WORK/ro"
mount --bind "$WORK" "$WORK/ro" && mount -o remount,ro,bind "$WORK/ro" || fail "cannot make a read-only bind mount"
touch "$WORK/ro/pdata/x" 2>/dev/null && fail "the bind mount is writable"
[ "$("$BIN/steadfast-primary" status --data "$WORK/ro/pdata" 2>&1)" = "$p_status" ] \
  || fail "primary status on a read-only mount: $("$BIN/steadfast-primary" status --data "$WORK/ro/pdata" 2>&1)"
[ "$("$BIN/steadfast-primary" dead-letters --data "$WORK/ro/pdata" 2>&1)" = "$p_dead" ] \
  || fail "primary dead-letters on a read-only mount: $("$BIN/steadfast-primary" dead-letters --data "$WORK/ro/pdata" 2>&1)"
[ "$("$BIN/steadfast-secondary" status --data "$WORK/ro/sdata" 2>&1)" = "$s_status" ] \
  || fail "secondary status on a read-only mount: $("$BIN/steadfast-secondary" status --data "$WORK/ro/sdata" 2>&1)"
[ "$("$BIN/steadfast-secondary" dump --data "$WORK/ro/sdata" 2>&1)" = "$s_dump" ] \
  || fail "secondary dump on a read-only mount: $("$BIN/steadfast-secondary" dump --data "$WORK/ro/sdata" 2>&1 | head -3)"
# Serving is refused there with a message, not a crash.
if "$BIN/steadfast-secondary" --listen 127.0.0.1:0 --data "$WORK/ro/sdata" >"$WORK/ro-serve.out" 2>&1; then fail "the secondary served from a read-only mount"; fi
grep -q '"level":"error"' "$WORK/ro-serve.out" || fail "serving from a read-only mount: $(cat "$WORK/ro-serve.out")"
umount "$WORK/ro"
echo "PASS"
