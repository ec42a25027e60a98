# Helpers for the pair's integration tests: start, kill and check the real binaries.
# Each test runs in its own scratch folder with its own ports.
set -euo pipefail
BIN="${BIN:?set BIN to the folder with steadfast-primary and steadfast-secondary}"
WORK="$(mktemp -d /tmp/steadfast-pair.XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

fail() { echo "FAIL: $*" >&2; echo "--- primary log" >&2; tail -20 "$WORK/primary.log" 2>/dev/null >&2 || true;
         echo "--- secondary log" >&2; tail -20 "$WORK/secondary.log" 2>/dev/null >&2 || true; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
SPORT=$(free_port); PPORT=$(free_port)

wait_http() {  # wait_http URL [seconds]
  local deadline=$((SECONDS + ${2:-10}))
  until curl -fs -o /dev/null "$1"; do
    [ $SECONDS -lt $deadline ] || fail "$1 did not answer"
    sleep 0.05
  done
}
start_secondary() {  # extra flags...
  "$BIN/steadfast-secondary" --listen "127.0.0.1:$SPORT" --data "$WORK/sdata" "$@" >>"$WORK/secondary.log" 2>&1 &
  SPID=$!; PIDS+=("$SPID")
  wait_http "http://127.0.0.1:$SPORT/health"
}
start_primary() {  # extra flags...
  "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$SPORT" --data "$WORK/pdata" --listen "127.0.0.1:$PPORT" \
    --max-backoff-ms 500 "$@" >>"$WORK/primary.log" 2>&1 &
  PPID_=$!; PIDS+=("$PPID_")
  wait_http "http://127.0.0.1:$PPORT/health"
}
publish() {  # publish N [stream]: N messages {"n":i}, one request each; records acknowledged ids
  local n=$1 stream=${2:-default} i
  for ((i = 1; i <= n; i++)); do
    curl -fs -X POST -H 'Content-Type: application/json' -d "{\"n\":$i}" \
      "http://127.0.0.1:$PPORT/publish?stream=$stream" >>"$WORK/acks.$stream" || fail "publish $i was not acknowledged"
    echo >>"$WORK/acks.$stream"
  done
}
publish_parallel() {  # publish_parallel N: N messages over 8 concurrent curl loops (stream default)
  local n=$1 per=$(( $1 / 8 )) k loops=()
  for k in $(seq 0 7); do
    ( for ((i = 1; i <= per; i++)); do
        curl -fs -X POST -d "{\"k\":$k,\"i\":$i}" "http://127.0.0.1:$PPORT/publish" >>"$WORK/acks.p$k" && echo >>"$WORK/acks.p$k"
      done ) &
    loops+=($!)
  done
  wait "${loops[@]}"  # not a bare wait: the servers are children of this shell too
  cat "$WORK"/acks.p* > "$WORK/acks.default"
}
pending() { "$BIN/steadfast-primary" status --data "$WORK/pdata" | python3 -c 'import sys,json; print(json.load(sys.stdin)["pending"])'; }
wait_drained() {  # wait_drained [seconds]
  local deadline=$((SECONDS + ${1:-60}))
  until [ "$(curl -fs "http://127.0.0.1:$PPORT/metrics" | awk '/^steadfast_primary_outbox_depth /{print $2}')" = "0" ]; do
    [ $SECONDS -lt $deadline ] || fail "not drained after ${1:-60}s"
    sleep 0.2
  done
}
# verify STREAM: every acknowledged message applied exactly once, in order, nothing else.
verify() {
  local stream=${1:-default}
  "$BIN/steadfast-secondary" dump --data "$WORK/sdata" >"$WORK/dump"
  python3 - "$WORK/dump" "$WORK/acks.$stream" "$stream" <<'PY' || fail "verification failed"
import json, sys
dump, acks, stream = sys.argv[1], sys.argv[2], sys.argv[3]
rows = [json.loads(l) for l in open(dump) if l.strip()]
rows = [r for r in rows if r["stream"] == stream]
acked = [json.loads(l) for l in open(acks) if l.strip()]
seqs = [r["seq"] for r in rows]
assert seqs == list(range(1, len(seqs) + 1)), f"not in order / not exactly once: {seqs[:20]}..."
ids = {r["id"] for r in rows}
missing = [a for a in acked if a["id"] not in ids]
assert not missing, f"{len(missing)} acknowledged messages never applied, e.g. {missing[:3]}"
by_seq = {r["seq"]: r["id"] for r in rows}
wrong = [a for a in acked if by_seq.get(a["seq"]) != a["id"]]
assert not wrong, f"ids do not match seqs: {wrong[:3]}"
print(f"verified: {len(acked)} acknowledged, {len(rows)} applied on stream {stream}, in order, exactly once")
PY
}
