#!/usr/bin/env python3
"""Every Boost.Test suite of the build's test programs is run by some CTest test.

CTest runs the unit programs one suite at a time (--run_test=SUITE, a list in
test/CMakeLists.txt): a suite missing from that list compiles, passes when run
by hand, and is never run by CI. (primary_leader_watch was not run for a day;
secondary_stall_watch was caught by a mutation that survived.) Run from the
build folder (CTest's test.meta.suites does so).
"""
import json
import subprocess
import sys


def main():
    tests = json.loads(subprocess.run(["ctest", "--show-only=json-v1"], capture_output=True, text=True,
                                      check=True).stdout)["tests"]
    registered = {}  # program -> suites run
    for t in tests:
        cmd = t.get("command") or []
        suites = [a.split("=", 1)[1] for a in cmd[1:] if a.startswith("--run_test=")]
        if cmd and suites:
            registered.setdefault(cmd[0], set()).update(s.split("/")[0] for s in suites)
    if not registered:
        sys.exit("check_suites.py: no CTest test runs a suite (--run_test=): run it from the build folder")
    missing = []
    for program, run in sorted(registered.items()):
        out = subprocess.run([program, "--list_content"], capture_output=True, text=True).stderr
        # Top-level suites: unindented lines ("name*" when enabled).
        suites = {l.rstrip().rstrip("*") for l in out.splitlines() if l and not l[0].isspace()}
        missing += [f"{program}: suite {s} is run by no CTest test" for s in sorted(suites - run)]
    for m in missing:
        print(m)
    print(f"{sum(len(r) for r in registered.values())} suites of {len(registered)} programs registered; "
          f"{len(missing)} missing")
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
