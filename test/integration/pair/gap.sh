#!/usr/bin/env bash
# (v2) A 409 gap answer acknowledges at most the messages of the batch it answers.
# 1. A secondary that already holds the start of what the primary sends (pre-seeded with the same ids and
#    payloads): the first batch partly overlaps; everything ends applied in order, exactly once.
# 2. A proxy answers the first batch of stream g (which the real secondary applied) with a gap naming an
#    expected seq far past the batch: the primary must not take that as an acknowledgement of messages it
#    never sent; it goes on with the next seq, and the secondary gets everything, in order, exactly once.
source "$(dirname "$0")/lib.sh"

# 1. Pre-seeded: the primary's messages wait while the secondary is down; their first 20 are applied directly.
start_primary --batch-max 50
publish 60 p
stop "$PPID_"
start_secondary
python3 - "$WORK/acks.p" 20 >"$WORK/seed" <<'PY'
import json, sys
msgs = []
for line in open(sys.argv[1]).readlines()[: int(sys.argv[2])]:
    answer, body = line.rstrip("\n").split("\t", 1)
    a = json.loads(answer)
    msgs.append('{"id":%s,"stream":%s,"seq":%d,"payload":%s}' % (json.dumps(a["id"]), json.dumps(a["stream"]), a["seq"], json.loads(body)))
print('{"messages":[%s]}' % ",".join(msgs))
PY
out=$(post_secondary "$(cat "$WORK/seed")" 200)
json_is "$out" 'len(j["results"]) == 20 and all(r["status"] == "applied" for r in j["results"])' || fail "seeding: $out"
start_primary --batch-max 50
wait_drained 30
verify p
dups=$(metric "$SPORT" steadfast_secondary_duplicates_total)
[ "$dups" -ge 20 ] || fail "the secondary should have answered duplicate for the 20 pre-seeded messages, counted $dups"
[ "$(dead_letters)" = 0 ] || fail "dead letters: $(status_json)"
stop "$PPID_"

# 2. A gap answer naming a seq beyond the batch.
XPORT=$(free_port); PPORT=$(free_port)
PDATA="$WORK/pdata2"
SECONDARY_URL="http://127.0.0.1:$XPORT"
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary --batch-max 10
publish 50 g          # the proxy is not there yet: all 50 wait, then go out in batches of 10
start_fake "$XPORT" proxy "$SPORT" g
wait_drained 60
fake_stats "$XPORT" 'j["batches"]["g"]' >"$WORK/batches"
echo "requests for g (first seq, last seq, status): $(cat "$WORK/batches")"
python3 - "$WORK/batches" <<'PY' || fail "the primary acknowledged messages outside the batch the gap answered"
import json, sys
b = json.load(open(sys.argv[1]))
i = next(k for k, (first, last, code) in enumerate(b) if code == 409)
last = b[i][1]
nxt = b[i + 1][0]
assert nxt <= last + 1, f"after the gap answer to {b[i][:2]} the next request starts at {nxt}, past {last + 1}"
PY
verify g
log_has "$WORK/primary.log" rewind && fail "a rewind happened: the primary skipped messages and had to resend them"
[ "$(metric "$SPORT" 'steadfast_secondary_rejected_total{reason="gap"}')" = 0 ] \
  || fail "the real secondary answered gap: the primary sent past what it had delivered"
echo "gap: acknowledges at most the batch it answers"
