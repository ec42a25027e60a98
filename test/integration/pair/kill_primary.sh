#!/usr/bin/env bash
# kill -9 of the primary with acknowledged messages still pending, then restart: nothing lost, nothing twice.
source "$(dirname "$0")/lib.sh"

# 1. Nothing can be delivered before the kill: the secondary answers 503 to everything.
start_secondary --fault-rate 1
start_primary --ladder "500ms 1s"
publish 200
before=$(pending)
[ "$before" = 200 ] || fail "expected all 200 messages pending before the kill (the secondary refuses all), got $before"
kill9 "$PPID_"; echo "primary killed with $before pending"
stop "$SPID"
start_secondary
start_primary --ladder "500ms 1s"
wait_drained 90
verify

# 2. A kill in the middle of delivery: a slow secondary (10 messages a second: 10 s for all of them, while
#    publishing takes a second or two even under a loaded sanitizer build), small batches; some delivered,
#    some not. The drain after the restart goes to the same secondary, no longer slowed down.
stop "$PPID_"
stop "$SPID"
start_secondary --delay-ms 500
start_primary --batch-max 5
publish_streams 100 second
some_delivered() { [ "$(status_get 'j["acked_seq"].get("second", 0)')" -ge 5 ]; }
wait_for 20 "some messages of stream second delivered" some_delivered
before=$(pending)
delivered=$(status_get 'j["acked_seq"].get("second", 0)')
kill9 "$PPID_"; echo "primary killed with $before pending, $delivered of stream second delivered"
[ "$before" -gt 0 ] || fail "nothing was pending at the kill: the test did not test anything"
stop "$SPID"
start_secondary
start_primary --batch-max 5
wait_drained 90
verify second
verify
