#!/usr/bin/env bash
# kill -9 of the primary after acknowledgements, then restart: nothing lost.
source "$(dirname "$0")/lib.sh"
start_secondary --fault-rate 0.5   # slow delivery down, so messages are pending when the primary dies
start_primary
publish 200
before=$(pending)
kill -9 "$PPID_"; echo "primary killed with $before pending"
[ "$before" -gt 0 ] || echo "(everything was delivered before the kill; still checking)"
start_primary
wait_drained 90
verify
