#!/usr/bin/env bash
# A publisher's Idempotency-Key on /publish: the same key again (a retry after a
# lost answer, concurrent duplicates, after a restart of the primary) gets the
# first message's answer and stores nothing; the key with another payload or
# stream is refused (422); a malformed key is refused (400). The secondary
# applies each keyed message once.
source "$(dirname "$0")/lib.sh"
start_primary
P="http://127.0.0.1:$PPORT/publish"
keyed() {  # keyed KEY STREAM BODY: sets CODE, REPLAYED (the Idempotent-Replayed header) and ANSWER
  curl -s -m 30 -D "$WORK/h" -o "$WORK/b" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
    -H "Idempotency-Key: $1" --data-binary "$3" "$P?stream=$2" >"$WORK/code"
  CODE=$(cat "$WORK/code"); ANSWER=$(cat "$WORK/b")
  REPLAYED=$(tr -d '\r' <"$WORK/h" | awk -F': ' 'tolower($1)=="idempotent-replayed" {print $2}')
}
keyed order-1 k '{"order":1}'
[ "$CODE" = 202 ] && [ -z "$REPLAYED" ] || fail "the first keyed publish: $CODE $REPLAYED $ANSWER"
first=$ANSWER
record_ack "$WORK/acks.k" "$first" '{"order":1}'
keyed order-1 k '{"order":1}'
[ "$CODE $REPLAYED $ANSWER" = "202 true $first" ] || fail "the same key again: expected the first answer, replayed; got: $CODE $REPLAYED $ANSWER"
[ "$(pending)" = 1 ] || fail "a replayed key stored a message: $(status_json)"
keyed order-1 k '{"order":2}'
[ "$CODE" = 422 ] || fail "the key with another payload must be refused 422: $CODE $ANSWER"
keyed order-1 k2 '{"order":1}'
[ "$CODE" = 422 ] || fail "the key on another stream must be refused 422: $CODE $ANSWER"
keyed 'has space' k '{"order":3}'
[ "$CODE" = 400 ] || fail "a key with a space must be refused 400: $CODE $ANSWER"
[ "$(pending)" = 1 ] || fail "refused publishes stored something: $(status_json)"

# Concurrent duplicates: 8 publishers send the same key at once; one message.
python3 - "$PPORT" <<'PY' >"$WORK/conc" || fail "concurrent keyed publishes: $(cat "$WORK/conc")"
import http.client, sys, threading
port, answers = int(sys.argv[1]), []
def one():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    c.request("POST", "/publish?stream=k", body=b'{"order":"c"}',
              headers={"Content-Type": "application/json", "Idempotency-Key": "order-c"})
    r = c.getresponse()
    answers.append((r.status, r.read().decode()))
ts = [threading.Thread(target=one) for _ in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
assert all(s == 202 for s, _ in answers), answers
assert len({b for _, b in answers}) == 1, answers
print(answers[0][1])
PY
record_ack "$WORK/acks.k" "$(cat "$WORK/conc")" '{"order":"c"}'
[ "$(pending)" = 2 ] || fail "8 concurrent publishes of one key stored more than one message: $(status_json)"

# After a restart of the primary, the key is still known.
stop "$PPID_"
start_primary
keyed order-1 k '{"order":1}'
[ "$CODE $REPLAYED $ANSWER" = "202 true $first" ] || fail "the key after a restart: $CODE $REPLAYED $ANSWER"
[ "$(pending)" = 2 ] || fail "a replay after a restart stored a message: $(status_json)"
start_secondary
wait_drained 30
verify k
# With the secondary up, a keyed message alone on its stream is delivered:
# delivery learns of it from its publish (not from a later publish on the
# stream, nor from a restart's read, as above).
keyed alone-1 k3 '{"alone":1}'
[ "$CODE" = 202 ] && [ -z "$REPLAYED" ] || fail "a keyed publish with the secondary up: $CODE $REPLAYED $ANSWER"
record_ack "$WORK/acks.k3" "$ANSWER" '{"alone":1}'
wait_drained 30
verify k3
echo "idempotency keys: one message a key, replays answered as the first, conflicts refused"
