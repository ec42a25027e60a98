#!/usr/bin/env bash
# The epoch fence as a visible, bounded, recoverable value (issue 28):
# 1. an epoch more than --max-epoch-step above the fence is refused with 400 naming the bound, applies
#    nothing and moves no fence; a failover's epoch (one higher) is taken;
# 2. the fence is on /metrics (steadfast_secondary_epoch) and in `steadfast-secondary status`;
# 3. a fence raised by mistake (within the step) is lowered offline with `set-fence` (refused while the
#    secondary runs; logged), after which a primary of the lower epoch delivers again;
# 4. a primary whose epoch is refused as beyond the step keeps its messages (no dead letter) and delivers
#    them in order once restarted with the right epoch.
source "$(dirname "$0")/lib.sh"
post() {  # post BODY: the secondary's answer as "BODY CODE"
  curl -s -m 10 -w ' %{http_code}' -X POST "${CT[@]}" -d "$1" "http://127.0.0.1:$SPORT/api/messages"
}
start_secondary
start_primary --epoch 1
publish 5 a
wait_drained 30
[ "$(metric "$SPORT" steadfast_secondary_epoch)" = 1 ] || fail "steadfast_secondary_epoch after epoch 1's deliveries: $(metric "$SPORT" steadfast_secondary_epoch)"

# 1. The absurd epoch: refused, nothing applied, the fence unmoved.
r=$(post '{"id":"x-1","stream":"evil","seq":1,"epoch":18446744073709551615,"payload":1}')
[ "${r##* }" = 400 ] || fail "epoch 2^64-1: expected 400, got $r"
json_is "${r% *}" '"18446744073709551615" in j["error"] and "1000" in j["error"] and "fence 1" in j["error"]' \
  || fail "the 400 does not name the epoch, the step and the fence: $r"
r=$(post '{"messages":[{"id":"b-1","stream":"evil","seq":1,"epoch":1,"payload":1},{"id":"b-2","stream":"evil","seq":2,"epoch":1002,"payload":2}]}')
[ "${r##* }" = 400 ] || fail "a batch with one epoch beyond the step: expected 400, got $r"
[ "$(metric "$SPORT" steadfast_secondary_epoch)" = 1 ] || fail "a refused epoch moved the fence: $(metric "$SPORT" steadfast_secondary_epoch)"
[ "$(metric "$SPORT" 'steadfast_secondary_rejected_total{reason="epoch_too_high"}')" = 2 ] || fail "the refusals were not counted"
dump_lacks '"evil"' || fail "a refused message was applied"
publish 3 a
wait_drained 30
verify a

# 2. A mistaken raise within the step (1001 = 1 + 1000): taken, and visible.
r=$(post '{"id":"m-1","stream":"mistake","seq":1,"epoch":1001,"payload":1}')
[ "${r##* }" = 200 ] || fail "epoch 1001 (within the step): expected 200, got $r"
[ "$(metric "$SPORT" steadfast_secondary_epoch)" = 1001 ] || fail "steadfast_secondary_epoch after 1001: $(metric "$SPORT" steadfast_secondary_epoch)"
json_is "$("$BIN/steadfast-secondary" status --data "$SDATA")" 'j["epoch_fence"] == 1001 and j["last_seq"]["a"] == 8' \
  || fail "status beside the running secondary: $("$BIN/steadfast-secondary" status --data "$SDATA")"
# The primary of epoch 1 is now fenced: demoted at its next send.
post_publish a '{"after":"fence"}' || true
wait_exit "$PPID_" 20
[ "$EXIT_RC" = 3 ] || fail "the primary of epoch 1 behind fence 1001 exited $EXIT_RC, not 3 (demoted)"

# 3. Lowered offline: refused while the secondary runs, then done and logged.
if "$BIN/steadfast-secondary" set-fence --data "$SDATA" --epoch 1 >"$WORK/setfence.out" 2>&1; then fail "set-fence ran beside a running secondary"; fi
grep -q "in use" "$WORK/setfence.out" || fail "set-fence beside a running secondary does not say why: $(cat "$WORK/setfence.out")"
stop "$SPID"
"$BIN/steadfast-secondary" set-fence --data "$SDATA" --epoch 1 >"$WORK/setfence.out" 2>&1 || fail "set-fence: $(cat "$WORK/setfence.out")"
log_has "$WORK/setfence.out" fence_set from=1001 to=1 || fail "set-fence did not log what it replaced: $(cat "$WORK/setfence.out")"
if "$BIN/steadfast-secondary" set-fence --data "$SDATA" --epoch -5 >"$WORK/setfence.out" 2>&1; then fail "set-fence took a negative epoch"; fi
json_is "$("$BIN/steadfast-secondary" status --data "$SDATA")" 'j["epoch_fence"] == 1' || fail "status after set-fence: $("$BIN/steadfast-secondary" status --data "$SDATA")"
start_secondary
start_primary --epoch 1
wait_drained 30
[ "$(metric "$SPORT" steadfast_secondary_epoch)" = 1 ] || fail "the fence after set-fence and a restart: $(metric "$SPORT" steadfast_secondary_epoch)"
publish 2 a
wait_drained 30
# The message published as the primary was demoted stays in its outbox and is delivered now, as is the rest.
VERIFY_APPLIED=11 verify a

# 4. A primary started with an epoch far beyond the step (a Unix time as its term, say): its messages are
#    refused with that 400, and kept, not dead-lettered (a requeue would deliver them out of order): the
#    link error's hint names --epoch, and a restart with the right epoch delivers them in order.
stop "$PPID_"
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary --epoch 1765000000
publish 3 z
wait_for 20 "a link_error for the refused epoch" log_has "$WORK/primary.log" link_error reason=http_400
log_lines "$LOG_FROM" "$WORK/primary.log" link_error | grep -q -- '--epoch' \
  || fail "the link_error's hint does not name --epoch: $(log_lines "$LOG_FROM" "$WORK/primary.log" link_error | head -1)"
sleep 1  # a few more tries on the ladder
[ "$(dead_letters)" = "0" ] || [ "$(dead_letters)" = "None" ] || fail "a refused epoch dead-lettered messages: $(dead_letters)"
[ "$(pending)" = 3 ] || fail "pending with the epoch refused: $(pending), expected 3"
dump_lacks '"stream":"z"' || fail "a message of the refused epoch was applied"
[ "$(metric "$SPORT" steadfast_secondary_epoch)" = 1 ] || fail "a refused epoch moved the fence"
stop "$PPID_"
start_primary --epoch 2
wait_drained 30
verify z
echo "PASS"
