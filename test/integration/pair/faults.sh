#!/usr/bin/env bash
# The secondary answers 503s and drops connections: all delivered, from 8 concurrent publishers.
source "$(dirname "$0")/lib.sh"
start_secondary --fault-rate 0.3 --drop-rate 0.2
start_primary --batch-max 50
publish_parallel 800
[ "$(acked_count default)" = 800 ] || fail "expected 800 acknowledgements, got $(acked_count default)"
wait_drained 120
verify
retries=$(metric "$PPORT" steadfast_primary_retries_total)
echo "retries: $retries"
[ "$retries" -gt 0 ] || fail "expected retries with 50% faults"
[ "$(dead_letters)" = 0 ] || fail "503s and dropped connections must not make dead letters: $(status_json)"
