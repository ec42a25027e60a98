#!/usr/bin/env bash
# Reconnects cost O(1) requests per changed stream (issue 29): with 400 drained streams
# 1. a primary restart resends nothing (it asks the secondary what it holds, GET /api/streams, a page of 1,000
#    streams a request) and starts no processor;
# 2. a secondary restart (same data) likewise;
# 3. a secondary restored from an older copy that lacks the last message of 5 streams: exactly those 5 resend,
#    rewind, and everything ends applied once, in order.
source "$(dirname "$0")/lib.sh"
N=400
# many_streams PREFIX: one message to each of N streams PREFIX0..PREFIX{N-1}, over one keep-alive connection
many_streams() {
  python3 - "$PPORT" "$N" "$1" <<'PY' || fail "publishing to $N streams"
import http.client, sys
port, n, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
for i in range(n):
    c.request("POST", f"/publish?stream={prefix}{i}", body=b'{"i":%d}' % i, headers={"Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    assert r.status == 202, r.status
PY
}
posts() { metric "$SPORT" steadfast_secondary_request_duration_seconds_count; }
recheck_logged() { log_has "$WORK/primary.log" recheck "$@"; }
start_secondary
start_primary
many_streams s
wait_drained 60
[ "$(dump | wc -l)" = "$N" ] || fail "$(dump | wc -l) applied, not $N"

# 1. A primary restart.
stop "$PPID_"
before=$(posts)
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary
wait_for 15 "the restarted primary's recheck" recheck_logged checked=$N
log_has "$WORK/primary.log" recheck streams=0 requests=1 || fail "the recheck after a primary restart: $(grep '"recheck"' "$WORK/primary.log" | tail -1)"
sleep 1
[ "$(posts)" = "$before" ] || fail "a primary restart sent $(( $(posts) - before )) requests to the secondary for $N drained streams"
[ "$(metric "$SPORT" steadfast_secondary_duplicates_total)" = 0 ] || fail "messages resent after a primary restart"
[ "$(metric "$PPORT" steadfast_primary_active_streams)" = 0 ] || fail "the restart started $(metric "$PPORT" steadfast_primary_active_streams) processors for drained streams"

# 2. A secondary restart.
stop "$SPID"
LOG_FROM=$(log_size "$WORK/primary.log")
start_secondary
wait_for 15 "the recheck after the secondary's restart" recheck_logged checked=$N
log_has "$WORK/primary.log" recheck streams=0 || fail "the recheck after a secondary restart: $(grep '"recheck"' "$WORK/primary.log" | tail -1)"
sleep 1
[ "$(posts)" = 0 ] || fail "the restarted secondary was sent $(posts) requests for $N drained streams"

# 3. Restored from an older copy: 5 streams lack their last message.
stop "$SPID"; cp -a "$SDATA" "$SDATA.old"; start_secondary
for i in 0 1 2 3 4; do publish_one "s$i" "{\"late\":$i}"; done
wait_drained 30
stop "$SPID"; rm -rf "$SDATA"; mv "$SDATA.old" "$SDATA"
LOG_FROM=$(log_size "$WORK/primary.log")
start_secondary
wait_for 15 "the recheck of the restored secondary" recheck_logged streams=5
wait_drained 30
for i in 0 1 2 3 4; do
  got=$(dump | grep -c "\"stream\":\"s$i\"")
  [ "$got" = 2 ] || fail "stream s$i has $got messages after the rewind, not 2"
done
[ "$(dump | wc -l)" = $((N + 5)) ] || fail "$(dump | wc -l) applied in all, not $((N + 5))"
echo "PASS"
