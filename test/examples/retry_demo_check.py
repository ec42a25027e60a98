#!/usr/bin/env python3
"""Runs steadfast-retry-demo (apps/examples/retry_demo.cpp, the README's
first look at the engine) and checks, from its output, that each of its four
parts ended as it says:
  1. connect retried while refused, and succeeded once the listener opened
     (1.5 s in);
  2. a permanent error not retried;
  3. ten operations stopped by their shared budget, far short of 100 attempts;
  4. a retry sleeping for an hour cancelled at once.
Usage: retry_demo_check.py PATH-TO-steadfast-retry-demo"""
import re
import subprocess
import sys


def main() -> int:
    out = subprocess.run([sys.argv[1]], capture_output=True, text=True, timeout=60)
    print(out.stdout)
    if out.returncode != 0:
        print(f"exit status {out.returncode}: {out.stderr}")
        return 1
    text = out.stdout
    failures = []

    m = re.search(r"=> success after (\d+) attempts, ([\d.]+) ms", text)
    refused = re.findall(r"\[connect\] attempt \d+ at .*: Connection refused -> retry in", text)
    if not m:
        failures.append("part 1: no success line")
    elif not refused or int(m.group(1)) != len(refused) + 1 or float(m.group(2)) < 1500:
        failures.append(f"part 1: {m.group(0)!r} after {len(refused)} refused attempts (want success past 1500 ms, "
                        "one attempt after the refused ones)")

    if not re.search(r"\[permanent\] attempt 1 at .*: Permission denied -> permanent\n\s+=> permanent after 1 attempt\n",
                     text):
        failures.append("part 2: the permanent error was not ended after its one attempt")

    m = re.search(r"=> 10 operations made (\d+) attempts in all .*; last stop: (\S+)", text)
    if not m or m.group(2) != "budget" or not 10 <= int(m.group(1)) < 100:
        failures.append(f"part 3: {m.group(0) if m else 'no summary'!r} (want the budget to stop them, 10-99 attempts)")

    m = re.search(r"=> cancelled after 1 attempt, ([\d.]+) ms", text)
    if not m or float(m.group(1)) >= 1000:
        failures.append(f"part 4: {m.group(0) if m else 'no cancellation line'!r} (want cancelled within a second)")

    for f in failures:
        print(f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
