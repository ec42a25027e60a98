#!/usr/bin/env python3
"""Which of the pair's threads run at the same time: the critical path of a publish.

Reads `perf sched timehist` (a recording of the scheduler made while wrk
publishes) on stdin and prints, as fractions of the recording's wall time, the
sets of threads that were running together, most frequent first, and how much
of the time each CPU was idle.

    perf sched record -o S.data -- sleep 1
    perf sched timehist -i S.data | python3 test/bench/overlap.py PRIMARY_PID [SECONDARY_PID]

Threads are named by role: the primary's event loop (`loop`), its database
thread (`db`) and flusher (`flush`), the secondary's threads (`sec`, all of
them as one) and the load generator (`wrk`). An interval where the loop and
wrk are both off the CPUs and only `db` or `flush` run is time where every
publisher waits for the database pipeline (written in RESULTS.md, 2026-12-07).
"""
import collections
import re
import sys

STEP = 20e-6  # seconds: the resolution of the overlap count

# "TIME [CPU] NAME[TID/PID] WAIT SCHED RUN" (the idle task: "<idle>", no ids)
LINE = re.compile(r"^\s*(\d+\.\d+)\s+\[(\d+)\]\s+(<idle>|.+?\[(\d+)(?:/(\d+))?\])\s+[\d.]+\s+[\d.]+\s+([\d.]+)\s*$")


def role(comm, tid, pid, primary, secondary):
    if comm == "<idle>":
        return "idle"
    if pid == primary:
        if tid == primary:
            return "loop"
        return {"sf-database": "db", "sf-db-flush": "flush"}.get(comm)
    if secondary is not None and pid == secondary:
        return "sec"
    if comm == "wrk":
        return "wrk"
    return None


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: perf sched timehist -i S.data | overlap.py PRIMARY_PID [SECONDARY_PID]")
    primary = int(sys.argv[1])
    secondary = int(sys.argv[2]) if len(sys.argv) > 2 else None
    intervals = collections.defaultdict(list)
    idle = collections.defaultdict(float)
    lo, hi = None, None
    for line in sys.stdin:
        m = LINE.match(line)
        if not m:
            continue
        end, cpu = float(m.group(1)), int(m.group(2))
        comm = m.group(3).split("[")[0].strip()
        tid = int(m.group(4)) if m.group(4) else 0
        pid = int(m.group(5)) if m.group(5) else tid
        run = float(m.group(6)) / 1000
        lo = end - run if lo is None else min(lo, end - run)
        hi = end if hi is None else max(hi, end)
        r = role(comm, tid, pid, primary, secondary)
        if r == "idle":
            idle[cpu] += run
        elif r:
            intervals[r].append((end - run, end))
    if lo is None or hi <= lo:
        sys.exit("overlap.py: no scheduler records on stdin")
    roles = [r for r in ("loop", "db", "flush", "sec", "wrk") if r in intervals]
    n = int((hi - lo) / STEP) + 1
    running = {r: bytearray(n) for r in roles}
    for r in roles:
        for a, b in intervals[r]:
            for i in range(int((a - lo) / STEP), min(n - 1, int((b - lo) / STEP)) + 1):
                running[r][i] = 1
    sets = collections.Counter(tuple(r for r in roles if running[r][i]) for i in range(n))
    wall = hi - lo
    print(f"    {wall:.2f} s recorded; CPUs idle: " +
          ", ".join(f"cpu{c} {t / wall * 100:.0f} %" for c, t in sorted(idle.items())))
    for r in roles:
        print(f"    {r} ran {sum(running[r]) / n * 100:.1f} % of the time")
    print("    running together (the rest of the time, none of them):")
    for s, k in sets.most_common(10):
        print(f"      {k / n * 100:5.1f} %  {' + '.join(s) if s else '(none of them)'}")


if __name__ == "__main__":
    main()
