#!/usr/bin/env bash
# What TLS costs the pair, next to plain HTTP in one run (issue 10's goal: at
# most 25 % of plain throughput, with keep-alive):
#  1. like-for-like: primary delivery of 20,000 messages, one a request, one in
#     flight, --sync off, to a plain and to an HTTPS secondary;
#  2. /publish from 16 concurrent publishers (wrk -t2 -c16) to 16 streams, fsync
#     on both sides: plain on both links, and HTTPS on both (publishers to the
#     primary, primary to the secondary), acknowledged rate.
# Alternating plain and TLS, two rounds. Certificates: a throwaway CA.
#   bash test/bench/run-tls.sh
BENCH_NAME=tls-bench source "$(dirname "$0")/lib.sh"
build_apps
bash test/tls/make-certs.sh "$WORK/certs"
C="$WORK/certs"
up() { until curl -fs -o /dev/null --cacert "$C/ca.pem" "$1"; do sleep 0.01; done; }
N=20000
lines $N >"$WORK/in"

like_for_like() {  # like_for_like plain|tls: messages per second
  local mode=$1 sp dir=$WORK/l-$1-$RANDOM stls=() ptls=() scheme=http
  sp=$(port)
  if [ "$mode" = tls ]; then
    stls=(--tls-cert "$C/server.pem" --tls-key "$C/server.key"); ptls=(--tls-ca "$C/ca.pem"); scheme=https
  fi
  "$BIN/steadfast-secondary" --listen "127.0.0.1:$sp" --data "$dir/s" --sync off "${stls[@]}" 2>/dev/null &
  local spid=$!; PIDS+=($spid); up "$scheme://127.0.0.1:$sp/health"
  "$BIN/steadfast-primary" --secondary "$scheme://127.0.0.1:$sp" "${ptls[@]}" --data "$dir/p" --sync off --stdin \
    --exit-when-drained --batch-max 1 <"$WORK/in" 2>"$dir.log"
  kill -9 $spid
  python3 -c "print(round($N/($(ts "$dir.log" drained)-$(ts "$dir.log" started))))"
}
publish16() {  # publish16 plain|tls: acknowledged /publish per second
  local mode=$1 sp pp dir=$WORK/p-$1-$RANDOM stls=() ptls=() scheme=http
  sp=$(port); pp=$(port)
  if [ "$mode" = tls ]; then
    stls=(--tls-cert "$C/server.pem" --tls-key "$C/server.key")
    ptls=(--tls-ca "$C/ca.pem" --tls-cert "$C/server.pem" --tls-key "$C/server.key" --tls-listen); scheme=https
  fi
  "$BIN/steadfast-secondary" --listen "127.0.0.1:$sp" --data "$dir/s" "${stls[@]}" 2>/dev/null &
  local spid=$!; PIDS+=($spid); up "$scheme://127.0.0.1:$sp/health"
  "$BIN/steadfast-primary" --secondary "$scheme://127.0.0.1:$sp" --data "$dir/p" --listen "127.0.0.1:$pp" "${ptls[@]}" 2>/dev/null &
  local ppid=$!; PIDS+=($ppid); up "$scheme://127.0.0.1:$pp/health"
  wrk -t2 -c16 -d5s -s test/bench/publish16.lua "$scheme://127.0.0.1:$pp" | awk '/Requests\/sec/ {print int($2)}'
  kill -9 $ppid $spid
}
declare -A lfl pub
for round in 1 2; do
  for mode in plain tls; do
    lfl[$mode$round]=$(like_for_like $mode)
    pub[$mode$round]=$(publish16 $mode)
    echo "round $round $mode: like-for-like ${lfl[$mode$round]} msg/s, /publish 16 publishers ${pub[$mode$round]} msg/s"
  done
done
python3 - "${lfl[plain1]}" "${lfl[plain2]}" "${lfl[tls1]}" "${lfl[tls2]}" "${pub[plain1]}" "${pub[plain2]}" "${pub[tls1]}" "${pub[tls2]}" <<'PY'
import sys
a = list(map(float, sys.argv[1:]))
lp, lt, pp, pt = (a[0] + a[1]) / 2, (a[2] + a[3]) / 2, (a[4] + a[5]) / 2, (a[6] + a[7]) / 2
print(f"TLS / plain, like-for-like: {lt/lp:.3f} (cost {100*(1-lt/lp):.1f} %); /publish: {pt/pp:.3f} (cost {100*(1-pt/pp):.1f} %); goal: cost <= 25 %")
PY
