#!/usr/bin/env bash
# (v2) The secondary's answers: duplicate only for the same id, 409 conflict for another id at an applied seq,
# one durable epoch fence for the whole secondary, checks in the order stale_epoch, conflict, gap, atomic batches;
# and a primary with an older epoch is demoted (exit 3) and keeps its messages.
source "$(dirname "$0")/lib.sh"
start_secondary
# expect_post CODE BODY PYEXPR: the secondary answers CODE with a JSON body satisfying PYEXPR (as j)
expect_post() {
  local out; out=$(post_secondary "$2" "$1")
  json_is "$out" "$3" || fail "for ${2:0:200}: expected $1 with $3, got: $out"
}
env_() { printf '{"id":"%s","stream":"%s","seq":%s%s,"payload":{"v":"%s"}}' "$1" "$2" "$3" "${4:+,\"epoch\":$4}" "$1"; }
batch() { local IFS=,; printf '{"messages":[%s]}' "$*"; }
applied() { echo 'j == {"status":"applied","seq":'"$1"'}'; }
dup() { echo 'j == {"status":"duplicate","seq":'"$1"'}'; }
conflict() { echo 'j["error"] == "conflict" and j["stream"] == "'"$1"'" and j["seq"] == '"$2"; }
gap() { echo 'j["error"] == "gap" and j["stream"] == "'"$1"'" and j["expected"] == '"$2"; }
stale() { echo 'j["error"] == "stale_epoch" and j["epoch"] == '"$1"; }

# Duplicates and conflicts.
expect_post 200 "$(env_ a1 a 1)" "$(applied 1)"
expect_post 200 "$(env_ a1 a 1)" "$(dup 1)"
expect_post 409 "$(env_ other a 1)" "$(conflict a 1)"
expect_post 200 "$(env_ a2 a 2)" "$(applied 2)"
expect_post 200 "$(batch "$(env_ a2 a 2)" "$(env_ a3 a 3)")" 'j == {"results":[{"seq":2,"status":"duplicate"},{"seq":3,"status":"applied"}]}'
expect_post 409 "$(env_ other a 1)" "$(conflict a 1)"
expect_post 409 "$(env_ other a 2)" "$(conflict a 2)"
expect_post 200 "$(env_ a2 a 2)" "$(dup 2)"
# A batch with a conflict applies nothing (b1 is not applied) and names the conflicting message.
expect_post 409 "$(batch "$(env_ b1 b 1)" "$(env_ zz a 2)")" "$(conflict a 2)"
expect_post 409 "$(env_ a9 a 9)" "$(gap a 4)"

# The epoch fence: one for the whole secondary.
expect_post 200 "$(env_ a4 a 4 5)" "$(applied 4)"
expect_post 409 "$(env_ b1 b 1 3)" "$(stale 5)"
expect_post 409 "$(env_ c1 c 1)" "$(stale 5)"          # no epoch: 0
expect_post 200 "$(env_ b1 b 1 5)" "$(applied 1)"
# Rejected messages do not move the fence: a conflict and a gap with epoch 9, a failed batch with epoch 7.
expect_post 409 "$(env_ other a 1 9)" "$(conflict a 1)"
expect_post 409 "$(env_ b9 b 9 9)" "$(gap b 2)"
expect_post 409 "$(batch "$(env_ e1 e 1 7)" "$(env_ f3 f 3 7)")" "$(gap f 1)"
expect_post 200 "$(env_ b2 b 2 5)" "$(applied 2)"
# Kept across a restart.
stop "$SPID"; [ "$EXIT_RC" = 0 ] || fail "the secondary exited $EXIT_RC on SIGTERM"
start_secondary
expect_post 409 "$(env_ b3 b 3 3)" "$(stale 5)"
expect_post 409 "$(env_ d1 d 1 4)" "$(stale 5)"
expect_post 200 "$(env_ d1 d 1 5)" "$(applied 1)"

# Check order: stale_epoch before conflict, stale_epoch before gap, conflict before gap.
expect_post 409 "$(env_ other a 1 2)" "$(stale 5)"
expect_post 409 "$(env_ a99 a 99 2)" "$(stale 5)"
expect_post 409 "$(batch "$(env_ other a 1 5)" "$(env_ g5 g 5 5)")" "$(conflict a 1)"
expect_post 409 "$(batch "$(env_ other a 1 3)" "$(env_ g5 g 5 3)")" "$(stale 5)"
# A batch names its first offending message, and applies nothing.
expect_post 409 "$(batch "$(env_ h1 h 1 5)" "$(env_ i3 i 3 5)")" "$(gap i 1)"
expect_post 409 "$(batch "$(env_ h1 h 1 5)" "$(env_ b2x b 2 5)")" "$(conflict b 2)"

# What was applied, in order.
dump >"$WORK/dump"
got=$(python3 -c 'import json,sys; print(" ".join("%s:%d:%s" % (r["stream"], r["seq"], r["id"]) for r in map(json.loads, open(sys.argv[1]))))' "$WORK/dump")
want="a:1:a1 a:2:a2 a:3:a3 a:4:a4 b:1:b1 b:2:b2 d:1:d1"
[ "$got" = "$want" ] || fail "applied: $got; expected: $want"
grep -q '"payload":{"v":"a1"}' "$WORK/dump" || fail "a conflicting message replaced a1's payload: $(head -1 "$WORK/dump")"

# Demotion: a primary with epoch 1 meets the secondary that has seen epoch 5.
stop "$SPID"
start_primary --epoch 1
publish 10
start_secondary
wait_exit "$PPID_" 30
[ "$EXIT_RC" = 3 ] || fail "a demoted primary must exit 3, got $EXIT_RC"
log_has "$WORK/primary.log" demoted epoch=1 newer_epoch=5 || fail "no demoted log line naming both epochs (1, and 5 seen)"
[ "$(pending)" = 10 ] || fail "the demoted primary must keep its messages: $(status_json)"
dump_lacks '"stream":"default"' || fail "the secondary applied messages of the stale primary"
# A primary with a current epoch delivers them.
start_primary --epoch 6
wait_drained 30
verify
echo "conflict and epoch: as documented"
