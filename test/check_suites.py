#!/usr/bin/env python3
"""Every Boost.Test suite of the build's test programs is run by some CTest test.

CTest runs the unit programs one suite at a time (--run_test=SUITE, a list in
test/CMakeLists.txt): a suite missing from that list compiles, passes when run
by hand, and is never run by CI. (primary_leader_watch was not run for a day;
secondary_stall_watch was caught by a mutation that survived.) Run from the
build folder (CTest's unit.meta.suites does so); CTEST names the ctest to ask
(default: the one on the PATH).

Only plain registrations count: --run_test=SUITE (or SUITE,SUITE2) runs those
suites whole; a filter naming a case or a nested suite (SUITE/CASE) does not
count as running SUITE. A program CTest never runs with --run_test is not
checked; one registered but not built is reported and skipped.
"""
import json
import os
import re
import subprocess
import sys

# A listed suite: "name*" (enabled), "name " (disabled), either with ": description".
SUITE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)[* ]?(?:\s*:.*)?$")
NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")  # a filter that names one suite (not "a*", "a/b", "!a", "@l")


def main():
    ctest = os.environ.get("CTEST", "ctest")
    tests = json.loads(subprocess.run([ctest, "--show-only=json-v1"], capture_output=True, text=True,
                                      check=True).stdout)["tests"]
    registered = {}  # program -> suites run whole
    for t in tests:
        cmd = t.get("command") or []
        filters = [a.split("=", 1)[1] for a in cmd[1:] if a.startswith("--run_test=")]
        if not cmd or not filters:
            continue
        run = registered.setdefault(cmd[0], set())
        for f in filters:
            run.update(s for s in f.split(",") if NAME.match(s))
    if not registered:
        sys.exit("check_suites.py: no CTest test runs a suite (--run_test=): run it from the build folder")
    problems, checked = [], 0
    for program, run in sorted(registered.items()):
        if not os.path.exists(program):
            print(f"{program}: not built, not checked")
            continue
        p = subprocess.run([program, "--list_content", "--report_sink=stderr"], capture_output=True, text=True)
        # Top-level suites: unindented lines that look like a suite's name
        # (a sanitizer's report, say, does not).
        suites = {m.group(1) for l in (p.stdout + p.stderr).splitlines() if (m := SUITE.match(l))}
        if p.returncode != 0 or not suites:
            problems.append(f"{program}: --list_content failed (exit {p.returncode}, {len(suites)} suites listed)")
            continue
        checked += 1
        problems += [f"{program}: suite {s} is run by no CTest test" for s in sorted(suites - run)]
    if checked == 0:
        problems.append("no program could be checked")
    for m in problems:
        print(m)
    print(f"{sum(len(r) for r in registered.values())} suites of {checked} programs checked; {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
