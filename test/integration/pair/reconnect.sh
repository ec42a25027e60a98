#!/usr/bin/env bash
# Reconnects cost O(1) requests per changed stream (issue 29): with 2,100 drained streams (three pages of
# GET /api/streams), tokens on both sides
# 1. a primary restart resends nothing (it asks the secondary what it holds, a page of 1,000 streams a
#    request: 3 requests) and starts no processor;
# 2. a secondary restart (same data) likewise;
# 3. a secondary restored from an older copy that lacks the last message of 5 streams, two of them on either
#    side of a page boundary: exactly those 5 resend, rewind, and everything ends applied once, in order;
# 4. a secondary whose token no longer matches: the recheck fails, is counted and tried again every 5 s, and
#    completes once the token is fixed (SIGHUP).
source "$(dirname "$0")/lib.sh"
N=2100
TOKEN=recheck-token-1
echo "$TOKEN" >"$WORK/token"
PUBLISH_TOKEN=$TOKEN
# many_streams PREFIX: one message to each of N streams PREFIX0..PREFIX{N-1}, over one keep-alive connection
many_streams() {
  python3 - "$PPORT" "$N" "$1" "$TOKEN" <<'PY' || fail "publishing to $N streams"
import http.client, sys
port, n, prefix, token = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
for i in range(n):
    c.request("POST", f"/publish?stream={prefix}{i}", body=b'{"i":%d}' % i,
              headers={"Content-Type": "application/json", "Authorization": "Bearer " + token})
    r = c.getresponse(); r.read()
    assert r.status == 202, r.status
PY
}
posts() { metric "$SPORT" steadfast_secondary_request_duration_seconds_count; }
recheck_logged() { log_has "$WORK/primary.log" recheck "$@"; }
start_secondary --token-file "$WORK/token"
start_primary --token-file "$WORK/token"
many_streams s
wait_drained 60
[ "$(dump | wc -l)" = "$N" ] || fail "$(dump | wc -l) applied, not $N"

# 1. A primary restart.
stop "$PPID_"
before=$(posts)
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary --token-file "$WORK/token"
wait_for 15 "the restarted primary's recheck" recheck_logged checked=$N
log_has "$WORK/primary.log" recheck streams=0 requests=3 || fail "the recheck after a primary restart: $(grep '"recheck"' "$WORK/primary.log" | tail -1)"
sleep 1
[ "$(posts)" = "$before" ] || fail "a primary restart sent $(( $(posts) - before )) requests to the secondary for $N drained streams"
[ "$(metric "$SPORT" steadfast_secondary_duplicates_total)" = 0 ] || fail "messages resent after a primary restart"
[ "$(metric "$PPORT" steadfast_primary_active_streams)" = 0 ] || fail "the restart started $(metric "$PPORT" steadfast_primary_active_streams) processors for drained streams"

# 2. A secondary restart.
stop "$SPID"
LOG_FROM=$(log_size "$WORK/primary.log")
start_secondary --token-file "$WORK/token"
wait_for 15 "the recheck after the secondary's restart" recheck_logged checked=$N
log_has "$WORK/primary.log" recheck streams=0 || fail "the recheck after a secondary restart: $(grep '"recheck"' "$WORK/primary.log" | tail -1)"
sleep 1
[ "$(posts)" = 0 ] || fail "the restarted secondary was sent $(posts) requests for $N drained streams"

# 3. Restored from an older copy: 5 streams lack their last message.
stop "$SPID"; cp -a "$SDATA" "$SDATA.old"; start_secondary --token-file "$WORK/token"
# Streams in name order (s0 s1 s10 s100 s1000 ...): the pages end at s1898 and s908.
late=(s0 s1898 s1899 s908 s909)
for st in "${late[@]}"; do publish_one "$st" "{\"late\":\"$st\"}"; done
wait_drained 30
stop "$SPID"; rm -rf "$SDATA"; mv "$SDATA.old" "$SDATA"
LOG_FROM=$(log_size "$WORK/primary.log")
start_secondary --token-file "$WORK/token"
wait_for 15 "the recheck of the restored secondary" recheck_logged streams=5
wait_drained 30
dump >"$WORK/dump" || fail "dump failed"
for st in "${late[@]}"; do
  got=$(grep -c "\"stream\":\"$st\"" "$WORK/dump")
  [ "$got" = 2 ] || fail "stream $st has $got messages after the rewind, not 2"
done
[ "$(wc -l <"$WORK/dump")" = $((N + 5)) ] || fail "$(wc -l <"$WORK/dump") applied in all, not $((N + 5))"

# 4. The secondary's token changed: the recheck cannot ask it, says so, counts it, and tries again.
echo "recheck-token-2" >"$WORK/token.s"
stop "$SPID"
LOG_FROM=$(log_size "$WORK/primary.log")
start_secondary --token-file "$WORK/token.s"
failed() { [ "$(metric "$PPORT" steadfast_primary_recheck_failures_total)" -ge 2 ]; }
wait_for 20 "two failed rechecks counted (401)" failed
log_has "$WORK/primary.log" recheck_failed error="GET /api/streams answered 401" || fail "recheck_failed does not name the 401"
echo "$TOKEN" >"$WORK/token.s"
kill -HUP "$SPID"
wait_for 15 "the recheck once the token matches again" recheck_logged checked=$N
echo "PASS"
