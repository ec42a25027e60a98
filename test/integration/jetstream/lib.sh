# What the JetStream pair tests share, on top of ../pair/lib.sh: a 3-node
# cluster started now and stopped at exit, and secondaries that consume it.
# Set JS=(--js-stream NAME) before using start_source.
source "$(dirname "${BASH_SOURCE[0]}")/../pair/lib.sh"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NATS="$WORK/nats"
trap 'bash "$here/cluster.sh" stop "$NATS" >/dev/null 2>&1 || true; cleanup' EXIT
URLS=$(bash "$here/cluster.sh" start "$NATS" 3) || fail "the NATS cluster did not start"
echo "cluster: $URLS"
SECONDARY_URL="$URLS"
start_source() {  # start_source N PORT: secondary N consuming with its own durable consumer cN, data in $WORK/sN
  _launch "$WORK/secondary$1.log" "$BIN/steadfast-secondary" --source "$URLS" "${JS[@]}" --consumer "c$1" \
    --data "$WORK/s$1" --listen "127.0.0.1:$2"
  eval "S$1PID=$LAUNCHED"
  wait_http "http://127.0.0.1:$2/metrics" 10 "$LAUNCHED"
}
applied_on() { "$BIN/steadfast-secondary" dump --data "$WORK/s$1" | wc -l; }  # applied_on N
applied_all() { [ "$(applied_on "$1")" -ge "$2" ]; }                       # applied_all N COUNT
applied_on_both() {  # applied_on_both COUNT STREAM WHAT: both secondaries applied COUNT; STREAM verified on each
  local n
  for n in 1 2; do
    wait_for 30 "secondary $n $3" applied_all "$n" "$1"
    SDATA="$WORK/s$n" verify "$2"
  done
}
