#!/usr/bin/env bash
# Side by side, in one run: two builds of the pair (for example the last
# release and this tree) on the figures both support, alternating A, B, A, B so
# that the machine's drift hits both alike.
#   bash test/bench/compare-pair.sh OLD_BIN_DIR NEW_BIN_DIR [rounds]
# 1. like-for-like: --sync off, --batch-max 1, 30,000 messages from --stdin;
# 2. --stdin end to end with fsync on both sides, 200,000 messages;
# 3. /publish, one stream, 16 publishers (wrk -t2 -c16, 4 s), fsync on both sides;
# 4. /publish to 16 streams, 16 publishers (wrk -t2 -c16, 4 s), fsync on both
#    sides: acknowledged, and delivered end to end (as run-pair.sh section 3).
set -euo pipefail
A="${1:?usage: compare-pair.sh OLD_BIN_DIR NEW_BIN_DIR [rounds]}"; B="${2:?}"; ROUNDS="${3:-2}"
A=$(realpath "$A"); B=$(realpath "$B")  # lib.sh changes to the repository
BENCH_NAME=compare source "$(dirname "$0")/lib.sh"
lines 30000 >"$WORK/in1"; lines 200000 >"$WORK/in2"
cat >"$WORK/publish.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"n":1,"pad":"abcdefghijklmnopqrstuvwxyz"}'
wrk.headers["Content-Type"] = "application/json"
LUA

# rate WRK_COMMAND...: wrk's requests per second; fails if any answer was not
# 2xx (a failed commit answered 503 would otherwise count as a fast publish).
rate() {
  local out; out=$("$@")
  if grep -q 'Non-2xx' <<<"$out"; then echo "$out" >&2; echo "non-2xx answers to: $*" >&2; return 1; fi
  awk '/Requests\/sec/ {print int($2)}' <<<"$out"
}
run() {  # run LABEL BIN_DIR ROUND
  local label=$1 bin=$2 r=$3 d="$WORK/$1-$3" s p sp pp
  mkdir -p "$d"
  s=$(port); "$bin/steadfast-secondary" --listen "127.0.0.1:$s" --data "$d/s1" --sync off 2>/dev/null & sp=$!; PIDS+=($sp)
  wait_up "http://127.0.0.1:$s/health"
  "$bin/steadfast-primary" --secondary "http://127.0.0.1:$s" --data "$d/p1" --sync off --stdin --exit-when-drained \
    --batch-max 1 <"$WORK/in1" 2>"$d/p1.log"
  local r1; r1=$(python3 -c "print(round(30000/($(ts "$d/p1.log" drained)-$(ts "$d/p1.log" started))))")
  kill -9 $sp
  s=$(port); "$bin/steadfast-secondary" --listen "127.0.0.1:$s" --data "$d/s2" 2>/dev/null & sp=$!; PIDS+=($sp)
  wait_up "http://127.0.0.1:$s/health"
  "$bin/steadfast-primary" --secondary "http://127.0.0.1:$s" --data "$d/p2" --stdin --exit-when-drained \
    <"$WORK/in2" 2>"$d/p2.log"
  local r2; r2=$(python3 -c "print(round(200000/($(ts "$d/p2.log" drained)-$(ts "$d/p2.log" started))))")
  kill -9 $sp
  s=$(port); p=$(port)
  "$bin/steadfast-secondary" --listen "127.0.0.1:$s" --data "$d/s3" 2>/dev/null & sp=$!; PIDS+=($sp)
  wait_up "http://127.0.0.1:$s/health"
  "$bin/steadfast-primary" --secondary "http://127.0.0.1:$s" --data "$d/p3" --listen "127.0.0.1:$p" 2>/dev/null & pp=$!; PIDS+=($pp)
  wait_up "http://127.0.0.1:$p/health"
  local r3; r3=$(rate wrk -t2 -c16 -d4s -s "$WORK/publish.lua" "http://127.0.0.1:$p/publish")
  kill -9 $sp $pp
  s=$(port); p=$(port)
  "$bin/steadfast-secondary" --listen "127.0.0.1:$s" --data "$d/s4" 2>/dev/null & sp=$!; PIDS+=($sp)
  wait_up "http://127.0.0.1:$s/health"
  "$bin/steadfast-primary" --secondary "http://127.0.0.1:$s" --data "$d/p4" --listen "127.0.0.1:$p" --connections 8 \
    2>/dev/null & pp=$!; PIDS+=($pp)
  wait_up "http://127.0.0.1:$p/health"
  local t0 r4 published delivered t2
  watch_delivered "$p"
  t0=$EPOCHREALTIME
  r4=$(rate wrk -t2 -c16 -d4s -s test/bench/publish16.lua "http://127.0.0.1:$p")
  read -r published delivered t2 < <(delivered_at)
  [ "$published" = "$delivered" ] || { echo "$label round $r: 16 streams delivered $delivered of $published" >&2; exit 1; }
  kill -9 $sp $pp
  printf '%-4s round %d: like-for-like %6d msg/s | stdin end to end %7d msg/s | /publish 16 publishers %6d msg/s | 16 streams acknowledged %6d, delivered %6d msg/s\n' \
    "$label" "$r" "$r1" "$r2" "$r3" "$r4" "$(python3 -c "print(round($delivered/($t2-$t0)))")"
}
for ((r = 1; r <= ROUNDS; r++)); do run A "$A" "$r"; run B "$B" "$r"; done
