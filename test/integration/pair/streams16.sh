#!/usr/bin/env bash
# (v2) Streams deliver concurrently and independently.
# 1. 16 streams, 16 concurrent publishers (one per stream, 150 messages each), through a proxy that watches the
#    requests: everything applied in order, exactly once, byte-identical, and each message sent once, in order
#    (no resend, no gap); several streams in flight at once, never two requests of one stream; streams'
#    batches share requests (several streams in one). Then one stream from 8 publishers with bodies too big
#    to join the send window in memory among small ones: still sent once each, in order.
# 2. Stream s7 conflicts at the secondary (another writer applied a different id at seq 1): s7 is blocked
#    (status, metric, log; nothing acknowledged, nothing dead-lettered, no more requests) while the other 15
#    streams deliver everything.
source "$(dirname "$0")/lib.sh"
N=150
STREAMS=(); for i in $(seq 0 15); do STREAMS+=("s$i"); done

start_secondary --delay 50ms
XPORT=$(free_port)
start_fake "$XPORT" proxy "$SPORT"
SECONDARY_URL="http://127.0.0.1:$XPORT"
start_primary
t0=$(now_ms)
publish_streams "$N" "${STREAMS[@]}"
echo "published $((16 * N)) messages on 16 streams in $(( $(now_ms) - t0 )) ms"
wait_drained 120
echo "drained after $(( $(now_ms) - t0 )) ms"
for s in "${STREAMS[@]}"; do verify "$s"; done
per_stream=$(fake_stats "$XPORT" 'max(j["max_inflight_stream"].values())')
overall=$(fake_stats "$XPORT" 'j["max_inflight"]')
streams_at_once=$(fake_stats "$XPORT" 'j["max_streams_inflight"]')
shared=$(fake_stats "$XPORT" 'j["max_streams_per_request"]')
echo "in flight at once: at most $overall requests, $streams_at_once streams, $per_stream per stream; up to $shared streams in one request"
[ "$per_stream" = 1 ] || fail "a stream had $per_stream requests in flight at once (one at most)"
[ "$streams_at_once" -ge 4 ] || fail "at most $streams_at_once streams were in flight at once: streams do not deliver concurrently"
[ "$shared" -ge 2 ] || fail "no request carried more than one stream: streams' batches do not share requests"
# Each message went to the secondary once, in order: every stream's parts of requests, in the order the proxy
# saw them, were answered 200 and continue each other from seq 1 to N (a message skipped by the send window
# would show as a 409 and a resend, one sent twice as an overlap).
sent_once() {  # sent_once N STREAM...: each STREAM's parts of requests were answered 200 and run from 1 to N
  local n=$1; shift
  local streams; streams=$(printf '"%s",' "$@")
  local bad; bad=$(fake_stats "$XPORT" '[s for s, b in j["batches"].items() if s in ['"$streams"'] and
        ([x[2] for x in b] != [200] * len(b) or [x[0] for x in b] != [1] + [x[1] + 1 for x in b[:-1]] or b[-1][1] != '"$n"')]')
  [ "$bad" = "[]" ] || fail "streams not sent once each, in order: $bad: $(fake_stats "$XPORT" 'j["batches"]' | head -c 2000)"
}
sent_once "$N" "${STREAMS[@]}"
[ "$(metric "$PPORT" steadfast_primary_rewinds_total)" = 0 ] || fail "rewinds in a run without faults"
# Published messages join their stream's send window when committed: delivery reads the outbox about twice a
# stream (its start, and what was committed while that first read ran), not once a batch (109 reads here when
# nothing joined).
reads=$(metric "$PPORT" steadfast_primary_outbox_reads_total)
echo "delivery read the outbox $reads times for $((16 * N)) messages"
[ "$reads" -le 64 ] || fail "delivery read the outbox $reads times for 16 streams: published messages do not join the send window"
# 1b. One stream, 8 concurrent publishers, every fourth body too big to join the send window in memory (read
# back from the outbox while the small ones join): still each message sent once, in order.
publish_sized 100 m m m m m m m m
wait_drained 60
verify m
sent_once 800 m
[ "$(metric "$PPORT" steadfast_primary_rewinds_total)" = 0 ] || fail "rewinds in a run without faults"
echo "then $(( $(metric "$PPORT" steadfast_primary_outbox_reads_total) - reads )) times for stream m's 800"
requests=$(metric "$PPORT" steadfast_primary_requests_total); attempts=$(metric "$PPORT" steadfast_primary_attempts_total)
echo "the primary's metrics: $requests requests for $attempts stream batches"
[ "$requests" -gt 0 ] && [ "$requests" -lt "$attempts" ] \
  || fail "steadfast_primary_requests_total ($requests) must count requests, fewer than the batches sent ($attempts)"
# Concurrent publishes share database jobs (publish_batcher): counted in groups, fewer than the messages.
groups=$(metric "$PPORT" steadfast_primary_publish_groups_total); published=$(metric "$PPORT" steadfast_primary_published_total)
echo "$published messages published in $groups groups"
[ "$published" = $((16 * N + 800)) ] || fail "steadfast_primary_published_total is $published, not $((16 * N + 800))"
[ "$groups" -gt 0 ] && [ "$groups" -lt "$published" ] \
  || fail "steadfast_primary_publish_groups_total ($groups) must count groups of concurrent publishes, fewer than $published"
metrics=$(curl -fs "http://127.0.0.1:$PPORT/metrics")  # (read whole: grep -q leaving early would fail curl under pipefail)
grep -q '^steadfast_primary_outbox_fold_failures_total 0$' <<<"$metrics" \
  || fail "no steadfast_primary_outbox_fold_failures_total 0 in the primary's metrics"
[ "$(dead_letters)" = 0 ] || fail "dead letters: $(status_json)"
[ "$(blocked)" = "{}" ] || fail "streams blocked: $(status_json)"

# 2. The conflict on s7: fresh pair.
stop "$PPID_"; stop "$SPID"; kill "$FAKE_PID"
mkdir "$WORK/phase1" && mv "$WORK"/acks.* "$WORK/phase1/"
SPORT=$(free_port); PPORT=$(free_port); XPORT=$(free_port)
SDATA="$WORK/sdata2"; PDATA="$WORK/pdata2"
start_secondary
out=$(post_secondary '{"id":"intruder-s7-1","stream":"s7","seq":1,"payload":{"intruder":true}}' 200)
json_is "$out" 'j["status"] == "applied"' || fail "pre-applying the intruder: $out"
start_fake "$XPORT" proxy "$SPORT"
SECONDARY_URL="http://127.0.0.1:$XPORT"
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary
publish_streams "$N" "${STREAMS[@]}"
others_done() {
  [ "$(status_get 'all(j["acked_seq"].get("s%d" % i, 0) == '"$N"' for i in range(16) if i != 7)')" = True ]
}
wait_for 90 "the 15 other streams acknowledged" others_done
s7_blocked() { [ "$(status_get 'j.get("blocked", {}).get("s7")')" = conflict ]; }
wait_for 20 'status "blocked":{"s7":"conflict"}' s7_blocked
st=$(status_json); echo "status: $st"
json_is "$st" 'j.get("blocked") == {"s7": "conflict"}' || fail "only s7 must be blocked: $st"
json_is "$st" 'j["acked_seq"].get("s7", 0) == 0' || fail "nothing of s7 may be acknowledged: $st"
json_is "$st" 'j["pending"] == '"$N" || fail "s7's $N messages must all be kept: $st"
json_is "$st" 'j.get("dead_letter") == 0' || fail "a conflict must not dead-letter: $st"
[ "$(metric "$PPORT" steadfast_primary_blocked_streams)" = 1 ] || fail "steadfast_primary_blocked_streams is $(metric "$PPORT" steadfast_primary_blocked_streams), expected 1"
log_has "$WORK/primary.log" blocked stream=s7 reason=conflict || fail 'no {"event":"blocked","stream":"s7","reason":"conflict"} log line'
r1=$(fake_stats "$XPORT" 'j["requests"].get("s7", 0)')
sleep 2
r2=$(fake_stats "$XPORT" 'j["requests"].get("s7", 0)')
[ "$r1" = "$r2" ] || fail "a blocked stream must stop: s7 requests went from $r1 to $r2 in 2 s"
for s in "${STREAMS[@]}"; do [ "$s" = s7 ] || verify "$s"; done
dump | grep '"stream":"s7"' >"$WORK/s7" || true
[ "$(wc -l <"$WORK/s7")" = 1 ] && grep -q '"id":"intruder-s7-1"' "$WORK/s7" \
  || fail "s7 at the secondary must hold only the intruder: $(head -3 "$WORK/s7")"
echo "streams16: 16 concurrent streams delivered; a conflicting stream blocked alone"
