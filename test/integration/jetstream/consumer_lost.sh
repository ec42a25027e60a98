#!/usr/bin/env bash
# A secondary's durable consumer lost on the server (an operator deleted it,
# or the server stopped answering its pulls): the secondary gets a consumer
# again by itself and applies everything, in order. One nats-server.
# 1. Deleted while a pull waits on it: the server ends that pull (409
#    Consumer Deleted); the secondary finds the consumer missing
#    (consumer_missing) and creates it again at once. (Without that check
#    it would be found by the stall watch, about 9 s later, as in 2.)
# 2. Deleted while no pull waits: the secondary is stopped (SIGSTOP) until
#    its pull has expired (1 s), the consumer deleted, the secondary
#    continued (the server's 409 goes to no pull, the 408 it had sent
#    already is this pull's: nothing tells the secondary). A
#    pull for a durable that does not exist is never answered (no 404, no
#    408), so its pulls now end on its own timer: after three in a row it
#    logs consumer_stalled and subscribes again (source.cpp,
#    stall_watch.hpp), well before its every-tenth-empty-pull check would
#    find the consumer missing (about 30 s).
source "$(dirname "$0")/../pair/lib.sh"
source "$(dirname "$0")/node.sh"
here="$(cd "$(dirname "$0")" && pwd)"

PPORT=$(free_port)
PDATA="$WORK/p"
SECONDARY_URL="$URL"
start_primary
SPORT=$(free_port)
SDATA="$WORK/s"
_launch "$WORK/secondary.log" "$BIN/steadfast-secondary" --source "$URL" --consumer c1 --data "$SDATA" \
  --listen "127.0.0.1:$SPORT"
SPID=$LAUNCHED
wait_http "http://127.0.0.1:$SPORT/health" 20 "$SPID"
applied() { [ "$("$BIN/steadfast-secondary" dump --data "$SDATA" | wc -l)" -ge "$1" ]; }  # applied N
delete_consumer() {
  local out try
  for try in 1 2 3 4 5; do
    out=$(python3 "$here/nats_req.py" "$URL" '$JS.API.CONSUMER.DELETE.steadfast.c1') ||
      fail "deleting consumer c1: $out"
    json_is "$out" "j.get('success') is True" && return 0
    # nats-server 2.9 can fail a delete while the consumer writes its state
    # (500, err_code 10051, "unlinkat .../obs/c1: directory not empty": seen
    # once in CI); the consumer is stopped by then, and a second try finds it
    # gone (10014, consumer not found).
    [ "$try" -gt 1 ] && json_is "$out" "j['error']['err_code'] == 10014" && return 0
    sleep 0.2
  done
  fail "consumer c1 was not deleted: $out"
}
health_field() { curl -s -m 5 "http://127.0.0.1:$SPORT/health" | python3 -c "import json, sys; print(json.load(sys.stdin)$1)"; }

echo "== 1. the consumer deleted while a pull waits on it"
publish 20 s
wait_for 20 "the secondary applying 20" applied 20
LOG_FROM=$(log_size "$WORK/secondary.log")
delete_consumer
wait_for 10 "the secondary finding its consumer missing" log_has "$WORK/secondary.log" consumer_missing consumer=c1
publish 20 s
wait_for 20 "the secondary applying all 40 on a consumer created again" applied 40

echo "== 2. the consumer deleted while no pull waits: the pulls are never answered"
LOG_FROM=$(log_size "$WORK/secondary.log")
# Stopped past its pull's expiry (1 s): the server has expired that pull,
# and holds none of this secondary's when the consumer goes.
kill -STOP "$SPID"
sleep 2.5
delete_consumer
kill -CONT "$SPID"
started=$SECONDS
publish 20 s
wait_for 25 "the secondary saying its consumer stalled" log_has "$WORK/secondary.log" consumer_stalled consumer=c1
took=$((SECONDS - started))
log_lines "$LOG_FROM" "$WORK/secondary.log" consumer_stalled | head -1
# The stall watch, not the periodic check, found it: three unanswered pulls
# (about 3 s each), not ten.
[ "$took" -le 20 ] || fail "the stall was found after ${took}s (three unanswered pulls take about 9 s)"
# Subscribing again is what brings the messages (the periodic check would
# create the consumer too, but only about 20 s later).
wait_for 5 "the secondary applying all 60 after subscribing again" applied 60
! log_has "$WORK/secondary.log" consumer_missing ||
  fail "the periodic check, not the stall watch, created the consumer again"
[ "$(health_field "['jetstream']['stalls']")" -ge 1 ] || fail "/health does not count the stall: $(curl -s "http://127.0.0.1:$SPORT/health")"
[ "$(health_field "['jetstream']['stalled']")" = False ] ||
  fail "/health still says stalled after delivery resumed: $(curl -s "http://127.0.0.1:$SPORT/health")"
# (Read whole first: grep -q would stop reading, and with pipefail curl's
# broken pipe would fail the check.)
metrics=$(curl -fs "http://127.0.0.1:$SPORT/metrics") || fail "/metrics did not answer"
grep -q '^steadfast_secondary_jetstream_consumer_stalls_total [1-9]' <<<"$metrics" ||
  fail "the stall metric did not count it: $(grep stalls_total <<<"$metrics")"

echo "== every message once, in order"
verify s
echo "PASS"
