#!/usr/bin/env bash
# A hole in the log, repaired from the primary's retention: two JetStream
# messages of a stream are deleted from the log (what a diverged replica did
# to acknowledged messages in the chaos campaign, with nats-server 2.9.10),
# between messages that stay. A secondary consuming afterwards meets the gap,
# asks the primary (core NATS, repair_subject()) to resend the hole, and ends
# with every acknowledged message applied once, in order, byte for byte; a
# secondary that had applied everything before sees only duplicates. Requests
# that make no sense are refused, one for what was never acknowledged needs
# nothing, and one for a hole beyond retention is reported while the stream
# goes on.
source "$(dirname "$0")/lib.sh"
JS=(--js-stream rtest)
req() { python3 "$here/nats_req.py" "$URLS" "$@"; }
S1PORT=$(free_port); S2PORT=$(free_port)
delivered() { [ "$(metric "$PPORT" steadfast_primary_delivered_total)" -ge "$1" ]; }

start_primary "${JS[@]}" --js-replicas 3 --batch-max 4
start_source 2 "$S2PORT"

# 1. 24 messages of stream h, one request each, each delivered before the
#    next: batches of one to a few messages in the log.
for i in $(seq 1 24); do
  publish_one h "{\"n\":$i,\"text\":\"h-$i\"}"
  wait_for 10 "message $i in the log" delivered "$i"
done
wait_for 30 "secondary 2 applied all 24" applied_all 2 24

# 2. Delete a JetStream message in the middle of the subject rtest.h.
info=$(req '$JS.API.STREAM.INFO.rtest') || fail "STREAM.INFO: $info"
last=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["state"]["last_seq"])' "$info")
victim=$(python3 - "$last" "$here/nats_req.py" "$URLS" <<'PY'
import base64, json, subprocess, sys
last, helper, urls = int(sys.argv[1]), sys.argv[2], sys.argv[3]
rows = []
for seq in range(1, last + 1):
    out = subprocess.run([sys.executable, helper, urls, "$JS.API.STREAM.MSG.GET.rtest", json.dumps({"seq": seq})],
                         capture_output=True, text=True, check=True).stdout
    m = json.loads(out).get("message")
    if not m or m["subject"] != "rtest.h":
        continue
    body = json.loads(base64.b64decode(m["data"]))
    seqs = [e["seq"] for e in body["messages"]] if "messages" in body else [body["seq"]]
    rows.append((seq, seqs))
# two next to each other in the middle, with messages of the stream before and after them
mid = len(rows) // 2
(a, first), (b, second) = rows[mid], rows[mid + 1]
assert rows[0][1][0] < first[0] and second[-1] < rows[-1][1][-1] and second[0] == first[-1] + 1, rows
print(a, b, first[0], second[-1])
PY
) || fail "could not read the log"
read -r js_a js_b hole_from hole_to <<<"$victim"
for js_seq in "$js_a" "$js_b"; do
  out=$(req '$JS.API.STREAM.MSG.DELETE.rtest' "{\"seq\":$js_seq}") || fail "MSG.DELETE: $out"
  json_is "$out" 'j.get("success") is True' || fail "MSG.DELETE refused: $out"
done
echo "deleted log messages $js_a and $js_b: stream h seqs $hole_from..$hole_to are gone from the log"

# 3. More messages after the hole; then a new secondary reads the whole log.
for i in $(seq 25 30); do publish_one h "{\"n\":$i,\"text\":\"h-$i\"}"; done
wait_drained 30
start_source 1 "$S1PORT"
wait_for 60 "secondary 1 applied all 30 (the hole resent by the primary)" applied_all 1 30
log_has "$WORK/secondary1.log" repair_requested stream=h from_seq="$hole_from" to_seq="$hole_to" \
  || fail "secondary 1 did not ask for seqs $hole_from..$hole_to"
log_has "$WORK/primary.log" repair stream=h from_seq="$hole_from" to_seq="$hole_to" \
  || fail "the primary did not log its repair of $hole_from..$hole_to"
log_has "$WORK/primary.log" repaired stream=h || fail "the primary did not finish the repair"
[ "$(metric "$PPORT" steadfast_primary_jetstream_repairs_total)" -ge 1 ] || fail "no repair counted by the primary"
[ "$(metric "$S1PORT" steadfast_secondary_jetstream_repair_requests_total)" -ge 1 ] || fail "no request counted by secondary 1"
applied_on_both 30 h "applied all 30"
curl -fs "http://127.0.0.1:$S1PORT/health" >/dev/null || fail "secondary 1 is not healthy after the repair"
# The copy went to rtest.$repair.h; the stream's own subject still ends with
# its last message (what the next publish expects, and a restart reads).
out=$(req '$JS.API.STREAM.MSG.GET.rtest' '{"last_by_subj":"rtest.$repair.h"}') || fail "no repair copy in the log: $out"
json_is "$out" '"message" in j' || fail "no repair copy in the log: $out"
# The stream goes on after its processor went idle (5 s) and after a restart
# of the primary, with no rewind: the repair changed nothing of its subject.
LOG_FROM=$(log_size "$WORK/primary.log")
sleep 6
for i in $(seq 31 33); do publish_one h "{\"n\":$i,\"text\":\"h-$i\"}"; done
stop "$PPID_" 15
start_primary "${JS[@]}" --js-replicas 3 --batch-max 4
for i in $(seq 34 36); do publish_one h "{\"n\":$i,\"text\":\"h-$i\"}"; done
applied_on_both 36 h "applied all 36" >/dev/null
! log_has "$WORK/primary.log" rewind || fail "the primary rewound stream h after the repair"
! log_has "$WORK/primary.log" blocked || fail "the primary blocked a stream after the repair"
echo "the hole was repaired on secondary 1; secondary 2 unchanged; both verified; the stream went on"

# 4. Requests the primary refuses or cannot serve: nonsense is refused with
#    a reason; a hole before what is retained (a stream that never had such
#    seqs counts: nothing retained there) is reported, and the stream goes on.
req_pub() { python3 - "$URLS" "$1" <<'PY'
import socket, sys
host, port = sys.argv[1].split(",")[0].removeprefix("nats://").rsplit(":", 1)
s = socket.create_connection((host, int(port)))
f = s.makefile("rb"); f.readline()
p = sys.argv[2].encode()
s.sendall(b'CONNECT {"verbose":false}\r\nPUB _steadfast.repair.rtest %d\r\n%s\r\nPING\r\n' % (len(p), p))
while not f.readline().startswith(b"PONG"): pass
PY
}
LOG_FROM=$(log_size "$WORK/primary.log")
req_pub 'not json'
sleep 1.1  # refusals are logged at most once a second
req_pub '{"repair":{"stream":"h","from":0,"to":3}}'
wait_for 10 "the primary refused a request that is not JSON" log_has "$WORK/primary.log" repair_request_refused
wait_for 10 "the primary refused seq 0" log_has "$WORK/primary.log" repair_request_refused \
  'error=a repair request needs seqs 1 <= "from" <= "to"'
# The secondaries' consumers have no ack-pending limit: behind a hole, the
# stream's later messages (nak'd) never stop the copy at the log's end.
out=$(req '$JS.API.CONSUMER.INFO.rtest.c1') || fail "CONSUMER.INFO: $out"
json_is "$out" 'j["config"]["max_ack_pending"] == -1' || fail "consumer c1 has an ack-pending limit: $out"
publish_one g '{"n":1}'
publish_one g '{"n":2}'
wait_drained 30
"$BIN/steadfast-primary" status --data "$PDATA" >/dev/null
# g's seqs 1..2 are retained (--retain 1h): nothing is beyond retention yet;
# a request for seqs that were never acknowledged needs no repair.
req_pub '{"repair":{"stream":"g","from":5,"to":6,"consumer":"x"}}'
wait_for 10 "the primary found nothing to repair" log_has "$WORK/primary.log" repair_not_needed stream=g
publish_one g '{"n":3}'
wait_drained 30
applied_on_both 39 g "applied g too" >/dev/null

# 5. Beyond retention: the primary again with --retain 1s purges what was
#    acknowledged; a hole there cannot be resent: it says so, and the stream
#    goes on for everyone.
stop "$PPID_" 15
start_primary "${JS[@]}" --js-replicas 3 --batch-max 4 --retain 1s
publish_one h '{"n":37,"text":"h-37"}'
wait_drained 30
sleep 2  # acknowledged more than a second ago, purged every 250 ms
LOG_FROM=$(log_size "$WORK/primary.log")
req_pub '{"repair":{"stream":"h","from":2,"to":3,"consumer":"c9"}}'
wait_for 10 "the primary reported the hole beyond retention" log_has "$WORK/primary.log" repair_impossible stream=h
publish_one h '{"n":38,"text":"h-38"}'
applied_on_both 41 h "applied h after the refusal" >/dev/null
echo "PASS: a hole in the log repaired from retention; requests checked"
