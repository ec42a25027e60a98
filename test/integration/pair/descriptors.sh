#!/usr/bin/env bash
# A listener out of file descriptors: each daemon, its descriptor limit lowered (prlimit) to what it holds plus 4
# while 12 clients connect, logs accept_failed (at most once a second, naming the error and how many it held
# back), counts it in steadfast_*_accept_failures_total, and takes the waiting connections and serves once the
# limit is back; nothing published is lost meanwhile.
#
# Run with the optimized build only (label "descriptors", not "integration"): under UBSan a process out of
# descriptors cannot run the sanitizer's vptr check on a type it meets for the first time (the check writes the
# object to a pipe to see that it is readable), and reports every such access as an error; its suppressions
# cannot name an object whose type it could not read.
source "$(dirname "$0")/lib.sh"

start_secondary
start_primary
publish 3 before_fds
wait_drained 30

out_of_descriptors() {  # out_of_descriptors NAME PID PORT LOG
  local name=$1 pid=$2 port=$3 log=$4 from limits n
  from=$(log_size "$log")
  limits=$(prlimit --pid "$pid" --nofile --noheadings --output SOFT,HARD | awk '{print $1 ":" $2}')
  n=$(find "/proc/$pid/fd" -mindepth 1 -maxdepth 1 | wc -l)
  prlimit --pid "$pid" --nofile=$((n + 4)):"${limits#*:}" || fail "prlimit on the $name"
  python3 - "$port" <<'PY' || fail "the $name: connections out of descriptors"
import socket, sys, time
port = int(sys.argv[1])
keep = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(12)]  # the kernel's backlog takes them
time.sleep(2.6)
for k in keep:
    k.close()
PY
  prlimit --pid "$pid" --nofile="$limits" || fail "prlimit on the $name"
  python3 - "$name" "$(log_lines "$from" "$log" accept_failed)" <<'PY' || fail "the $name out of descriptors: accept_failed not as documented"
import json, sys
name = sys.argv[1]
lines = [json.loads(l) for l in sys.argv[2].splitlines()]
assert lines, f"{name}: no accept_failed line while out of descriptors"
# 2.6 s of failures every 50 ms: at most one line a second (3, with the edges), the rest counted as held back.
assert len(lines) <= 4, f"{name}: {len(lines)} accept_failed lines in 2.6 s, want at most one a second"
assert all("Too many open files" in j.get("error", "") and "descriptors" in j.get("hint", "") for j in lines), lines
assert len(lines) >= 2 and max(j["also_failed_since_last_line"] for j in lines) >= 5, lines
PY
  wait_for 5 "the $name serves again after its descriptors are back" curl -fs -o /dev/null "http://127.0.0.1:$port/health"
  local failures
  failures=$(metric "$port" "steadfast_${name}_accept_failures_total")
  [ "${failures:-0}" -ge 20 ] || fail "the $name: steadfast_${name}_accept_failures_total is ${failures:-0} after 2.6 s of failed accepts"
}
out_of_descriptors primary "$PPID_" "$PPORT" "$WORK/primary.log"
out_of_descriptors secondary "$SPID" "$SPORT" "$WORK/secondary.log"
publish 5 after_fds
wait_drained 30
verify before_fds
verify after_fds
echo "out of descriptors: as documented"
