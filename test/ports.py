#!/usr/bin/env python3
"""Free loopback ports for the tests, one picker for all of them.

Drawn at random below the kernel's ephemeral range (a daemon restarts on its
port, and a client socket the kernel gave that port meanwhile would make the
restart fail; bind(0) also hands the same just-released port to two tests).
Tests run in parallel (ctest -j2) and a port drawn now is bound by its daemon
seconds later: every port handed out is written down (a file under the
temporary directory, under an exclusive lock) and not handed out again for
15 minutes, so two tests never draw the same one in that window.

    python3 test/ports.py [N]      prints N free ports (default 1)
    ports.pick(n) -> [int, ...]     from Python
"""
import fcntl
import os
import random
import socket
import sys
import tempfile
import time

HELD_FOR = 15 * 60  # seconds a port handed out stays reserved
LEDGER = os.path.join(tempfile.gettempdir(), "steadfast-test-ports")


def _low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _bindable(port):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def pick(n=1):
    low = _low()
    rng = random.SystemRandom()
    with open(LEDGER, "a+") as ledger:
        fcntl.flock(ledger, fcntl.LOCK_EX)
        ledger.seek(0)
        now = time.time()
        taken = {}
        for line in ledger:
            try:
                port, at = line.split()
                if now - float(at) < HELD_FOR:
                    taken[int(port)] = float(at)
            except ValueError:
                continue
        out = []
        for _ in range(n):
            port = None
            for _ in range(300 if low > 12000 else 0):
                p = rng.randrange(10000, low)
                if p not in taken and p not in out and _bindable(p):
                    port = p
                    break
            if port is None:  # no room below the ephemeral range: the kernel's choice
                with socket.socket() as s:
                    s.bind(("127.0.0.1", 0))
                    port = s.getsockname()[1]
            out.append(port)
        # Rewritten with what is still reserved, plus these.
        ledger.seek(0)
        ledger.truncate()
        for p, at in taken.items():
            ledger.write(f"{p} {at}\n")
        for p in out:
            ledger.write(f"{p} {now}\n")
    return out


if __name__ == "__main__":
    print(" ".join(str(p) for p in pick(int(sys.argv[1]) if len(sys.argv) > 1 else 1)))
