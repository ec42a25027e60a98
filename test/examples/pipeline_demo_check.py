#!/usr/bin/env python3
"""Runs steadfast-pipeline-demo (apps/examples/pipeline_demo.cpp) with one
second per phase and checks, from its output, that each piece of the
pipeline acted where its phase calls for it:
  1. stalls: hedges start, and calls succeed;
  2. 503s: the server's 503s are seen and calls still succeed (retries);
  3. outage: refused connections, the breaker opens, calls are rejected
     with circuit_open (not sent);
  4. recovered: the breaker closes again and calls succeed.
Usage: pipeline_demo_check.py PATH-TO-steadfast-pipeline-demo"""
import re
import subprocess
import sys


def main() -> int:
    binary = sys.argv[1]
    # A bad argument is refused by name.
    bad = subprocess.run([binary, "-1"], capture_output=True, text=True, timeout=30)
    if bad.returncode != 2 or "usage" not in bad.stderr:
        print(f"a bad argument was not refused: {bad.returncode} {bad.stderr!r}")
        return 1
    out = subprocess.run([binary, "1"], capture_output=True, text=True, timeout=90)
    print(out.stdout)
    if out.returncode != 0:
        print(f"exit status {out.returncode}: {out.stderr}")
        return 1
    phase = 0
    rows = {1: [], 2: [], 3: [], 4: []}
    transitions = []  # (phase, from, to)
    row = re.compile(r"^\s+([\d.]+) s\s+(\d+)\s+(\d+) \(\s*(\d+)\)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)$")
    for line in out.stdout.splitlines():
        m = re.match(r"^\s+--- phase (\d):", line)
        if m:
            phase = int(m.group(1))
            continue
        m = re.match(r"^\s+[\d.]+ s\s+breaker (\S+) -> (\S+)$", line)
        if m:
            transitions.append((phase, m.group(1), m.group(2)))
            continue
        m = row.match(line)
        if m and phase:
            ok, hedges, cut, r503, refused, circuit_open, limited, gave_up = map(int, m.groups()[1:9])
            rows[phase].append(dict(ok=ok, hedges=hedges, r503=r503, refused=refused, circuit_open=circuit_open))
    total = lambda p, k: sum(r[k] for r in rows[p])
    checks = [
        ("phase 1: hedges answered the stalls", total(1, "hedges") > 0),
        ("phase 1: calls succeeded", total(1, "ok") > 0),
        ("phase 2: the server answered 503", total(2, "r503") > 0),
        ("phase 2: calls still succeeded (retries)", total(2, "ok") > 0),
        ("phase 3: connections were refused", total(3, "refused") > 0),
        ("phase 3: the breaker opened", any(p == 3 and to == "open" for p, _, to in transitions)),
        ("phase 3: calls were rejected by the open breaker", total(3, "circuit_open") > 0),
        ("phase 4: the breaker closed again", any(p == 4 and to == "closed" for p, _, to in transitions)),
        ("phase 4: calls succeeded", total(4, "ok") > 0),
    ]
    failed = [name for name, good in checks if not good]
    for name, good in checks:
        print(("ok   " if good else "FAIL ") + name)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
