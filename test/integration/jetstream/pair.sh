#!/usr/bin/env bash
# The pair over a 3-node JetStream cluster, a stream with 3 replicas: 8 streams
# from concurrent publishers, two secondaries; kill -9 of the stream's leader
# node (and its restart), of one secondary and of the primary mid-run; then
# every acknowledged message applied exactly once, in order, byte for byte, on
# both secondaries. Then a second primary on the same streams is refused
# (the expected-sequence check) and nothing of it is interleaved; a primary
# with a newer epoch demotes the running one through its fence in the log.
source "$(dirname "$0")/lib.sh"
JS=(--js-stream itest)
STREAMS=(s1 s2 s3 s4 s5 s6 s7 s8)

S1PORT=$(free_port); S2PORT=$(free_port)
leader() { bash "$here/cluster.sh" leader "$NATS" itest; }
total_acked() { cat "$WORK"/acks.* 2>/dev/null | wc -l; }
applied_over() { [ "$(applied_on "$1")" -gt "$2" ]; }  # applied_over N COUNT: secondary N applied more than COUNT

start_source 1 "$S1PORT"
start_source 2 "$S2PORT"
start_primary "${JS[@]}" --js-replicas 3 --batch-max 20 --attempt-timeout 2s
wait_for 20 "the JetStream stream created with a leader" leader >/dev/null
# Both consumers running before anything is published: a consumer whose first
# create went out before the cluster had a leader waits out its 3 s attempt,
# and would then catch up on all of phase 1 at once, with nothing left to make
# progress on after the leader's kill below (4 of 8 runs failed so).
for n in 1 2; do wait_for 30 "secondary $n consuming" log_has "$WORK/secondary$n.log" consuming; done

# 1. Publishing on 8 streams at once; meanwhile the stream's leader node is
#    killed and restarted, and secondary 2 is killed. 40 a stream more are
#    published after the kill, so that there is always something to make
#    progress on (on a loaded machine all of the first 560 were sometimes
#    applied before the kill: CI, once).
publish_streams 560 "${STREAMS[@]}" &
pub=$!
wait_for 30 "some messages applied on secondary 1" applied_over 1 200
node=$(leader) || fail "no leader for the stream"
t0=$(now_ms)
bash "$here/cluster.sh" kill "$NATS" "$node"
echo "killed NATS node $node (the stream's leader) with $(applied_on 1) applied on secondary 1"
kill9 "$S2PID"; echo "secondary 2 killed with $(applied_on 2) applied"
before=$(applied_on 1)
wait "$pub" || fail "publishing on 8 streams failed"
publish_streams 40 "${STREAMS[@]}"
wait_for 30 "progress on secondary 1 after the leader's kill" applied_over 1 "$before"
echo "progress again $(( $(now_ms) - t0 )) ms after the leader's kill (a new leader: node $(leader || echo '?'))"
bash "$here/cluster.sh" restart "$NATS" "$node"
start_source 2 "$S2PORT"
echo "phase 1: $(total_acked) acknowledged"

# 2. The leader killed again, more published while it is down, then the
#    primary killed with messages pending, and restarted.
node=$(leader) || fail "no leader for the stream"
bash "$here/cluster.sh" kill "$NATS" "$node"
publish_streams 40 "${STREAMS[@]}"
before=$(pending)
kill9 "$PPID_"
echo "primary killed with $before pending (leader node $node down)"
bash "$here/cluster.sh" restart "$NATS" "$node"
start_primary "${JS[@]}" --js-replicas 3 --batch-max 20 --attempt-timeout 2s
wait_drained 90
all=$(total_acked)
[ "$all" = $((8 * 640)) ] || fail "expected $((8 * 640)) acknowledged, got $all"
for n in 1 2; do
  wait_for 60 "secondary $n applied all $all" applied_all "$n" "$all"
  SDATA="$WORK/s$n"
  for s in "${STREAMS[@]}"; do verify "$s" >/dev/null; done
  echo "secondary $n: all $all acknowledged messages applied once, in order, byte for byte"
done
[ "$(metric "$S1PORT" steadfast_secondary_jetstream_connected)" = 1 ] || fail "secondary 1 does not report its NATS link"
[ "$(metric "$PPORT" steadfast_primary_jetstream_connected)" = 1 ] || fail "the primary does not report its NATS link"

# 3. A second primary (its own data directory) on the same streams: its
#    expectation of the log fails, it reads the log, finds another writer's
#    messages and blocks the stream; nothing of it reaches the secondaries.
P2PORT=$(free_port)
_launch "$WORK/primary2.log" "$BIN/steadfast-primary" --secondary "$URLS" "${JS[@]}" --js-replicas 3 \
  --data "$WORK/p2" --listen "127.0.0.1:$P2PORT"
P2PID=$LAUNCHED
wait_http "http://127.0.0.1:$P2PORT/health" 10 "$P2PID"
for i in 1 2 3; do
  curl -fsS -m 10 -X POST "${CT[@]}" --data-binary "{\"second_primary\":$i}" "http://127.0.0.1:$P2PORT/publish?stream=s1" >/dev/null \
    || fail "the second primary did not accept a publish"
done
wait_for 30 "the second primary blocks stream s1 (conflict)" log_has "$WORK/primary2.log" blocked stream=s1 reason=conflict
"$BIN/steadfast-primary" status --data "$WORK/p2" | grep -q '"s1":"conflict"' || fail "status of the second primary does not say s1 is blocked"
# The first primary goes on writing s1, and both secondaries get it, with none of the second's.
publish_streams 10 s1
wait_drained 30
applied_on_both $((all + 10)) s1 "applied the first primary's new messages" >/dev/null
for n in 1 2; do
  if "$BIN/steadfast-secondary" dump --data "$WORK/s$n" | grep -c second_primary >/dev/null; then
    fail "a message of the second primary was applied on secondary $n"
  fi
done
echo "a second primary on the same stream was refused; nothing interleaved"
stop "$P2PID"
[ "$EXIT_RC" = 0 ] || fail "the second primary exited $EXIT_RC on SIGTERM"

# 4. A primary with a newer --epoch takes over: its epoch fence in the log
#    demotes the running one at once (exit 3), and the secondaries refuse the
#    older epoch from then on.
P3PORT=$(free_port)
_launch "$WORK/primary3.log" "$BIN/steadfast-primary" --secondary "$URLS" "${JS[@]}" --js-replicas 3 --epoch 1 \
  --data "$WORK/p3" --listen "127.0.0.1:$P3PORT"
P3PID=$LAUNCHED
wait_http "http://127.0.0.1:$P3PORT/health" 10 "$P3PID"
wait_exit "$PPID_" 30
[ "$EXIT_RC" = 3 ] || fail "the primary of epoch 0 exited $EXIT_RC after a primary of epoch 1 started, not 3 (demoted)"
log_has "$WORK/primary.log" demoted || fail "the demoted primary did not say why"
echo "the primary of epoch 0 was demoted (exit 3) when the primary of epoch 1 wrote its fence"
PPORT=$P3PORT  # the publish helpers and wait_drained now talk to the new primary
publish_streams 10 s9
wait_drained 30
applied_on_both $((all + 20)) s9 "applied the new primary's messages" >/dev/null
for n in 1 2; do
  log_has "$WORK/secondary$n.log" epoch_fence epoch=1 || fail "secondary $n did not raise its fence to epoch 1"
done
stop "$P3PID"
[ "$EXIT_RC" = 0 ] || fail "the primary of epoch 1 exited $EXIT_RC on SIGTERM"
stop "$S1PID"
[ "$EXIT_RC" = 0 ] || fail "secondary 1 exited $EXIT_RC on SIGTERM"
echo "PASS"
