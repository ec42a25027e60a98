# What the pair's benchmark scripts share (sourced): a work folder removed at
# exit with the processes in PIDS killed (bench_cleanup; a script with more to
# stop sets its own trap and calls it), free ports, waiting for an app, ts() (when a log line was written)
# and lines() (the standard message, N at a time).
#   BENCH_NAME   names the work folder (/tmp/steadfast-$BENCH_NAME.XXXXXX)
#   build_apps   installs what is missing and builds both apps in Release
#                (build/bench); BIN is their folder
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
build_apps() {
  bash .ci/setup --bench
  cmake -S . -B build/bench -DCMAKE_BUILD_TYPE=Release -DSTEADFAST_BUILD_APPS=ON -DSTEADFAST_BUILD_TESTS=OFF >/dev/null
  cmake --build build/bench -j "$(nproc)" --target steadfast-primary steadfast-secondary >/dev/null
  BIN=${BIN:-build/bench/apps}
}
WORK=$(mktemp -d "/tmp/steadfast-${BENCH_NAME:-bench}.XXXXXX")
PIDS=()
bench_cleanup() { for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap bench_cleanup EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# metric METRICS_URL NAME: an unlabelled metric's value as an integer (0 when absent or unreachable)
metric() { { curl -fs --max-time 2 "$1" 2>/dev/null || true; } | awk -v m="$2" '$1==m {printf "%d", $2; f=1} END {if (!f) printf "0"}'; }
# db_stats METRICS_URL APP: the database thread's group commits so far, from
# the steadfast_<APP>_db_* counters: commits, jobs a commit, messages a commit
# (the primary's published, the secondary's applied), mean commit time; and
# the primary's messages a publish group (publish_batcher: one job a group;
# all its messages over its groups, exact when every publish is an HTTP one
# without a key, as in run-group.sh).
db_stats() {
  { curl -fs --max-time 2 "$1" 2>/dev/null || true; } | awk -v p="steadfast_$2_db_" '
    index($1, p) == 1 { v[substr($1, length(p) + 1)] = $2 }
    $1 == "steadfast_primary_published_total" || $1 == "steadfast_secondary_applied_total" { msgs = $2 }
    $1 == "steadfast_primary_publish_groups_total" { groups = $2 }
    END { c = v["commits_total"] + 0; if (c == 0) { print "no commits"; exit }
          f = v["flushes_total"] + 0
          printf "%d commits, %.1f jobs a commit, %.1f messages a commit, %.0f us a commit (%.0f us of jobs before it); %d flushes, %.1f commits a flush, %.0f us a flush",
                 c, v["jobs_total"] / c, msgs / c, v["commit_seconds_total"] / c * 1e6, v["work_seconds_total"] / c * 1e6,
                 f, (f > 0 ? c / f : 0), (f > 0 ? v["flush_seconds_total"] / f * 1e6 : 0)
          if (groups > 0) printf "; %d publish groups, %.1f messages a group", groups, msgs / groups
          printf "\n" }'
}
# cpu_s PID: the CPU time (user + system, all threads) a running process has used, in seconds
cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }
# thread_cpu PID: each thread's CPU time so far, one "tid name seconds" line a thread
thread_cpu() {
  local t
  for t in /proc/"$1"/task/*; do
    awk -v hz="$(getconf CLK_TCK)" -v tid="${t##*/}" -v name="$(cat "$t/comm" 2>/dev/null)" \
      '{printf "%s %s %.2f\n", tid, name, ($14 + $15) / hz}' "$t/stat" 2>/dev/null || true
  done
}
# thread_cpu_delta BEFORE AFTER N: each thread's CPU between two thread_cpu readings, in us for each of N
thread_cpu_delta() {
  python3 - "$1" "$2" "$3" <<'PY'
import sys
def read(s):
    return {l.split()[0]: (l.split()[1], float(l.split()[2])) for l in s.splitlines() if l.strip()}
a, b, n = read(sys.argv[1]), read(sys.argv[2]), max(int(sys.argv[3]), 1)
print(", ".join(f"{name} {(t - a.get(tid, (name, 0.0))[1]) / n * 1e6:.0f} us" for tid, (name, t) in sorted(b.items(), key=lambda kv: -kv[1][1] + a.get(kv[0], ("", 0.0))[1])))
PY
}
# run_timed CPU_FILE COMMAND...: runs COMMAND, then writes the CPU time it used
# (seconds, user + system) to CPU_FILE. In a subshell, whose `times` counts
# only COMMAND: no interpreter starts between the caller's clock and COMMAND
# (python3 took 0.13-0.4 s to start here, counted into a rate before).
run_timed() {
  local cpu=$1
  shift
  (
    rc=0
    "$@" || rc=$?
    times >"$cpu.times"  # (a builtin in this shell: in a pipe it would count a fork's children)
    awk 'NR == 2 { n = split($0, f, " "); t = 0
      for (i = 1; i <= n; i++) { split(f[i], ms, "m"); t += ms[1] * 60 + ms[2] }
      printf "%.2f\n", t }' "$cpu.times" >"$cpu"
    exit $rc
  )
}
wait_up() { until curl -fs -o /dev/null "$1"; do sleep 0.01; done; }
# watch_delivered PRIMARY_PORT: starts a watcher of the primary's delivery in
# the background and returns once it is up (its interpreter started before
# the caller's clock does); delivered_at then prints "published delivered
# unix_time": when the primary had delivered all it published (polled every
# 5 ms from delivered_at's call on, up to 120 s). One watcher at a time.
watch_delivered() {
  DW_DIR=$(mktemp -d "$WORK/watch.XXXXXX")
  python3 - "$1" "$DW_DIR" <<'PY' &
import os, sys, time, urllib.request
url, d = f"http://127.0.0.1:{sys.argv[1]}/metrics", sys.argv[2]
def get():
    m = urllib.request.urlopen(url, timeout=2).read().decode()
    v = {l.split()[0]: float(l.split()[1]) for l in m.splitlines() if l and not l.startswith("#")}
    return int(v["steadfast_primary_published_total"]), int(v["steadfast_primary_delivered_total"])
open(os.path.join(d, "up"), "w").close()
while not os.path.exists(os.path.join(d, "go")):  # the load is running: nothing asked of the primary
    time.sleep(0.005)
deadline = time.time() + 120
while True:
    p, dl = get()
    if p == dl or time.time() > deadline: break
    time.sleep(0.005)
t = time.time()
with open(os.path.join(d, "out.tmp"), "w") as f: print(p, dl, t, file=f)
os.rename(os.path.join(d, "out.tmp"), os.path.join(d, "out"))
PY
  DW_PID=$!
  while [ ! -e "$DW_DIR/up" ]; do
    kill -0 "$DW_PID" 2>/dev/null || [ -e "$DW_DIR/up" ] || { echo "the delivery watcher did not start" >&2; return 1; }
    sleep 0.01
  done
}
delivered_at() {  # (may run in a subshell: it waits for the watcher's file, not for the process)
  touch "$DW_DIR/go"
  while [ ! -e "$DW_DIR/out" ]; do
    kill -0 "$DW_PID" 2>/dev/null || [ -e "$DW_DIR/out" ] || { echo "the delivery watcher failed" >&2; return 1; }
    sleep 0.01
  done
  cat "$DW_DIR/out"
}
# wait_delivered PRIMARY_PORT: the same in one call, for a caller whose
# clock does not stop at the last delivery.
wait_delivered() {
  watch_delivered "$1"
  delivered_at
}
# ts LOG EVENT: the Unix time (seconds, fractional) of EVENT's first JSON line in LOG (lines that are not
# JSON are skipped); nothing when it has none
ts() { python3 -c 'import sys,json,datetime
for l in open(sys.argv[1]):
    try: j=json.loads(l)
    except ValueError: continue
    if isinstance(j, dict) and j.get("event")==sys.argv[2]: print(datetime.datetime.strptime(j["ts"],"%Y-%m-%dT%H:%M:%S.%fZ").timestamp()); break' "$1" "$2"; }
# lines N: N one-line JSON payloads {"n":i,"pad":"..."} (44 to 48 bytes), the benchmarks' standard message
lines() { python3 -c 'import sys
n=int(sys.argv[1]); w=sys.stdout.write
for i in range(1,n+1): w("{\"n\":%d,\"pad\":\"abcdefghijklmnopqrstuvwxyz\"}\n" % i)' "$1"; }
