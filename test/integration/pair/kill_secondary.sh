#!/usr/bin/env bash
# kill -9 of the secondary during delivery, then restart: all delivered once, in order.
source "$(dirname "$0")/lib.sh"
start_secondary --delay-ms 2
start_primary --batch-max 20
publish 300 &
PUB=$!
sleep 0.7
kill9 "$SPID"; echo "secondary killed with $(pending) pending"
sleep 1
down=$(pending)
[ "$down" -gt 0 ] || fail "nothing pending after 1 s with the secondary down and publishing going on"
echo "$down pending while the secondary is down"
start_secondary --delay-ms 2
wait "$PUB" || fail "publishing failed while the secondary was down (the primary must accept and keep)"
sleep 0.5
kill9 "$SPID"; echo "secondary killed again"
sleep 0.5
start_secondary
wait_drained 60
verify
[ "$(dead_letters)" = 0 ] || fail "a secondary that is down must not make dead letters: $(status_json)"
