#!/usr/bin/env bash
# (v2) One process per data directory: a second steadfast-primary or steadfast-secondary server on a directory
# in use exits non-zero at once (it never waits for the lock), naming the directory; the first goes on undisturbed; `status` and `dump`
# open read-only and work while the servers run.
source "$(dirname "$0")/lib.sh"
start_secondary
start_primary
publish 20
wait_drained 30

# second NAME DIR COMMAND...: COMMAND must exit non-zero, naming DIR on its output. It must not wait for the
# lock: the 10 s timeout catches a second process that blocks. How long it took is printed, never asserted
# (shared CI machines are too noisy for a timed assertion).
second() {
  local name=$1 dir=$2; shift 2
  local t0 t1 rc=0
  t0=$(now_ms)
  timeout 10 "$@" >"$WORK/second.out" 2>&1 || rc=$?
  t1=$(now_ms)
  echo "second $name: exit $rc after $((t1 - t0)) ms: $(head -c 300 "$WORK/second.out")"
  [ "$rc" != 0 ] || fail "a second $name on a directory in use exited 0"
  [ "$rc" != 124 ] || fail "a second $name on a directory in use was still running after 10 s"
  grep -qF "$dir" "$WORK/second.out" || fail "the second $name's message does not name $dir: $(cat "$WORK/second.out")"
}
second primary "$PDATA" "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$SPORT" --data "$PDATA" \
  --listen "127.0.0.1:$(free_port)"
second primary "$PDATA" "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$SPORT" --data "$PDATA/" \
  --listen "127.0.0.1:$(free_port)"
(cd "$WORK" && second primary pdata "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$SPORT" --data pdata \
  --stdin --exit-when-drained </dev/null)
second secondary "$SDATA" "$BIN/steadfast-secondary" --listen "127.0.0.1:$(free_port)" --data "$SDATA"
second secondary "$SDATA" "$BIN/steadfast-secondary" --listen "127.0.0.1:$(free_port)" --data "$SDATA/"

# status and dump while the servers run.
st=$("$BIN/steadfast-primary" status --data "$PDATA") || fail "status failed while the primary runs: $st"
json_is "$st" 'j["pending"] == 0 and j["acked_seq"] == {"default": 20} and j["next_seq"] == {"default": 21}' \
  || fail "status while the primary runs: $st"
n=$(dump | wc -l) || fail "dump failed while the secondary runs"
[ "$n" = 20 ] || fail "dump while the secondary runs: $n lines, expected 20"

# The first ones go on undisturbed.
exited "$PPID_" && fail "the first primary died"
exited "$SPID" && fail "the first secondary died"
publish 20
wait_drained 30
verify
"$BIN/steadfast-primary" status --data "$PDATA" >/dev/null || fail "status failed"
echo "lock: one server per data directory"
