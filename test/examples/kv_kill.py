#!/usr/bin/env python3
"""The key-value example (apps/examples/kv.cpp) under kill -9.

A replica and a primary (steadfast-kv) run on loopback. Two writer threads
PUT values to keys of their own (each key has one writer, so its
acknowledgements come in order) while, at moments drawn from the seed, the
primary, the replica or both are killed with SIGKILL and started again on the
same data. Every put's value is unique. At the end the writers stop, the
primary delivers what it holds, both stop, and their tables are compared:

  - the replica's record of puts (`puts`, in apply order) equals the
    primary's (in commit order), put for put: nothing lost, nothing applied
    twice, nothing out of order;
  - every acknowledged put is in it exactly once; a put that got no answer
    (the primary died between its commit and the answer, or refused it) at
    most once; nothing else is;
  - the replica's `kv` table equals the primary's, and each key holds its
    last acknowledged value or a later unanswered one;
  - puts were acknowledged after the last restart (the service came back),
    and every answer was 200 or 503.

  kv_kill.py BINARY [--seed N] [--rounds N] [--work DIR]
"""
import argparse
import http.client
import json
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    # One picker for every test (test/ports.py): never a port another test
    # was handed in the last 15 minutes.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import ports
    return ports.pick(1)[0]


class Proc:
    def __init__(self, args, log):
        self.args, self.log, self.p = args, log, None

    def start(self):
        out = open(self.log, "a")
        self.p = subprocess.Popen(self.args, stdout=out, stderr=out)

    def kill(self):
        self.p.send_signal(signal.SIGKILL)
        self.p.wait()

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        try:
            return self.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.p.kill()
            return -1


def request(port, method, path, body=None, timeout=5):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request(method, path, body=body)
        r = c.getresponse()
        return r.status, r.read().decode()
    finally:
        c.close()


def wait_up(port, path, deadline=15, proc=None):
    end = time.time() + deadline
    while time.time() < end:
        if proc is not None and proc.p.poll() is not None:
            raise SystemExit(f"{proc.args[1]} exited ({proc.p.returncode}) before answering on port {port}")
        try:
            request(port, "GET", path, timeout=1)
            if proc is not None:
                time.sleep(0.1)  # an answer from another process on that port is not its
                if proc.p.poll() is not None:
                    raise SystemExit(f"{proc.args[1]} exited; something else answers on port {port}")
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing answers on port {port}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--seed", type=int, default=29)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--work")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    work = a.work or tempfile.mkdtemp(prefix="steadfast-kv-")
    os.makedirs(work, exist_ok=True)
    rport, pport = free_port(), free_port()
    replica = Proc([a.binary, "replica", "--data", f"{work}/replica", "--listen", f"127.0.0.1:{rport}"],
                   f"{work}/replica.log")
    primary = Proc([a.binary, "primary", "--data", f"{work}/primary", "--replica", f"http://127.0.0.1:{rport}",
                    "--listen", f"127.0.0.1:{pport}"], f"{work}/primary.log")
    replica.start()
    primary.start()
    wait_up(pport, "/pending", proc=primary)

    acked = {}       # key -> last acknowledged value
    unanswered = {}  # key -> values PUT after the last acknowledgement, without an answer
    lock = threading.Lock()
    stop = threading.Event()
    counts = {"acked": 0, "unanswered": 0, "refused": 0, "acked_after_last_restart": 0}
    sent_acked, sent_other = [], []  # (key, value) of every put: acknowledged; not (unanswered or 503)
    unexpected = []
    last_restart = threading.Event()

    def writer(w):
        keys = [f"w{w}-k{i}" for i in range(12)]
        n = 0
        while not stop.is_set():
            n += 1
            key = keys[n % len(keys)]
            value = json.dumps({"writer": w, "n": n, "pad": "x" * (n % 50)}, separators=(",", ":"))
            try:
                status, body = request(pport, "PUT", f"/kv?k={key}", value)
            except OSError:
                with lock:
                    unanswered.setdefault(key, []).append(value)
                    sent_other.append((key, value))
                    counts["unanswered"] += 1
                time.sleep(0.02)
                continue
            with lock:
                if status == 200:
                    acked[key] = value
                    unanswered.pop(key, None)
                    sent_acked.append((key, value))
                    counts["acked"] += 1
                    if last_restart.is_set():
                        counts["acked_after_last_restart"] += 1
                else:
                    counts["refused"] += 1
                    sent_other.append((key, value))
                    if status != 503:
                        unexpected.append(f"{status}: {body}")
                        stop.set()

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(2)]
    for t in threads:
        t.start()
    kills = {"primary": 0, "replica": 0}
    for _ in range(a.rounds):
        time.sleep(rng.uniform(0.3, 1.5))
        which = rng.choice(["primary", "replica", "both"])
        down = rng.uniform(0.05, 0.6)
        if which in ("replica", "both"):
            replica.kill()
            kills["replica"] += 1
        if which in ("primary", "both"):
            primary.kill()
            kills["primary"] += 1
        time.sleep(down)
        if which in ("replica", "both"):
            replica.start()
        if which in ("primary", "both"):
            primary.start()
            wait_up(pport, "/pending", proc=primary)
    last_restart.set()
    time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join()

    # Delivery drains: the replica is up and the primary's pending reaches 0.
    end = time.time() + 60
    pending = None
    while time.time() < end:
        try:
            pending = json.loads(request(pport, "GET", "/pending")[1])["pending"]
        except OSError:
            pending = None
        if pending == 0:
            break
        time.sleep(0.1)
    rc_p, rc_r = primary.stop(), replica.stop()
    pdb = sqlite3.connect(f"{work}/primary/primary.db")
    rdb = sqlite3.connect(f"{work}/replica/secondary.db")
    p = dict(pdb.execute("SELECT k, v FROM kv").fetchall())
    r = dict(rdb.execute("SELECT k, v FROM kv").fetchall())
    p_puts = pdb.execute("SELECT k, v FROM puts ORDER BY n").fetchall()
    r_puts = rdb.execute("SELECT k, v FROM puts ORDER BY n").fetchall()
    failures = []
    if unexpected:
        failures.append(f"answers other than 200 and 503: {unexpected[:3]}")
    if p_puts != r_puts:
        first = next((i for i, (x, y) in enumerate(zip(p_puts, r_puts)) if x != y), min(len(p_puts), len(r_puts)))
        failures.append(f"the replica's puts differ from the primary's at put {first} "
                        f"({len(p_puts)} on the primary, {len(r_puts)} on the replica)")
    # Values are compared as JSON (the service stores nlohmann's dump, keys sorted).
    norm = lambda k, v: (k, json.dumps(json.loads(v), sort_keys=True))
    stored = {}
    for k, v in p_puts:
        stored[norm(k, v)] = stored.get(norm(k, v), 0) + 1
    for k, v in sent_acked:
        if stored.get(norm(k, v), 0) != 1:
            failures.append(f"acknowledged put {k}={v} is stored {stored.get(norm(k, v), 0)} times")
            break
    others = {norm(k, v) for k, v in sent_other}
    known = {norm(k, v) for k, v in sent_acked} | others
    if any(n > 1 for n in stored.values()):
        failures.append("a put is stored more than once")
    if any(key not in known for key in stored):
        failures.append("a put that no writer sent is stored")
    if counts["acked_after_last_restart"] < 20:
        failures.append(f"only {counts['acked_after_last_restart']} puts acknowledged after the last restart")
    if pending != 0:
        failures.append(f"the primary did not deliver everything: pending {pending}")
    if rc_p != 0 or rc_r != 0:
        failures.append(f"exit codes on SIGTERM: primary {rc_p}, replica {rc_r}")
    if p != r:
        diff = sorted(k for k in set(p) | set(r) if p.get(k) != r.get(k))
        failures.append(f"the tables differ on {len(diff)} keys, e.g. {diff[:3]}: "
                        f"primary {[p.get(k) for k in diff[:3]]}, replica {[r.get(k) for k in diff[:3]]}")
    # The service stores each value as nlohmann's dump (keys sorted): compared
    # as JSON.
    for key, value in acked.items():
        if key not in p:
            failures.append(f"acknowledged key {key} is missing")
        elif json.loads(p[key]) not in [json.loads(v) for v in [value] + unanswered.get(key, [])]:
            failures.append(f"key {key} holds {p[key]}, neither its last acknowledged value {value} "
                            f"nor a later unanswered one")
    if counts["acked"] < 50:
        failures.append(f"only {counts['acked']} puts were acknowledged: the test did not exercise much")
    print(json.dumps({"seed": a.seed, "kills": kills, "puts": counts, "keys": len(p), "stored_puts": len(p_puts),
                      "work": work}))
    if failures:
        for f in failures:
            print("FAILED:", f, file=sys.stderr)
        return 1
    print("kv: the replica applied the primary's puts one for one, in order; every acknowledged put once")
    if not a.work:
        subprocess.run(["rm", "-rf", work])
    return 0


if __name__ == "__main__":
    sys.exit(main())
