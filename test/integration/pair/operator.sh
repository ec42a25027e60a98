#!/usr/bin/env bash
# What an operator looks for first: --version on both binaries (the version of
# steadfast/version.hpp), /ready next to /health, steadfast_build_info, and
# metrics that answer "is it stuck?" (per-stream pending and oldest age,
# redeliveries, the secondary's last applied seq, delivery buckets to hours).
source "$(dirname "$0")/lib.sh"
want=$(sed -n 's/^#define STEADFAST_VERSION_STRING "\(.*\)"$/\1/p' "$(dirname "$0")/../../../engine/include/steadfast/version.hpp")
[ -n "$want" ] || fail "no version in engine/include/steadfast/version.hpp"
for b in steadfast-primary steadfast-secondary; do
  out=$("$BIN/$b" --version) || fail "$b --version exited non-zero"
  [ "$out" = "$b $want" ] || fail "$b --version printed \"$out\", expected \"$b $want\""
  # (Captured first: grep -q would stop reading and pipefail see the writer's SIGPIPE.)
  help=$("$BIN/$b" --help) || fail "$b --help exited non-zero"
  grep -q -- "--version" <<<"$help" || fail "$b --help does not list --version"
  grep -q -- "exit codes" <<<"$help" || fail "$b --help does not list its exit codes"
done

start_secondary
start_primary
for p in "$SPORT" "$PPORT"; do
  body=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$p/ready")
  [ "$body" = '{"status":"ready"} 200' ] || fail "/ready on port $p answered: $body"
done
for pair in "$PPORT steadfast-primary" "$SPORT steadfast-secondary"; do
  set -- $pair
  n=$(metric "$1" "steadfast_build_info{binary=\"$2\",version=\"$want\"}")
  [ "$n" = 1 ] || fail "steadfast_build_info for $2 $want is \"$n\", expected 1: $(curl -s "http://127.0.0.1:$1/metrics" | grep build_info)"
done
publish 5
wait_drained 30
verify

# "Is it stuck?": a secondary answering 503 to everything.
stop "$PPID_"; stop "$SPID"
start_secondary --fault-rate 1
start_primary --ladder 1s --quick-retries 2
publish 3 m
value() {  # value PORT SERIES: the sample's value as printed, or nothing
  curl -fs "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {print $2}'
}
redelivered() { [ "$(metric "$PPORT" steadfast_primary_redeliveries_total)" -ge 1 ]; }
wait_for 30 "steadfast_primary_redeliveries_total >= 1 with every answer a 503" redelivered
aged() { python3 -c 'import sys; sys.exit(0 if float(sys.argv[1] or 0) >= 1.0 else 1)' "$(value "$PPORT" 'steadfast_primary_stream_oldest_pending_age_seconds{stream="m"}')"; }
wait_for 30 "the oldest pending age of stream m reaching 1 s" aged
[ "$(value "$PPORT" 'steadfast_primary_stream_pending{stream="m"}')" = 3 ] \
  || fail "steadfast_primary_stream_pending{stream=\"m\"} is not 3: $(curl -s "http://127.0.0.1:$PPORT/metrics" | grep stream_pending)"
# One scrape: the overall oldest age is at least stream m's.
curl -fs "http://127.0.0.1:$PPORT/metrics" | python3 -c '
import sys
v = {l.split()[0]: float(l.split()[1]) for l in sys.stdin if l.strip() and not l.startswith("#")}
a, m = v["steadfast_primary_oldest_pending_age_seconds"], v["steadfast_primary_stream_oldest_pending_age_seconds{stream=\"m\"}"]
sys.exit(0 if a >= m >= 1.0 else 1)' || fail "steadfast_primary_oldest_pending_age_seconds is below stream m's"
# The secondary comes back healthy: everything is delivered, and the stream's series go.
stop "$SPID"
start_secondary
wait_drained 60
verify m
metrics=$(curl -fs "http://127.0.0.1:$PPORT/metrics")
echo "$metrics" | grep -q 'stream="m"' && fail "stream m's pending series should go once it is delivered: $(echo "$metrics" | grep 'stream="m"')"
[ "$(value "$PPORT" steadfast_primary_oldest_pending_age_seconds)" = 0 ] || fail "the oldest pending age should be 0 with nothing pending"
echo "$metrics" | grep -q '^steadfast_primary_delivery_latency_seconds_bucket{le="7200"}' \
  || fail "delivery latency buckets should reach hours: $(echo "$metrics" | grep delivery_latency_seconds_bucket | tail -3)"
[ "$(value "$SPORT" 'steadfast_secondary_last_applied_seq{stream="m"}')" = 3 ] || fail "steadfast_secondary_last_applied_seq{stream=\"m\"} is not 3"
[ "$(value "$SPORT" 'steadfast_secondary_last_applied_seq{stream="default"}')" = 5 ] || fail "the secondary's last applied seq of stream default is not 5 after a restart"
python3 -c 'import sys,time; t=float(sys.argv[1]); sys.exit(0 if time.time() - 3600 < t <= time.time() + 1 else 1)' \
  "$(value "$SPORT" steadfast_secondary_last_applied_timestamp_seconds)" || fail "steadfast_secondary_last_applied_timestamp_seconds is not a recent Unix time"
echo "PASS: --version, /ready, steadfast_build_info and the stuck-stream metrics on both binaries ($want)"
