#!/usr/bin/env bash
# The durable ladder counts each head's failures: one stream, one message a
# request, whose requests fail 60 % of the time (500, no Retry-After), with a
# single attempt before each ladder step, so that a head often fails within
# moments of the acknowledgement before it. Every
# link_error names the ladder step of its head: 1 for a head's first failure,
# one more for each failure after that until it is delivered (an
# acknowledgement marked in the outbox after the next head's first step must
# not end that head's schedule: the step would be repeated, not climbed).
source "$(dirname "$0")/lib.sh"
start_secondary --fault-rate 0.6 --fault-status 500
start_primary --quick-retries 1 --batch-max 1 --ladder "100ms 200ms 300ms"
publish 20
wait_drained 120
verify
python3 - "$WORK/primary.log" <<'PY'
import json, sys
errors = climbs = 0
head = {}  # stream -> (seq, step) of the last link_error since the last recovery
for line in open(sys.argv[1], "rb"):
    try:
        j = json.loads(line)
    except ValueError:
        continue
    if not isinstance(j, dict):
        continue
    ev, stream = j.get("event"), j.get("stream")
    if ev == "link_recovered":
        head.pop(stream, None)
    elif ev == "link_error":
        errors += 1
        seq, step = j["seq"], j["ladder_step"]
        last = head.get(stream)
        if last and last[0] == seq:
            want = last[1] + 1
            climbs += 1
        else:
            want = 1
        if step != want:
            sys.exit(f"FAIL: link_error for seq {seq} at ladder_step {step}, expected {want} "
                     f"(the head's last step was {last}): {line.decode().strip()}")
        head[stream] = (seq, step)
if errors < 5 or climbs < 2:
    sys.exit(f"FAIL: too few failures to judge the ladder: {errors} link_errors, {climbs} repeated on one head")
print(f"ladder: {errors} link_errors, {climbs} on a head that had failed before, every step one more than the last")
PY
