#!/usr/bin/env bash
# kill -9 of the secondary during delivery, publishing on while it is down, a restart and a second kill
# during delivery, then a last restart: all delivered once, in order, nothing dead-lettered.
# The secondary answers after 300 ms (batches of 20: at most about 65 messages a second), so that delivery
# is still going on when it is killed however fast the publishes are.
source "$(dirname "$0")/lib.sh"
start_secondary --delay-ms 300
start_primary --batch-max 20
publish 100
before=$(pending)
kill9 "$SPID"; echo "secondary killed with $before pending"
[ "$before" -gt 0 ] || fail "nothing was pending at the kill: the test did not test anything"
publish 200  # the secondary is down: the primary accepts and keeps
down=$(pending)
echo "$down pending while the secondary is down"
[ "$down" -ge 200 ] || fail "only $down pending after 200 publishes with the secondary down"
start_secondary --delay-ms 300
resumed() { [ "$(pending)" -le $((down - 20)) ]; }
wait_for 20 "a batch delivered after the restart" resumed
again=$(pending)
kill9 "$SPID"; echo "secondary killed again with $again pending"
[ "$again" -gt 0 ] || fail "nothing was pending at the second kill"
start_secondary
wait_drained 60
verify
[ "$(dead_letters)" = 0 ] || fail "a secondary that is down must not make dead letters: $(status_json)"
