#!/usr/bin/env bash
# Two secondaries given the same --consumer (issue 30): JetStream would split
# the consumer's messages between them, and each would see gaps. One nats-server:
# 1. a secondary consuming; a second one started on its consumer says so by
#    name (log consumer_in_use naming the first, /health and /ready 503
#    consumer_in_use), applies nothing, and the first goes on with everything;
# 2. two started at the same moment on one consumer: one names the other
#    and stops; the one that started first keeps the consumer and ends up
#    with every message, in order; neither applies anything twice or out of
#    order.
source "$(dirname "$0")/../pair/lib.sh"
source "$(dirname "$0")/node.sh"

PPORT=$(free_port)
PDATA="$WORK/p"
SECONDARY_URL="$URL"
start_primary
secondary() {  # secondary NAME CONSUMER PORT: sets LAUNCHED
  _launch "$WORK/$1.log" "$BIN/steadfast-secondary" --source "$URL" --consumer "$2" --data "$WORK/$1" \
    --listen "127.0.0.1:$3"
}
status_is() {  # status_is PORT PATH STATUS
  local out
  out=$(curl -s -m 5 "http://127.0.0.1:$1/$2")
  json_is "$out" "j['status'] == '$3'"
}
applied() { [ "$("$BIN/steadfast-secondary" dump --data "$WORK/$1" | wc -l)" -ge "$2" ]; }  # applied NAME N
# applied_on_stream NAME STREAM N: N messages of STREAM applied on NAME
applied_on_stream() {
  [ "$("$BIN/steadfast-secondary" dump --data "$WORK/$1" |
    python3 -c 'import json, sys; print(sum(json.loads(l)["stream"] == sys.argv[1] for l in sys.stdin))' "$2")" -ge "$3" ]
}
count() { "$BIN/steadfast-secondary" dump --data "$WORK/$1" | wc -l; }

echo "== 1. a second secondary on a consumer in use"
A=$(free_port)
secondary a c1 "$A"
A_PID=$LAUNCHED
wait_http "http://127.0.0.1:$A/health" 20 "$A_PID"
publish 30 s
wait_for 20 "the first secondary applying 30" applied a 30
B=$(free_port)
secondary b c1 "$B"
B_PID=$LAUNCHED
wait_for 15 "the second secondary naming the consumer in use" log_has "$WORK/b.log" consumer_in_use consumer=c1
grep -q "pid $A_PID " "$WORK/b.log" || fail "consumer_in_use does not name the first secondary (pid $A_PID)"
status_is "$B" health consumer_in_use || fail "the second secondary's /health: $(curl -s "http://127.0.0.1:$B/health")"
status_is "$B" ready consumer_in_use || fail "the second secondary's /ready: $(curl -s "http://127.0.0.1:$B/ready")"
publish 30 s
wait_for 20 "the first secondary applying all 60" applied a 60
sleep 12  # past the first secondary's recheck: it must not stop for the refused one
publish 10 s
wait_for 20 "the first secondary applying all 70 after its recheck" applied a 70
[ "$(count b)" = 0 ] || fail "the refused secondary applied $(count b) messages"
! log_has "$WORK/a.log" consumer_in_use || fail "the first secondary stopped for the refused one"
SDATA="$WORK/a" verify s
kill "$B_PID"

echo "== 2. two started at the same moment"
C=$(free_port)
D=$(free_port)
secondary c c2 "$C"
C_PID=$LAUNCHED
secondary d c2 "$D"
D_PID=$LAUNCHED
publish 40 t
named() { log_has "$WORK/c.log" consumer_in_use || log_has "$WORK/d.log" consumer_in_use; }
wait_for 25 "one of two simultaneous secondaries naming the other" named
# Exactly one stops; the one that started first keeps the consumer and ends
# up with everything (what the other took meanwhile, it gets again: the
# primary resends holes at its request). A resend can itself go to the other
# while both still pull, and the primary resends the same range again only
# after 2 minutes (repairs.hpp): up to about 150 s in all (seen once in 8
# runs of the build of 2026-12-07 morning, when this waited 90 s).
if log_has "$WORK/c.log" consumer_in_use; then survivor=d; else survivor=c; fi
! log_has "$WORK/$survivor.log" consumer_in_use || fail "both simultaneous secondaries stopped"
publish 20 t
wait_for 170 "the remaining secondary applying all 60 of stream t" applied_on_stream "$survivor" t 60
for s in c d; do
  "$BIN/steadfast-secondary" dump --data "$WORK/$s" | python3 -c '
import json, sys
last = {}
for line in sys.stdin:
    m = json.loads(line)
    k = m["stream"]
    if m["seq"] != last.get(k, 0) + 1:
        sys.exit("out of order or twice: %s seq %d after %d" % (k, m["seq"], last.get(k, 0)))
    last[k] = m["seq"]
' || fail "secondary $s applied out of order"
done
SDATA="$WORK/$survivor" verify t
echo "PASS"
