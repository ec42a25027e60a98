#!/usr/bin/env bash
# The secondary answers 503s and drops connections: all delivered, from 8 concurrent publishers.
source "$(dirname "$0")/lib.sh"
start_secondary --fault-rate 0.3 --drop-rate 0.2
start_primary --batch-max 50
publish_parallel 800
wait_drained 120
verify
retries=$(curl -fs "http://127.0.0.1:$PPORT/metrics" | awk '/^steadfast_primary_retries_total /{print $2}')
echo "retries: $retries"
[ "${retries%.*}" -gt 0 ] || fail "expected retries with 50% faults"
