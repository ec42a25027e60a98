#!/usr/bin/env bash
# kill -9 of the secondary during delivery, then restart: all delivered once, in order.
source "$(dirname "$0")/lib.sh"
start_secondary --delay-ms 2
start_primary --batch-max 20
publish 300 &
PUB=$!
sleep 0.7
kill -9 "$SPID"; echo "secondary killed with $(pending) pending"
sleep 1
start_secondary --delay-ms 2
wait $PUB
sleep 0.5
kill -9 "$SPID"; echo "secondary killed again"
sleep 0.5
start_secondary
wait_drained 60
verify
