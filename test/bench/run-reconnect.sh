#!/usr/bin/env bash
# What a reconnect costs with many drained streams (issue 29): the messages resent for the recheck and the
# primary's memory after a restart, against a fresh primary's in the same run.
#   bash test/bench/run-reconnect.sh [STREAMS...]   (default: 2000 100000)
# For each stream count: one message to each stream, delivered (fsync off: this measures the reconnect,
# not the disk); then a primary restart and a secondary restart, each followed by its recheck. Prints the
# messages the secondary was sent again (its duplicates; goal <= 2 per 1,000 streams), the requests of the
# recheck, and the restarted primary's RSS against a fresh primary on an empty directory (goal: within 3 MiB
# at 2,000 streams; under 64 MiB at 100,000).
BENCH_NAME=reconnect
source "$(dirname "$0")/lib.sh"
build_apps
counts=("$@"); [ ${#counts[@]} -gt 0 ] || counts=(2000 100000)
rss_mib() { awk '/^VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
publish_n() {  # publish_n PORT N: one message to each of N streams s0..s{N-1}, 4 keep-alive connections
  python3 - "$1" "$2" <<'PY'
import http.client, sys, threading
port, n = int(sys.argv[1]), int(sys.argv[2])
def run(k):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for i in range(k, n, 4):
        c.request("POST", f"/publish?stream=s{i}", body=b'{"i":%d}' % i, headers={"Content-Type": "application/json"})
        r = c.getresponse(); r.read()
        assert r.status == 202, r.status
ts = [threading.Thread(target=run, args=(k,)) for k in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
PY
}
recheck_lines() { grep -c '"event":"recheck"' "$1" || true; }
wait_recheck() {  # wait_recheck LOG COUNT: until the log holds COUNT recheck lines (60 s)
  for _ in $(seq 600); do [ "$(recheck_lines "$1")" -ge "$2" ] && return; sleep 0.1; done
  echo "no recheck after 60 s: $(tail -3 "$1")" >&2; exit 1
}
echo "streams | resent after a primary restart | after a secondary restart | recheck requests | RSS fresh | RSS restarted | difference"
echo "---|---|---|---|---|---|---"
for n in "${counts[@]}"; do
  d="$WORK/$n"; mkdir -p "$d"
  sp=$(port); pp=$(port)
  "$BIN/steadfast-secondary" --listen "127.0.0.1:$sp" --data "$d/s" --sync off >"$d/s.log" 2>&1 & spid=$!; PIDS+=("$spid")
  wait_up "http://127.0.0.1:$sp/health"
  "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$sp" --data "$d/p" --listen "127.0.0.1:$pp" --sync off >"$d/p.log" 2>&1 & ppid=$!; PIDS+=("$ppid")
  wait_up "http://127.0.0.1:$pp/health"
  publish_n "$pp" "$n"
  wait_delivered "$pp" >/dev/null
  kill -TERM "$ppid"; wait "$ppid" || true
  # A fresh primary on an empty directory, the same flags: the floor.
  fp=$(port)
  "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$sp" --data "$d/fresh" --listen "127.0.0.1:$fp" --sync off >"$d/f.log" 2>&1 & fpid=$!; PIDS+=("$fpid")
  wait_up "http://127.0.0.1:$fp/health"; sleep 3
  fresh=$(rss_mib "$fpid"); kill -TERM "$fpid"; wait "$fpid" || true
  dup0=$(metric "http://127.0.0.1:$sp/metrics" steadfast_secondary_duplicates_total)
  "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$sp" --data "$d/p" --listen "127.0.0.1:$pp" --sync off >"$d/p2.log" 2>&1 & ppid=$!; PIDS+=("$ppid")
  wait_up "http://127.0.0.1:$pp/health"
  wait_recheck "$d/p2.log" 1; sleep 3
  restarted=$(rss_mib "$ppid")
  dup1=$(metric "http://127.0.0.1:$sp/metrics" steadfast_secondary_duplicates_total)
  requests=$(grep '"event":"recheck"' "$d/p2.log" | tail -1 | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["requests"])')
  kill -TERM "$spid"; wait "$spid" || true
  "$BIN/steadfast-secondary" --listen "127.0.0.1:$sp" --data "$d/s" --sync off >"$d/s2.log" 2>&1 & spid=$!; PIDS+=("$spid")
  wait_up "http://127.0.0.1:$sp/health"
  wait_recheck "$d/p2.log" 2; sleep 1
  dup2=$(metric "http://127.0.0.1:$sp/metrics" steadfast_secondary_duplicates_total)
  echo "$n | $((dup1 - dup0)) | $dup2 | $requests | $fresh MiB | $restarted MiB | $(python3 -c "print(round($restarted - $fresh, 1))") MiB"
  kill -TERM "$ppid" "$spid"; wait "$ppid" "$spid" || true
done
