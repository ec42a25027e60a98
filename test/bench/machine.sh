#!/usr/bin/env bash
# What this machine charges for the things the pair does per message, so that
# the pair's figures can be read against it (RESULTS.md):
#  1. a system call that does nothing much (getppid);
#  2. a 32 KiB pwrite + fdatasync on the work folder's disk: wall time, CPU
#     time and voluntary context switches per flush;
#  3. a wake-up of another thread and back (two threads passing a byte over
#     two pipes): wall time, CPU time and switches per round trip.
#   bash test/bench/machine.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
WORK=$(mktemp -d /tmp/steadfast-machine.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
python3 - "$WORK" <<'PY'
import os, resource, sys, threading, time
work = sys.argv[1]
def usage():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_nvcsw
def measure(n, body):
    c0, v0 = usage(); t0 = time.perf_counter()
    body(n)
    t1 = time.perf_counter(); c1, v1 = usage()
    return (t1 - t0) / n * 1e6, (c1 - c0) / n * 1e6, (v1 - v0) / n
def calls(n):
    for _ in range(n): os.getppid()
wall, _, _ = measure(200000, calls)
print(f"getppid: {wall:.2f} us a call (with Python's own cost)")
fd = os.open(os.path.join(work, "flush"), os.O_RDWR | os.O_CREAT, 0o644)
buf = b"x" * 32768
os.pwrite(fd, buf, 0); os.fsync(fd)
def flushes(n):
    for _ in range(n):
        os.pwrite(fd, buf, 0); os.fdatasync(fd)
wall, cpu, vol = measure(2000, flushes)
print(f"pwrite 32 KiB + fdatasync: {wall:.0f} us wall, {cpu:.0f} us CPU, {vol:.1f} voluntary switches a flush")
a_r, a_w = os.pipe(); b_r, b_w = os.pipe()
def echo():
    while True:
        b = os.read(a_r, 1)
        if b == b"q": return
        os.write(b_w, b)
t = threading.Thread(target=echo); t.start()
def pings(n):
    for _ in range(n):
        os.write(a_w, b"p"); os.read(b_r, 1)
wall, cpu, vol = measure(20000, pings)
os.write(a_w, b"q"); t.join()
print(f"a wake-up of another thread and back: {wall:.0f} us wall, {cpu:.0f} us CPU, {vol:.1f} voluntary switches a round trip")
PY
