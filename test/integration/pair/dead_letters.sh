#!/usr/bin/env bash
# (v2) Only 400, 413 and 422 answers make dead letters. Every other answer is a problem of the link or of the
# secondary: the primary reports it (log line, metric), keeps the message and retries on its ladder, whose last
# step repeats forever.
source "$(dirname "$0")/lib.sh"
LADDER=(--quick-retries 1 --ladder "200ms 300ms")

# 1. A "secondary" answering 404 to every POST (a wrong URL): everything kept, then delivered by the real one.
FPORT=$(free_port)
start_fake "$FPORT" fixed 404
SECONDARY_URL="http://127.0.0.1:$FPORT"
PDATA="$WORK/pdata1"
start_primary "${LADDER[@]}"
publish 20
sleep 3
st=$(status_json); echo "after 3 s of 404s: $st"
json_is "$st" 'j["pending"] == 20' || fail "every message must be kept while the secondary answers 404: $st"
json_is "$st" 'j.get("dead_letter") == 0' || fail "a 404 must not make dead letters: $st"
log_has "$WORK/primary.log" link_error || fail "no link_error log line for 404 answers"
[ "$(metric "$PPORT" steadfast_primary_link_errors_total)" -gt 0 ] || fail "steadfast_primary_link_errors_total did not count the 404s"
[ "$(metric "$PPORT" 'steadfast_primary_link_errors_total{reason="http_404"}')" -gt 0 ] \
  || fail 'steadfast_primary_link_errors_total{reason="http_404"} did not count the 404s'
[ "$(metric "$PPORT" steadfast_primary_dead_letter_total)" = 0 ] || fail "steadfast_primary_dead_letter_total is not 0"
n=$(fake_stats "$FPORT" 'j["requests"].get("default", 0)')
[ "$n" -ge 4 ] || fail "the ladder's last step must repeat: only $n requests in 3 s with --ladder \"200ms 300ms\""
stop "$PPID_"; kill "$FAKE_PID"
start_secondary
SECONDARY_URL=""
start_primary "${LADDER[@]}"
wait_drained 30
verify
[ "$(dead_letters)" = 0 ] || fail "dead letters after the switch: $(status_json)"
stop "$PPID_"

# 2. Every other status, one stream each, forever (stream cNNN gets NNN), and a slow stream (2.5 s an answer),
#    next to a healthy stream that must not be held up; then the real secondary takes the failing ones.
STATUSES=(401 403 404 405 408 415 418 429 500 501 502 503 504)
FPORT=$(free_port); PPORT=$(free_port)
start_fake "$FPORT" apply
SECONDARY_URL="http://127.0.0.1:$FPORT"
PDATA="$WORK/pdata2"
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary "${LADDER[@]}"
for c in "${STATUSES[@]}"; do publish 5 "c$c"; done
publish 3 slow        # answered after 2.5 s each
publish 10 ok
sleep 4
st=$(status_json); echo "after 4 s: $st"
json_is "$st" 'j.get("dead_letter") == 0' || fail "only 400, 413 and 422 may make dead letters: $st"
json_is "$st" 'j["pending"] - (3 - j["acked_seq"].get("slow", 0)) == 5 * '"${#STATUSES[@]}" \
  || fail "every message of the failing streams must be kept: $st"
json_is "$st" 'j["acked_seq"].get("ok") == 10' || fail "the failing and slow streams held up the healthy one: $st"
for c in "${STATUSES[@]}"; do
  n=$(fake_stats "$FPORT" "j['requests'].get('c$c', 0)")
  [ "$n" -ge 3 ] || fail "stream c$c (answered $c): only $n requests in 4 s; the ladder's last step must repeat"
done
log_has "$WORK/primary.log" link_error || fail "no link_error log line"
[ "$(metric "$PPORT" 'steadfast_primary_link_errors_total{reason="http_503"}')" -gt 0 ] \
  || fail 'steadfast_primary_link_errors_total{reason="http_503"} did not count the 503s'
# The hint fits the answer: a status no steadfast-secondary gives points at the address, a 503 at the secondary.
hint_of() {  # hint_of STREAM: the hint of the stream's first link_error line (from LOG_FROM)
  python3 - "$LOG_FROM" "$WORK/primary.log" "$1" <<'PY'
import json, sys
f = open(sys.argv[2], "rb"); f.seek(int(sys.argv[1]))
for line in f:
    try: j = json.loads(line)
    except ValueError: continue
    if j.get("event") == "link_error" and j.get("stream") == sys.argv[3]: print(j.get("hint", "")); break
PY
}
for c in 404 405 415 501; do
  hint_of "c$c" | grep -q 'is --secondary the address of a steadfast-secondary' || fail "stream c$c (answered $c): hint \"$(hint_of "c$c")\""
done
hint_of c503 | grep -q 'the secondary is failing' || fail "stream c503: hint \"$(hint_of c503)\""
stop "$PPID_"; kill "$FAKE_PID"
SECONDARY_URL=""
start_primary "${LADDER[@]}"
wait_drained 30
for c in "${STATUSES[@]}"; do verify "c$c"; done   # (ok and slow went to the fake)
[ "$(dead_letters)" = 0 ] || fail "dead letters after the switch: $(status_json)"
stop "$PPID_"

# 2b. A secondary that takes the request and answers after --attempt-timeout is slow, not missing: the hint
#     names --attempt-timeout, not "is the secondary running?" (the detail names the phase: read).
FPORT=$(free_port); PPORT=$(free_port)
start_fake "$FPORT" apply
SECONDARY_URL="http://127.0.0.1:$FPORT"
PDATA="$WORK/pdata2b"
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary "${LADDER[@]}" --attempt-timeout 1s
publish 1 slowt       # answered after 2.5 s: after the attempt's 1 s
hint_is_timeout() { hint_of slowt | grep -q -- '--attempt-timeout'; }
wait_for 10 "a link_error on the slow stream" hint_is_timeout
hint_of slowt | grep -q 'is the secondary running' && fail "a read timeout got the unreachable hint: $(hint_of slowt)"
log_has "$WORK/primary.log" link_error stream=slowt || fail "no link_error line for the slow stream"
python3 - "$LOG_FROM" "$WORK/primary.log" <<'PY' || fail "the slow stream's link_error does not name the read phase"
import json, sys
f = open(sys.argv[2], "rb"); f.seek(int(sys.argv[1]))
lines = [json.loads(l) for l in f if l.startswith(b"{")]
d = [j for j in lines if j.get("event") == "link_error" and j.get("stream") == "slowt"][0]["detail"]
assert "read: " in d and "timeout" in d, d
PY
stop "$PPID_"; kill "$FAKE_PID"

# 3. 422, 400 and 413 for one message each: exactly those dead-lettered, their streams go on.
FPORT=$(free_port); PPORT=$(free_port)
start_fake "$FPORT" apply
SECONDARY_URL="http://127.0.0.1:$FPORT"
PDATA="$WORK/pdata3"
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary "${LADDER[@]}" --batch-max 4
poison_at() {  # poison_at STREAM COUNT BAD_INDEX STATUS
  local i
  for ((i = 1; i <= $2; i++)); do
    if [ "$i" = "$3" ]; then publish_one "$1" "{\"poison\":$4}"; else publish_one "$1" "{\"n\":$i}"; fi
  done
}
# One stream after the other's dead letter, so that they are numbered x, y, z (3b relies on it): the
# streams deliver independently, and y's poisoned first message would otherwise often come first.
dead_letters_are() { json_is "$(status_json)" "j.get(\"dead_letter\") == $1"; }
poison_at x 10 3 422
wait_for 20 "x's dead letter" dead_letters_are 1
poison_at y 5 1 400
wait_for 20 "y's dead letter" dead_letters_are 2
poison_at z 6 6 413
wait_drained 30
st=$(status_json); echo "status: $st"
json_is "$st" 'j.get("dead_letter") == 3' || fail "expected exactly 3 dead letters: $st"
json_is "$st" 'j["acked_seq"]["x"] == 10 and j["acked_seq"]["y"] == 5 and j["acked_seq"]["z"] >= 5' \
  || fail "the streams did not go on past their dead letter: $st"
[ "$(metric "$PPORT" steadfast_primary_dead_letter_total)" = 3 ] || fail "steadfast_primary_dead_letter_total is $(metric "$PPORT" steadfast_primary_dead_letter_total), expected 3"
for s in x:3 y:1 z:6; do
  id=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[int(sys.argv[2]) - 1].split("\t")[0])["id"])' "$WORK/acks.${s%:*}" "${s#*:}")
  log_has "$WORK/primary.log" dead_letter id="$id" || fail "no dead_letter log line for $id (stream ${s%:*})"
done
# Every other message reached the fake, in seq order; no poisoned one was applied.
fake_stats "$FPORT" 'j["applied"]' >"$WORK/applied.json"
python3 - "$WORK/applied.json" <<'PY' || fail "the fake did not receive the other messages in order"
import json, sys
applied = json.load(open(sys.argv[1]))
want = {"x": (10, 3), "y": (5, 1), "z": (6, 6)}
for s, (n, bad) in want.items():
    real = [seq for st, seq, id_, tomb in applied if st == s and not tomb]
    firsts = list(dict.fromkeys(real))
    assert firsts == [i for i in range(1, n + 1) if i != bad], f"stream {s}: applied {real}"
print("the fake applied every message but the three dead letters, in order")
PY

# 3b. Dead letters for operators: listed (HTTP and the command); one requeued as a new message at the end of
#     its stream, once; with the primary stopped, the command requeues another. A real secondary now takes
#     what the fake refused (the requeued message starts with a gap there: the primary rewinds).
list=$(curl -fs "http://127.0.0.1:$PPORT/dead-letters") || fail "GET /dead-letters failed"
json_is "$list" 'len(j) == 3 and [(d["n"], d["stream"]) for d in j] == [(1, "x"), (2, "y"), (3, "z")] and j[0]["payload"] == {"poison": 422} and "requeued_seq" not in j[0]' \
  || fail "GET /dead-letters: $list"
# In pages: ?limit and ?after, a Link to the next page while there is one; bad queries are 400.
page() {  # page QUERY: the body in PAGE, the Link header (or nothing) in LINK
  PAGE=$(curl -fs -D "$WORK/headers" "http://127.0.0.1:$PPORT/dead-letters$1") || fail "GET /dead-letters$1 failed"
  LINK=$(tr -d '\r' <"$WORK/headers" | sed -n 's/^[Ll]ink: //p')
}
page '?limit=2'
json_is "$PAGE" '[d["n"] for d in j] == [1, 2]' || fail "GET /dead-letters?limit=2: $PAGE"
[ "$LINK" = '</dead-letters?after=2&limit=2>; rel="next"' ] || fail "the first page's Link: '$LINK'"
page '?after=2&limit=2'
json_is "$PAGE" '[d["n"] for d in j] == [3]' && [ -z "$LINK" ] || fail "the last page: $PAGE, Link '$LINK'"
page '?after=3'
[ "$PAGE" = '[]' ] && [ -z "$LINK" ] || fail "after the last dead letter: $PAGE, Link '$LINK'"
page ''
[ -z "$LINK" ] || fail "one page of 3 dead letters has a Link: '$LINK'"
for q in '?limit=0' '?limit=1001' '?after=x' '?after=-1' '?limit=1&limit=2' '?n=1'; do
  code=$(curl -s -o "$WORK/bad" -w '%{http_code}' "http://127.0.0.1:$PPORT/dead-letters$q")
  [ "$code" = 400 ] || fail "GET /dead-letters$q answered $code $(cat "$WORK/bad")"
done
stop "$PPID_"; kill "$FAKE_PID"
SECONDARY_URL=""  # the secondary of part 1, still running
start_primary "${LADDER[@]}"
requeue() {  # requeue N: POST /dead-letters/requeue?n=N; the status in RQ_CODE, the body in RQ_BODY
  RQ_CODE=$(curl -s -o "$WORK/rq" -w '%{http_code}' -X POST "http://127.0.0.1:$PPORT/dead-letters/requeue?n=$1"); RQ_BODY=$(cat "$WORK/rq")
}
requeue 1
[ "$RQ_CODE" = 202 ] && json_is "$RQ_BODY" 'j["requeued"] == 1 and j["stream"] == "x" and j["seq"] == 11' \
  || fail "requeue of dead letter 1: $RQ_CODE $RQ_BODY"
requeue 1;   [ "$RQ_CODE" = 409 ] || fail "a second requeue of dead letter 1 answered $RQ_CODE $RQ_BODY"
requeue 99;  [ "$RQ_CODE" = 404 ] || fail "requeue of a dead letter that does not exist answered $RQ_CODE $RQ_BODY"
requeue abc; [ "$RQ_CODE" = 400 ] || fail "requeue?n=abc answered $RQ_CODE $RQ_BODY"
requeue '2&x=1'; [ "$RQ_CODE" = 400 ] && [[ "$RQ_BODY" == *"unknown query parameter"*x* ]] \
  || fail "requeue?n=2&x=1 answered $RQ_CODE $RQ_BODY"
requeue '2&n=3'; [ "$RQ_CODE" = 400 ] || fail "requeue?n=2&n=3 answered $RQ_CODE $RQ_BODY"
wait_drained 30
x_done() { dump | python3 -c '
import json, sys
x = {j["seq"]: j["payload"] for j in map(json.loads, sys.stdin) if j["stream"] == "x"}
assert sorted(x) == list(range(1, 12)), sorted(x)
assert x[11] == {"poison": 422} and "steadfast_dead_letter" in x[3], (x[3], x[11])'; }
wait_for 30 "stream x at the real secondary: 1..10 (a tombstone at 3), then the requeued message as 11" x_done
"$BIN/steadfast-primary" dead-letters --data "$PDATA" | head -1 | python3 -c 'import json,sys; j=json.loads(sys.stdin.read()); assert j["n"] == 1 and j["requeued_seq"] == 11, j' \
  || fail "dead-letters does not show dead letter 1 requeued as seq 11"
rc=0; "$BIN/steadfast-primary" dead-letters --data "$PDATA" --requeue 2 >"$WORK/out" 2>"$WORK/err" || rc=$?
[ "$rc" = 1 ] && grep -q 'in use' "$WORK/err" && grep -q 'POST /dead-letters/requeue' "$WORK/err" \
  || fail "--requeue beside a running primary: exit $rc, $(cat "$WORK/err")"
stop "$PPID_"
out=$("$BIN/steadfast-primary" dead-letters --data "$PDATA" --requeue 2) || fail "--requeue 2 with the primary stopped failed"
json_is "$out" 'j["requeued"] == 2 and j["stream"] == "y" and j["seq"] == 6' || fail "--requeue 2 printed: $out"
rc=0; "$BIN/steadfast-primary" dead-letters --data "$PDATA" --requeue 2 2>"$WORK/err" || rc=$?
[ "$rc" = 1 ] && grep -q 'requeued already' "$WORK/err" || fail "a second --requeue 2: exit $rc, $(cat "$WORK/err")"
"$BIN/steadfast-primary" dead-letters --data "$PDATA" | python3 -c '
import json, sys
n = [json.loads(l)["n"] for l in sys.stdin]
assert n == [1, 2, 3], n' || fail "dead-letters does not print one JSON line for each of the 3 dead letters"
start_primary "${LADDER[@]}"
y_done() { dump | python3 -c '
import json, sys
y = {j["seq"]: j["payload"] for j in map(json.loads, sys.stdin) if j["stream"] == "y"}
assert sorted(y) == list(range(1, 7)) and y[6] == {"poison": 400}, y'; }
wait_for 30 "the requeued dead letter 2 delivered as y:6" y_done
stop "$PPID_"; stop "$SPID"
# 4. A "secondary" answering 400 to every request (a header it cannot parse, say): one dead letter,
#    then its tombstone is refused too, and the stream is blocked instead of dead-lettering in a loop.
FPORT=$(free_port); PPORT=$(free_port)
start_fake "$FPORT" fixed 400
SECONDARY_URL="http://127.0.0.1:$FPORT"
PDATA="$WORK/pdata4"
start_primary "${LADDER[@]}"
publish 5 t
t_blocked() { json_is "$(status_json)" 'j.get("blocked", {}).get("t") == "tombstone_refused"'; }
wait_for 20 "stream t blocked as tombstone_refused" t_blocked
sleep 1
st=$(status_json); echo "after 400s to everything: $st"
json_is "$st" 'j.get("dead_letter") == 1 and j["pending"] == 5' || fail "400 to everything must make one dead letter and keep the rest: $st"
stop "$PPID_"; kill "$FAKE_PID"
echo "dead letters: only for 400, 413 and 422; listed and requeued once; a refused tombstone blocks the stream"
