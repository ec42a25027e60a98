#!/usr/bin/env python3
"""Chaos campaign against the real steadfast-primary and steadfast-secondary.

A secondary (answering 503s and dropping connections at rates drawn from the
seed) and a primary (--listen) run on loopback, each on its own data folder.
Publisher threads POST JSON payloads of every shape to /publish while, at
moments drawn from the seed, the primary or the secondary is killed (kill -9,
also while publishes are in flight), stopped with SIGTERM, or has its storage
fail for a while (prlimit --fsize=0: writes fail with EFBIG). At the end the
faults stop, the primary drains, and the secondary's dump is checked against
what the publishers were told:

  - every acknowledged publish (202) is applied exactly once, at the seq it was
    acknowledged with, under the same id, with the payload text byte for byte
    as it was sent (whitespace around the whole payload may be trimmed);
  - per stream, the applied seqs are 1..n in apply order;
  - nothing else is applied, except publishes that got no answer (the primary
    died or the connection broke mid-publish): those may or may not be applied,
    at most once;
  - no dead letters, no blocked stream, nothing pending;
  - both servers exit 0 on SIGTERM, and never exit on their own.

With --jetstream the pair runs over a 3-node NATS JetStream cluster on
loopback (test/integration/jetstream/cluster.sh): the primary publishes to a
3-replica stream, the secondary consumes it with a durable consumer. The
secondary's injected 503s and drops (HTTP only) give way to kill -9 of a NATS
node (the stream's leader, often), restarted after a short down time, never
two nodes down at once; the rest of the faults and the check are the same,
and the drain also waits for the secondary to apply what the primary
published.

Python 3 standard library only. Contract: shared/CONTRACT.md. See README.md
beside this file for the short (CI) and long runs.

  python3 test/chaos/chaos.py --bin build/release/apps [--seed N] [--duration S] [--jetstream]
  python3 test/chaos/chaos.py --self-test      # the checker against made-up dumps
"""

import argparse
import collections
import hashlib
import http.client
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

WS = b" \t\r\n"  # JSON whitespace: what may be trimmed around a payload
TOMBSTONE = b'{"steadfast_dead_letter"'


def log(msg):
    print(msg, flush=True)


def free_port():
    """A free loopback port (test/ports.py: one picker for every test, never a
    port another test was handed in the last 15 minutes)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import ports
    return ports.pick(1)[0]


def short(b, n=160):
    """A bytes value for a message: at most n characters of it."""
    text = b.decode("utf-8", "replace") if isinstance(b, (bytes, bytearray)) else str(b)
    return repr(text if len(text) <= n else text[:n] + "...(%d bytes)" % len(b))


class Text:
    """A payload's text, trimmed of the whitespace around it: kept whole when small;
    when big, its length, SHA-256 and first bytes (memory stays small in long runs)."""

    __slots__ = ("key", "head", "n")
    WHOLE = 4096

    def __init__(self, b):
        b = b.strip(WS)
        self.n, self.head = len(b), b[:240]
        self.key = b if len(b) <= self.WHOLE else (len(b), hashlib.sha256(b).digest())

    def __eq__(self, other):
        return isinstance(other, Text) and self.key == other.key

    def __hash__(self):
        return hash(self.key)

    def whole(self):
        return self.key if isinstance(self.key, bytes) else None

    def startswith(self, prefix):
        return self.head.startswith(prefix)

    def __repr__(self):
        return short(self.head) if self.n <= len(self.head) else "%s (%d bytes)" % (short(self.head, 100), self.n)


def difference(sent, applied):
    """Where two different payload texts differ, for a message."""
    a, b = sent.whole(), applied.whole()
    if a is None or b is None:
        a, b = sent.head, applied.head
        if a == b:
            return "same first %d bytes; %d bytes sent, %d applied" % (len(a), sent.n, applied.n)
    k = first_difference(a, b)
    return "at byte %d: sent %s, applied %s (%d and %d bytes)" % (
        k, short(a[max(0, k - 40):k + 80]), short(b[max(0, k - 40):k + 80]), sent.n, applied.n)


class CampaignFailure(Exception):
    """A failure that ends the campaign at once (a server died, did not start...)."""


# --------------------------------------------------------------------------
# The servers
# --------------------------------------------------------------------------

class Server:
    """One of the two binaries: started, killed and restarted on the same port and data folder."""

    def __init__(self, name, argv_fn, port, log_path, clock, ready=None):
        self.name, self.argv_fn, self.port, self.log_path, self.clock = name, argv_fn, port, log_path, clock
        self.ready = ready or (lambda status, body: status == 200)  # a /health answer that says "started"
        self.proc = self.copier = None
        self.expected_exit = True  # nothing running yet
        self.starts = 0
        self.pdeathsig = shutil.which("setpriv")

    def start(self, health_timeout=30.0, **kw):
        argv = self.argv_fn(**kw)
        self.starts += 1
        with open(self.log_path, "ab") as f:
            f.write(("=== chaos: start #%d at %.1fs: %s\n" % (self.starts, self.clock(), shlex.join(argv))).encode())
        # setpriv --pdeathsig: the server dies with this script even if it is
        # killed (a ctest timeout). Servers are only started from the main thread.
        prefix = [self.pdeathsig, "--pdeathsig", "KILL", "--"] if self.pdeathsig else []
        # Its output goes through a pipe, not straight to the log file: a storage
        # failure window (RLIMIT_FSIZE) would make its log writes fail too.
        self.proc = subprocess.Popen(prefix + argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT)
        self.copier = threading.Thread(target=self.copy_log, args=(self.proc.stdout,), daemon=True)
        self.copier.start()
        self.expected_exit = False
        deadline = time.monotonic() + health_timeout
        while True:
            if self.proc.poll() is not None:
                self.expected_exit = True
                raise CampaignFailure("%s exited with %s right after its start #%d (log: %s)"
                                      % (self.name, self.reaped(), self.starts, self.log_path))
            status, body = http_get(self.port, "/health", timeout=1.0)
            if self.ready(status, body):
                return
            if time.monotonic() > deadline:
                raise CampaignFailure("%s did not answer /health 200 within %.0fs of its start #%d (last answer: %s %s)"
                                      % (self.name, health_timeout, self.starts, status, short(body, 300)))
            time.sleep(0.05)

    def copy_log(self, pipe):
        with open(self.log_path, "ab") as f:
            for line in iter(pipe.readline, b""):
                f.write(line)
                f.flush()
        pipe.close()

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def died_on_its_own(self):
        """The exit code, if the server exited without being told to."""
        if self.proc is not None and not self.expected_exit and self.proc.poll() is not None:
            return self.reaped()
        return None

    def reaped(self):
        """After the process ended: its last output is in the log."""
        if self.copier is not None:
            self.copier.join(5)
        return self.proc.returncode

    def kill9(self):
        self.expected_exit = True
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait()
            self.reaped()

    def terminate(self, timeout=15.0):
        """SIGTERM; returns the exit code, or None if it had to be killed after `timeout` s."""
        self.expected_exit = True
        if not self.alive():
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
            return self.reaped()
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.reaped()
            return None


def js_secondary_ready(status, body):
    """--jetstream: the secondary consumes. Its /health is 200 when connected to NATS
    and consuming, 503 while not, or while a stream is blocked: after a restart a
    stream often waits for a message the killed process had not acknowledged (a
    gap, until JetStream delivers it again): that one is started too."""
    if status == 200:
        return True
    try:
        j = json.loads(body)
    except ValueError:
        return False
    return status == 503 and isinstance(j, dict) and j.get("status") == "streams_blocked" and \
        all(str(why).startswith("gap") for why in ((j.get("jetstream") or {}).get("blocked") or {}).values())


def http_get(port, path, timeout=2.0):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        c.request("GET", path)
        r = c.getresponse()
        body = r.read()
        c.close()
        return r.status, body
    except (OSError, http.client.HTTPException):
        return None, b""


def metric(port, name):
    status, body = http_get(port, "/metrics", timeout=1.0)
    if status != 200:
        return None
    for line in body.decode("utf-8", "replace").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == name:
            try:
                return float(parts[1])
            except ValueError:
                return None
    return None


def set_fsize(pid, limit):
    """prlimit on the soft limit only (works without root too); False if the process is gone."""
    r = subprocess.run(["prlimit", "--pid", str(pid), "--fsize=%s:" % limit],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
    return r.returncode == 0


class NatsCluster:
    """The 3-node JetStream cluster of --jetstream, through cluster.sh: started,
    one node killed (kill -9) and restarted, stopped. Only the main thread calls it."""

    SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                          "integration", "jetstream", "cluster.sh")

    def __init__(self, folder, nodes, secure=False):
        self.dir, self.n, self.secure = folder, nodes, secure
        self.urls = None
        self.down = None          # the node killed and not restarted yet (1-based), or None
        self.restart_at = 0.0     # when (time.monotonic()) to restart it
        self.watchdog = None
        self.started = False

    def run(self, *args, timeout=60):
        try:
            r = subprocess.run(["bash", self.SCRIPT] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CampaignFailure("cluster.sh %s did not finish within %d s" % (" ".join(map(str, args)), timeout))
        return r.returncode, r.stdout.decode("utf-8", "replace").strip(), r.stderr.decode("utf-8", "replace").strip()

    def start(self):
        # A watchdog, out of this process tree, stops the cluster when this script
        # ends in any way (even kill -9 or a ctest timeout): it waits for the end of
        # a pipe only this process holds.
        code = ("import os, subprocess, sys\n"
                "if os.fork(): os._exit(0)\n"
                "os.setsid()\n"
                "while os.read(0, 4096): pass\n"
                "subprocess.run(['bash', sys.argv[1], 'stop', sys.argv[2]], stdin=subprocess.DEVNULL,"
                " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n")
        self.watchdog = subprocess.Popen([sys.executable, "-c", code, self.SCRIPT, self.dir], stdin=subprocess.PIPE,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.watchdog.wait(10)
        self.started = True
        rc, out, err = self.run("start", self.dir, self.n, *(["--secure"] if self.secure else []))
        if rc != 0 or not out.startswith(("nats://", "tls://")):
            raise CampaignFailure("cluster.sh start failed (%d): %s %s" % (rc, out, err))
        self.urls = out.splitlines()[-1]
        return self.urls

    def client_flags(self):
        """The daemons' NATS flags: with --secure, TLS with a client certificate and a .creds file."""
        if not self.secure:
            return []
        return ["--nats-ca", os.path.join(self.dir, "tls", "ca.pem"),
                "--nats-cert", os.path.join(self.dir, "tls", "client.pem"),
                "--nats-key", os.path.join(self.dir, "tls", "client-key.pem"),
                "--nats-creds", os.path.join(self.dir, "jwt", "user.creds")]

    def ports(self):
        """Every port of the nodes (client, route, monitoring), from DIR/ports."""
        out = []
        try:
            with open(os.path.join(self.dir, "ports")) as f:
                for line in f:
                    k, _, v = line.strip().partition("=")
                    if k != "N" and v.isdigit():
                        out.append(int(v))
        except OSError:
            pass
        return out

    def pid(self, i):
        try:
            with open(os.path.join(self.dir, "n%d.pid" % i)) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def node_alive(self, i):
        pid = self.pid(i)
        if pid is None:
            return False
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().split(") ")[-1][:1] not in ("Z", "X")
        except OSError:
            return False

    def exited_on_its_own(self):
        """A node that should run and does not, or None."""
        for i in range(1, self.n + 1):
            if i != self.down and not self.node_alive(i):
                return i
        return None

    def leader(self, stream):
        rc, out, _ = self.run("leader", self.dir, stream, timeout=20)
        try:
            return int(out) if rc == 0 else None
        except ValueError:
            return None

    def kill(self, i, down):
        self.run("kill", self.dir, i)
        self.down, self.restart_at = i, time.monotonic() + down

    def restart(self):
        i, self.down = self.down, None
        rc, out, err = self.run("restart", self.dir, i)
        if rc != 0:
            raise CampaignFailure("NATS node %d did not restart: %s %s" % (i, out, err))
        return i

    def stop(self):
        if self.started:
            self.started = False
            try:
                self.run("stop", self.dir, timeout=30)
            except CampaignFailure:
                pass
        if self.watchdog is not None and self.watchdog.stdin:
            self.watchdog.stdin.close()  # the watchdog stops it again: nothing left to stop


# --------------------------------------------------------------------------
# Payloads
# --------------------------------------------------------------------------

INVALID_KINDS = {  # kind -> the answer the contract gives it
    "not_json": 400, "trailing_garbage": 400, "two_values": 400, "empty": 400, "too_deep": 400,
    "text_plain": 415, "no_content_type": 415, "too_big": 413,
}


def make_payload(rng, uid, num, limits):
    """(kind, body bytes) of a valid payload; `uid` makes every body unique."""
    kinds = [("small", 30), ("spaced", 10), ("unsorted", 10), ("numbers", 10), ("strings", 10),
             ("nested", 8), ("scalar", 6), ("whitespace", 5), ("big", 5), ("deep", 2), ("huge", 0.3)]
    kind = rng.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
    if kind == "huge" and not limits.take("huge"):
        kind = "big"
    if kind == "small":
        text = '{"pub":"%s","n":%d,"ok":true,"none":null}' % (uid, num)
    elif kind == "spaced":
        text = '{ "pub" : "%s", "list": [1, 2,  3],\t"z": {"b": 1, "a": [ ]} }' % uid
    elif kind == "unsorted":
        text = '{"zeta":%d,"alpha":"%s","mid":[true,false],"Beta":{"y":1,"x":2},"_":0}' % (num, uid)
    elif kind == "numbers":
        text = ('{"pub":"%s","big":12345678901234567890123,"neg":-98765432109876543210%d,"f1":1.0,"f2":2e5,'
                '"f3":1E-7,"f4":-0.0,"f5":0.1,"f6":1.5e+300,"f7":100.50,"i":-0}' % (uid, num % 10))
    elif kind == "strings":
        text = ('{"pub":"%s","q":"she said \\"hi\\"","path":"C:\\\\dir\\\\x","esc":"\\u00e9\\u4e2d\\ud83d\\ude00",'
                '"raw":"\u00e9 \u4e2d\u6587 \U0001F600","ctl":"a\\nb\\tc\\/d\\r\\b\\f","nul":"\\u0000","empty":""}' % uid)
    elif kind == "nested":
        text = '{"pub":"%s","m":[[1,[2,[3,[]]]],{},[{}],[[[[[["deep"]]]]]],[null,[true,[false]]]]}' % uid
    elif kind == "scalar":
        text = rng.choice([
            "%d12345678901234567890" % num,                      # a big integer
            '"scalar %s \\"quoted\\" \\\\ \u00e9"' % uid,        # a string
            '[1.0,2e5,"%s",-0.0]' % uid,                         # an array
            "%d.50" % num,                                       # a float with a trailing zero
            "-%d.0e-3" % num,
        ])
    elif kind == "whitespace":
        text = rng.choice(['  \t{"pub":"%s"}\n', '\n[1, "%s"]  ', '{"pub":"%s"}\r\n', ' "%s" '])
        text = text % uid
    elif kind == "big":
        blob = "".join(rng.choices("abcdefghijklmnopqrstuvwxyz0123456789 -_", k=rng.randint(10_000, 40_000)))
        nums = ",".join(str(rng.randint(-10**12, 10**12)) for _ in range(rng.randint(100, 2000)))
        text = '{"pub":"%s","blob":"%s","nums":[%s],"tail":"\\u00e9"}' % (uid, blob, nums)
    elif kind == "deep":
        # 63 levels is the most a payload may have (64 with the envelope's own level): accepted, never a
        # dead letter, even if a batch around it would be deeper
        d = 63 if rng.random() < 0.3 else rng.randint(40, 62)
        text = "[" * d + '"%s"' % uid + "]" * d
    else:  # huge: over --batch-bytes (512 KiB), sent alone; sometimes just under the 1 MiB envelope limit
        head = '{"pub":"%s","blob":"' % uid
        size = (1 << 20) - rng.randint(1000, 1200) if rng.random() < 0.4 else rng.randint(600_000, 800_000)
        text = head + "h" * (size - len(head) - 2) + '"}'
    return kind, text.encode("utf-8")


def make_invalid(rng, uid, limits):
    """(kind, body, content type or None) of a payload /publish must refuse."""
    kind = rng.choice([k for k in INVALID_KINDS if k != "too_big"] + ["too_big"])
    if kind == "too_big" and not limits.take("too_big"):
        kind = "not_json"
    ctype = "application/json"
    if kind == "not_json":
        body = '{"pub":"%s",' % uid
    elif kind == "trailing_garbage":
        body = '{"pub":"%s"} x' % uid
    elif kind == "two_values":
        body = '1 "%s"' % uid
    elif kind == "empty":
        body = ""
    elif kind == "too_deep":
        d = rng.choice([64, 80])  # 64: one level over the limit
        body = "[" * d + '"%s"' % uid + "]" * d
    elif kind == "text_plain":
        body, ctype = '{"pub":"%s"}' % uid, "text/plain"
    elif kind == "no_content_type":
        body, ctype = '{"pub":"%s"}' % uid, None
    else:
        body = '{"pub":"%s","blob":"%s"}' % (uid, "z" * (1_100_000))
    return kind, body.encode("utf-8"), ctype


class Limits:
    """Caps on the rare expensive payloads, shared by the publishers."""

    def __init__(self, **caps):
        self.caps, self.lock = dict(caps), threading.Lock()

    def take(self, name):
        with self.lock:
            if self.caps.get(name, 0) <= 0:
                return False
            self.caps[name] -= 1
            return True


# --------------------------------------------------------------------------
# Publishers
# --------------------------------------------------------------------------

class Record:
    """What the publishers saw; every field is written under `lock`."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acks = []      # dict(stream, seq, id, text, pub, t)
        self.unknown = []   # dict(stream, text, pub, error, t): sent, no answer
        self.problems = []  # campaign failures seen while publishing
        self.invalid_lost = []  # invalid publishes without an answer (kind, error, t)
        self.counts = collections.Counter()
        self.in_flight = 0


class Publisher(threading.Thread):
    def __init__(self, idx, seed, port, streams, token, record, stop, clock, limits, invalid_rate):
        super().__init__(name="publisher-%d" % idx, daemon=True)
        self.idx, self.port, self.streams, self.token = idx, port, streams, token
        self.rec, self.stop_ev, self.clock, self.limits, self.invalid_rate = record, stop, clock, limits, invalid_rate
        self.rng = random.Random("%s/publisher/%d" % (seed, idx))
        self.conn = None
        self.n = 0

    def run(self):
        try:
            while not self.stop_ev.is_set():
                self.one()
                time.sleep(self.rng.uniform(0, 0.02))  # about 60 publishes a second each, at most
        except Exception as e:  # a bug of this script: say so, do not hang
            with self.rec.lock:
                self.rec.problems.append("publisher %d crashed: %r" % (self.idx, e))
        finally:
            if self.conn:
                self.conn.close()

    def send(self, stream, body, ctype):
        """('refused', None, err) | ('lost', None, err) | ('answer', status, body)."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        if self.conn.sock is None:
            try:
                self.conn.connect()
            except OSError as e:  # nothing was sent
                self.conn.close()
                return "refused", None, repr(e)
        headers = {"Authorization": "Bearer " + self.token}
        if ctype:
            headers["Content-Type"] = ctype
        with self.rec.lock:
            self.rec.in_flight += 1
        try:
            self.conn.request("POST", "/publish?stream=" + stream, body=body, headers=headers)
            r = self.conn.getresponse()
            data = r.read()
            if r.will_close:
                self.conn.close()
            return "answer", r.status, data
        except (OSError, http.client.HTTPException) as e:
            self.conn.close()
            return "lost", None, repr(e)
        finally:
            with self.rec.lock:
                self.rec.in_flight -= 1

    def one(self):
        self.n += 1
        uid = "p%d-%d" % (self.idx, self.n)
        num = self.idx * 10**9 + self.n
        stream = self.rng.choice(self.streams)
        rec = self.rec
        if self.rng.random() < self.invalid_rate:
            kind, body, ctype = make_invalid(self.rng, uid, self.limits)
            how, status, data = self.send(stream, body, ctype)
            with rec.lock:
                rec.counts["invalid_sent"] += 1
                want = INVALID_KINDS[kind]
                if how != "answer":
                    rec.counts["invalid_no_answer"] += 1
                    rec.counts["invalid_no_answer_" + kind] += 1
                    rec.counts["invalid_conn_refused"] += how == "refused"
                    rec.invalid_lost.append(dict(kind=kind, how=how, error=data, t=self.clock()))
                elif status == want:
                    rec.counts["invalid_refused"] += 1
                elif status in (503, 429):
                    rec.counts["invalid_503"] += 1
                elif 200 <= status < 300:
                    rec.problems.append("invalid payload (%s) acknowledged with %d %s: body %s"
                                        % (kind, status, short(data), short(body)))
                else:
                    rec.problems.append("invalid payload (%s) answered %d, the contract says %d: %s; body %s"
                                        % (kind, status, want, short(data), short(body)))
            if how == "refused":
                time.sleep(0.05)
            return
        kind, body = make_payload(self.rng, uid, num, self.limits)
        t = self.clock()
        how, status, data = self.send(stream, body, "application/json")
        text = Text(body)
        with rec.lock:
            rec.counts["kind_" + kind] += 1
            if how == "refused":
                rec.counts["refused"] += 1
            elif how == "lost":
                rec.counts["sent"] += 1
                rec.counts["unknown"] += 1
                rec.unknown.append(dict(stream=stream, text=text, pub=uid, error=data, t=t))
            elif status == 202:
                rec.counts["sent"] += 1
                try:
                    a = json.loads(data)
                    ok = (isinstance(a, dict) and isinstance(a.get("id"), str) and a.get("stream") == stream
                          and isinstance(a.get("seq"), int) and a["seq"] >= 1)
                except ValueError:
                    ok = False
                if not ok:
                    rec.problems.append("a 202 answer is not {id, stream: %s, seq}: %s" % (stream, short(data)))
                    return
                rec.counts["acked"] += 1
                rec.acks.append(dict(stream=stream, seq=a["seq"], id=a["id"], text=text, pub=uid, t=t))
            elif status in (503, 429):
                rec.counts["sent"] += 1
                rec.counts["answered_%d" % status] += 1
            else:
                rec.counts["sent"] += 1
                rec.problems.append("valid payload (%s) on stream %s answered %d %s: body %s"
                                    % (kind, stream, status, short(data), short(body)))
        if how == "refused" or status == 503:
            time.sleep(self.rng.uniform(0.02, 0.1))  # the primary is down or its storage fails


# --------------------------------------------------------------------------
# The checker
# --------------------------------------------------------------------------

PAYLOAD_KEY = re.compile(r'"payload"\s*:')


def parse_dump(source):
    """Rows (stream, seq, id, Text of the payload as printed) of `steadfast-secondary dump`, and problems.

    `source`: the dump's bytes or a binary file (read a line at a time: a long
    run's dump may be big). One JSON object a line; a line that does not end an
    object is joined with the next ones (a few at most), so a payload that keeps
    a newline inside still parses. The payload is the raw text after "payload":
    up to the object's final '}', which needs "payload" to be the last key: that
    is checked."""
    lines = source.splitlines(keepends=True) if isinstance(source, (bytes, bytearray)) else source
    dec = json.JSONDecoder()
    rows, problems = [], []
    buf, joined, lineno = "", 0, 0
    for line in lines:
        lineno += 1
        buf += line.decode("utf-8", "surrogateescape")
        joined += 1
        text = buf.strip(" \t\r\n")
        if not text:
            buf, joined = "", 0
            continue
        try:
            obj, end = dec.raw_decode(text)
        except ValueError as e:
            if joined < 50 and len(buf) < 4 << 20:
                continue
            problems.append("dump: not JSON at line %d (%s): %s" % (lineno - joined + 1, e, short(text[:200])))
            buf, joined = "", 0
            continue
        first = lineno - joined + 1
        buf, joined = "", 0
        raw = text[:end]
        if text[end:].strip(" \t\r\n"):
            problems.append("dump: line %d has more than one JSON value: %s" % (first, short(text)))
            continue
        if not (isinstance(obj, dict) and isinstance(obj.get("stream"), str) and isinstance(obj.get("seq"), int)
                and isinstance(obj.get("id"), str) and "payload" in obj):
            problems.append("dump: line %d is not {stream, seq, id, payload}: %s" % (first, short(raw)))
            continue
        m = PAYLOAD_KEY.search(raw)
        payload = raw[m.end():-1].strip(" \t\r\n")
        try:
            last = json.loads(payload) == obj["payload"]
        except ValueError:
            last = False
        if not last:
            problems.append("dump: \"payload\" is not the last key at line %d: %s" % (first, short(raw)))
            continue
        rows.append((obj["stream"], obj["seq"], obj["id"], Text(payload.encode("utf-8", "surrogateescape"))))
    if buf.strip(" \t\r\n"):
        problems.append("dump: not JSON at line %d (the end): %s" % (lineno - joined + 1, short(buf[:200])))
    return rows, problems


def first_difference(a, b):
    for k, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return k
    return min(len(a), len(b))


def verify(dump, acks, unknown, status):
    """Problems (a list of strings; empty: all good) and figures, from the dump
    (bytes or a binary file), the acknowledged and the unanswered publishes and
    the primary's status."""
    rows, problems = parse_dump(dump)
    figures = collections.Counter(applied=len(rows))
    MAXP = 20  # problems of one kind listed at most

    def add(kind, msg):
        figures["problem_" + kind] += 1
        if figures["problem_" + kind] <= MAXP:
            problems.append(msg)
        elif figures["problem_" + kind] == MAXP + 1:
            problems.append("(more problems of the kind '%s' not listed)" % kind)

    by_stream = collections.OrderedDict()
    for r in rows:
        by_stream.setdefault(r[0], []).append(r)
    at = {}
    for s, rs in by_stream.items():
        seqs = [r[1] for r in rs]
        if seqs != list(range(1, len(rs) + 1)):
            k = next(k for k, q in enumerate(seqs) if q != k + 1)
            add("order", "stream %s: applied seqs are not 1..%d in apply order: at position %d seq %d, around %s"
                % (s, len(rs), k + 1, seqs[k], seqs[max(0, k - 3):k + 4]))
        for r in rs:
            if (s, r[1]) in at:
                add("twice", "stream %s: seq %d applied twice (ids %s and %s)" % (s, r[1], at[(s, r[1])][2], r[2]))
            else:
                at[(s, r[1])] = r
    ids = collections.Counter(r[2] for r in rows)
    for i, c in ids.items():
        if c > 1:
            add("id_twice", "id %s applied %d times" % (i, c))
    acked_at = {}
    for a in acks:
        key = (a["stream"], a["seq"])
        if key in acked_at:
            add("ack_twice", "stream %s seq %d was acknowledged twice (ids %s and %s)"
                % (a["stream"], a["seq"], acked_at[key]["id"], a["id"]))
            continue
        acked_at[key] = a
        r = at.get(key)
        want = a["text"]
        if r is None:
            add("lost", "LOST: acknowledged stream %s seq %d id %s (publish %s) was never applied; body %r"
                % (a["stream"], a["seq"], a["id"], a["pub"], want))
        elif r[2] != a["id"]:
            add("id", "stream %s seq %d: applied id %s, acknowledged id %s (publish %s)"
                % (a["stream"], a["seq"], r[2], a["id"], a["pub"]))
        elif r[3] != want:
            add("payload", "stream %s seq %d (publish %s): the payload differs from what was sent %s"
                % (a["stream"], a["seq"], a["pub"], difference(want, r[3])))
        else:
            figures["acked_applied"] += 1
    unknown_left = collections.Counter((u["stream"], u["text"]) for u in unknown)
    acked_bodies = {(a["stream"], a["text"]) for a in acks}
    for (s, seq), r in at.items():
        if r[3].startswith(TOMBSTONE):
            add("dead_letter", "stream %s seq %d: a dead-letter tombstone was applied: %r" % (s, seq, r[3]))
        if (s, seq) in acked_at:
            continue
        key = (s, r[3])
        if unknown_left[key] > 0:
            unknown_left[key] -= 1
            figures["unknown_applied"] += 1
        elif key in acked_bodies:
            add("duplicate", "stream %s seq %d: an acknowledged payload applied a second time (id %s): %r"
                % (s, seq, r[2], r[3]))
        elif not r[3].startswith(TOMBSTONE):
            add("unexpected", "stream %s seq %d id %s: applied, but never acknowledged nor published without an "
                "answer: %r" % (s, seq, r[2], r[3]))
    if status is None:
        problems.append("no status from the primary")
    else:
        if status.get("pending") != 0:
            problems.append("status: pending %r, not 0" % status.get("pending"))
        if status.get("dead_letter", 0) != 0:
            problems.append("status: dead_letter %r, not 0 (no payload here may be dead-lettered)"
                            % status.get("dead_letter"))
        if status.get("blocked"):
            problems.append("status: blocked streams %r" % status.get("blocked"))
        for s, n in (status.get("acked_seq") or {}).items():
            last = len(by_stream.get(s, []))
            if n != last:
                problems.append("status: acked_seq of stream %s is %r, the secondary applied %d" % (s, n, last))
    return problems, figures


# --------------------------------------------------------------------------
# The campaign
# --------------------------------------------------------------------------

ACTIONS = ["kill_primary", "kill_secondary", "storage_primary", "storage_secondary", "term_primary",
           "term_secondary", "pause_secondary"]
WEIGHTS = [30, 25, 15, 15, 8, 7, 5]


def make_plan(rng, duration, storage):
    """(time, action, params) from the seed: every kind of action at least once
    (if the run is long enough), then weighted random ones, 2-7 s apart."""
    actions = [a for a in ACTIONS if storage or not a.startswith("storage")]
    weights = [w for a, w in zip(ACTIONS, WEIGHTS) if a in actions]
    first = list(actions)
    rng.shuffle(first)
    plan, t = [], rng.uniform(2.0, 4.0)
    while t < duration - 8.0:
        a = first.pop() if first else rng.choices(actions, weights)[0]
        p = {}
        if a == "kill_primary":
            p = dict(mid=rng.random() < 0.7, down=round(rng.uniform(0.1, 1.5), 2))
        elif a == "kill_secondary":
            p = dict(mid=rng.random() < 0.7, down=round(rng.uniform(0.1, 2.0), 2))
        elif a.startswith("storage"):
            p = dict(length=round(rng.uniform(1.0, 3.0), 2),
                     also=rng.choices([None, "kill_other", "kill_same"], [70, 20, 10])[0])
        elif a.startswith("term"):
            p = dict(down=round(rng.uniform(0.1, 1.0), 2))
        elif a == "pause_secondary":
            p = dict(length=round(rng.uniform(0.5, 4.0), 2))
        plan.append((round(t, 2), a, p))
        t += rng.uniform(2.0, 7.0)
    return plan


def make_nats_plan(rng, duration):
    """--jetstream: (time, params) of the kill -9s of a NATS node, a timeline of
    their own beside the plan's (they happen during its faults too): the
    stream's leader half of the time, else a node drawn here (the leader or
    not); restarted `down` s later, and the next one 2-8 s after that restart:
    one node down at most, and the restarted one has some time to catch up."""
    plan, t = [], rng.uniform(3.0, 6.0)
    while t < duration - 5.0:
        p = dict(leader=rng.random() < 0.5, node=rng.randint(1, 3), down=round(rng.uniform(0.5, 6.0), 2))
        plan.append((round(t, 2), p))
        t += p["down"] + rng.uniform(2.0, 8.0)
    return plan


class Campaign:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.rng = random.Random("%s/faults" % self.seed)
        self.work = tempfile.mkdtemp(prefix="steadfast-chaos.")
        self.t0 = time.monotonic()
        self.problems = []
        self.faults = collections.Counter()
        self.record = Record()
        self.stop_publishing = threading.Event()
        self.publishers = []
        self.token = "chaos-%s" % random.Random("%s/token" % self.seed).getrandbits(64)
        self.token_file = os.path.join(self.work, "token")
        with open(self.token_file, "w") as f:
            f.write(self.token + "\n")
        self.storage = not args.no_faults and shutil.which("prlimit") is not None
        if args.no_faults:
            self.fault_rate = self.drop_rate = 0.0
            self.delay_ms = 0
        else:
            self.fault_rate = round(self.rng.uniform(0.05, 0.15), 3)
            self.drop_rate = round(self.rng.uniform(0.02, 0.05), 3)
            self.delay_ms = self.rng.randint(0, 2)
        self.jetstream = args.jetstream
        self.nats_plan = []  # --jetstream: (time, params) of the NATS node kills to come
        self.last_status = None  # the primary's status, as last read while draining
        self.nats = NatsCluster(os.path.join(self.work, "nats"), 3, args.secure) if args.jetstream else None
        if self.jetstream:  # 503s and drops are for HTTP deliveries: NATS node kills instead
            self.fault_rate = self.drop_rate = 0.0
            self.delay_ms = 0
        sport, pport = free_port(), free_port()
        while pport == sport:
            pport = free_port()
        bindir = os.path.abspath(args.bin)
        # The ports are read at each start: JetStream may pick others once the cluster listens.
        self.secondary = Server("secondary", lambda faults=True: self.secondary_argv(bindir, self.secondary.port,
                                                                                    faults), sport,
                                os.path.join(self.work, "secondary.log"), self.clock,
                                js_secondary_ready if self.jetstream else None)
        self.primary = Server("primary", lambda: self.primary_argv(bindir, self.secondary.port, self.primary.port),
                              pport, os.path.join(self.work, "primary.log"), self.clock)
        self.bindir = bindir

    def clock(self):
        return time.monotonic() - self.t0

    def drop(self, argv):
        out, skip = [], False
        for a in argv:
            if skip:
                skip = False
                continue
            if a in self.args.drop_flag:
                skip = True  # every flag here takes a value
                continue
            out.append(a)
        return out

    JS_STREAM = "chaos"

    def secondary_argv(self, bindir, sport, faults):
        if self.jetstream:  # --listen serves /health and /metrics only
            return self.drop([os.path.join(bindir, "steadfast-secondary"), "--source", self.nats.urls,
                              "--js-stream", self.JS_STREAM, "--consumer", "c1",
                              "--data", os.path.join(self.work, "secondary"), "--listen", "127.0.0.1:%d" % sport]
                             + self.nats.client_flags())
        argv = [os.path.join(bindir, "steadfast-secondary"), "--listen", "127.0.0.1:%d" % sport,
                "--data", os.path.join(self.work, "secondary"), "--token-file", self.token_file]
        if faults and (self.fault_rate or self.drop_rate):
            argv += ["--fault-rate", str(self.fault_rate), "--drop-rate", str(self.drop_rate),
                     "--delay-ms", str(self.delay_ms)]
        return self.drop(argv)

    def primary_argv(self, bindir, sport, pport):
        if self.jetstream:  # no --connections: keep-alive connections to an HTTP secondary
            return self.drop([os.path.join(bindir, "steadfast-primary"), "--secondary", self.nats.urls,
                              "--js-stream", self.JS_STREAM, "--js-replicas", "3",
                              "--data", os.path.join(self.work, "primary"), "--listen", "127.0.0.1:%d" % pport,
                              "--sync", "full", "--token-file", self.token_file, "--max-backoff-ms", "500",
                              "--ladder", "200ms 500ms 1s", "--retain", "2m"] + self.nats.client_flags())
        return self.drop([os.path.join(bindir, "steadfast-primary"), "--secondary", "http://127.0.0.1:%d" % sport,
                          "--data", os.path.join(self.work, "primary"), "--listen", "127.0.0.1:%d" % pport,
                          "--token-file", self.token_file, "--connections", "4", "--max-backoff-ms", "500",
                          "--ladder", "200ms 500ms 1s", "--retain", "2m"])

    def replay(self):
        a = self.args
        extra = "".join([" --streams %d" % a.streams if a.streams != 8 else "",
                         " --publishers %d" % a.publishers if a.publishers != 8 else "",
                         " --no-faults" if a.no_faults else "", " --no-invalid" if a.no_invalid else "",
                         " --jetstream" if a.jetstream else "", " --secure" if a.secure else ""]
                        + [" --drop-flag %s" % f for f in a.drop_flag])
        run_sh = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run.sh")
        return "bash %s %s --seed %d --duration %g%s" % (shlex.quote(run_sh), shlex.quote(self.bindir), self.seed,
                                                          a.duration, extra)

    # ---- monitoring ----
    def check_alive(self):
        for s in (self.primary, self.secondary):
            rc = s.died_on_its_own()
            if rc is not None:
                raise CampaignFailure("the %s exited on its own with %s at %.1fs (log: %s)"
                                      % (s.name, rc, self.clock(), s.log_path))
        if self.nats is not None and self.nats.started:
            i = self.nats.exited_on_its_own()
            if i is not None:
                raise CampaignFailure("NATS node %d exited on its own at %.1fs (log: %s)"
                                      % (i, self.clock(), os.path.join(self.nats.dir, "n%d.log" % i)))
        with self.record.lock:
            if self.record.problems and self.args.stop_early:
                raise CampaignFailure("publishers saw: %s" % self.record.problems[0])

    def sleep(self, seconds):
        """Sleeps while watching the servers, and prints progress every 5 s."""
        end = time.monotonic() + seconds
        while True:
            self.check_alive()
            now = time.monotonic()
            if self.nats is not None and self.nats.down is not None and now >= self.nats.restart_at:
                self.restart_nats()
                now = time.monotonic()
            if self.nats_plan and self.nats.down is None and self.clock() >= self.nats_plan[0][0]:
                self.kill_nats(**self.nats_plan.pop(0)[1])
                now = time.monotonic()
            if now >= self.next_progress:
                self.progress()
                self.next_progress = now + 5.0
            if now >= end:
                return
            time.sleep(min(0.1, end - now))

    def progress(self):
        c = self.record.counts
        depth = metric(self.primary.port, "steadfast_primary_outbox_depth") if self.primary.alive() else None
        f = self.faults
        nats = ""
        if self.jetstream:
            lag = metric(self.secondary.port, "steadfast_secondary_jetstream_consumer_pending") \
                if self.secondary.alive() else None
            nats = "  nats N%d%s | consumer lag %s" % (f["kill_nats"], " (n%d down)" % self.nats.down if self.nats.down
                                                        else "", "-" if lag is None else "%d" % lag)
        log("  [%5.1fs] acked %6d  unknown %3d  refused %5d  503s %4d  invalid %3d | pending %6s | kills P%d S%d  "
            "term P%d S%d  storage P%d S%d  pause S%d%s" % (
                self.clock(), c["acked"], c["unknown"], c["refused"], c["answered_503"], c["invalid_sent"],
                "-" if depth is None else "%d" % depth, f["kill_primary"], f["kill_secondary"], f["term_primary"],
                f["term_secondary"], f["storage_primary"], f["storage_secondary"], f["pause_secondary"], nats))

    # ---- actions ----
    def say(self, msg):
        log("  [%5.1fs] >>> %s" % (self.clock(), msg))

    def kill(self, side, down, mid=False):
        srv = self.primary if side == "primary" else self.secondary
        inflight = pending = 0
        deadline = time.monotonic() + 2.0
        if mid and side == "primary":  # wait (briefly) for publishes in flight
            while time.monotonic() < deadline:
                with self.record.lock:
                    inflight = self.record.in_flight
                if inflight:
                    break
                time.sleep(0.002)
        elif mid and self.jetstream:  # wait (briefly) for messages being consumed: the consumer lags
            while time.monotonic() < deadline and srv.alive():
                pending = metric(srv.port, "steadfast_secondary_jetstream_consumer_pending") or 0
                if pending:
                    break
                time.sleep(0.02)
        elif mid:  # wait (briefly) for messages being sent: the primary has some pending
            while time.monotonic() < deadline and self.primary.alive():
                pending = metric(self.primary.port, "steadfast_primary_outbox_depth") or 0
                if pending:
                    break
                time.sleep(0.02)
        srv.kill9()
        self.faults["kill_" + side] += 1
        if inflight:
            self.faults["kill_primary_mid_publish"] += 1
        if pending:
            self.faults["kill_secondary_mid_send"] += 1
        self.say("kill -9 %s%s%s; restart in %.2fs" % (side, " with %d publishes in flight" % inflight if inflight else "",
                                                        (" with a consumer lag of %d" if self.jetstream else
                                                         " with %d messages pending") % pending if pending else "",
                                                        down))
        self.sleep(down)
        srv.start()

    def term(self, side, down):
        srv = self.primary if side == "primary" else self.secondary
        rc = srv.terminate()
        self.faults["term_" + side] += 1
        self.say("SIGTERM %s: exit code %s; restart in %.2fs" % (side, rc, down))
        if rc != 0:
            self.problems.append("the %s exited with %s on SIGTERM at %.1fs (expected 0%s)"
                                 % (side, rc, self.clock(), "; it was killed after 15 s" if rc is None else ""))
        self.sleep(down)
        srv.start()

    def storage_window(self, side, length, also):
        srv = self.primary if side == "primary" else self.secondary
        other = self.secondary if side == "primary" else self.primary
        pid = srv.pid
        if not set_fsize(pid, 0):
            self.problems.append("prlimit --fsize=0 on the %s (pid %d) failed" % (side, pid))
            return
        self.faults["storage_" + side] += 1
        self.say("storage of the %s fails for %.2fs (prlimit --fsize=0)%s"
                 % (side, length, {"kill_other": ", the %s killed meanwhile" % other.name,
                                   "kill_same": ", killed during it"}.get(also, "")))
        self.sleep(length / 2)
        if also == "kill_other":
            self.kill(other.name, 0.3)
        elif also == "kill_same":
            self.kill(side, 0.3)  # the new process starts with no limit: the window ends
            return
        self.sleep(length / 2)
        if srv.pid == pid and srv.alive() and not set_fsize(pid, "unlimited"):
            self.problems.append("prlimit --fsize=unlimited on the %s (pid %d) failed" % (side, pid))
        self.say("storage of the %s works again" % side)

    def pause(self, side, length):
        """SIGSTOP, then SIGCONT: a secondary that hangs with connections open."""
        srv = self.primary if side == "primary" else self.secondary
        srv.proc.send_signal(signal.SIGSTOP)
        self.faults["pause_" + side] += 1
        self.say("the %s is stopped (SIGSTOP) for %.2fs" % (side, length))
        try:
            self.sleep(length)
        finally:
            if srv.alive():
                srv.proc.send_signal(signal.SIGCONT)
        self.say("the %s goes on (SIGCONT)" % side)

    def kill_nats(self, leader, node, down):
        """kill -9 of a NATS node (the stream's leader if `leader` and one is known),
        restarted `down` s later by sleep(); a node still down is restarted first.
        Called from sleep(), at the times of the NATS plan."""
        if self.nats.down is not None:
            self.restart_nats()
        lead = self.nats.leader(self.JS_STREAM)
        if leader and lead is not None:
            node = lead
        self.nats.kill(node, down)
        self.faults["kill_nats"] += 1
        self.faults["kill_nats_leader"] += node == lead
        self.say("kill -9 NATS node %d (%s%s); restart in %.2fs"
                 % (node, "the stream's leader" if node == lead else "not the leader",
                    "" if leader and lead is not None else
                    ", drawn at random" + (" (aimed at the leader: none known)" if leader else ""), down))

    def restart_nats(self):
        i = self.nats.restart()
        self.say("NATS node %d restarted" % i)

    def do(self, action, p):
        if action == "kill_primary":
            self.kill("primary", p["down"], p["mid"])
        elif action == "kill_secondary":
            self.kill("secondary", p["down"], p["mid"])
        elif action == "term_primary":
            self.term("primary", p["down"])
        elif action == "term_secondary":
            self.term("secondary", p["down"])
        elif action == "storage_primary":
            self.storage_window("primary", p["length"], p["also"])
        elif action == "storage_secondary":
            self.storage_window("secondary", p["length"], p["also"])
        elif action == "pause_secondary":
            self.pause("secondary", p["length"])

    # ---- the run ----
    def run(self):
        a = self.args
        log("chaos: seed %d (replay: %s)" % (self.seed, self.replay()))
        log("chaos: %gs, %d streams, %d publishers; %s; "
            "storage windows %s; work folder %s" % (a.duration, a.streams, a.publishers,
                                                   "JetStream: 3-node NATS cluster, stream %s with 3 replicas, "
                                                   "NATS node kills %s" % (self.JS_STREAM, "off" if a.no_faults else "on")
                                                   if self.jetstream else
                                                   "secondary --fault-rate %s --drop-rate %s --delay-ms %d"
                                                   % (self.fault_rate, self.drop_rate, self.delay_ms),
                                                   "on" if self.storage else "off" + (
                                                       "" if a.no_faults else " (prlimit not found)"),
                                                   self.work))
        plan = [] if a.no_faults else make_plan(self.rng, a.duration, self.storage)
        if self.jetstream and not a.no_faults:
            self.nats_plan = make_nats_plan(random.Random("%s/nats" % self.seed), a.duration)
        self.next_progress = time.monotonic() + 5.0
        if self.jetstream:
            if shutil.which("nats-server") is None:
                raise CampaignFailure("--jetstream needs nats-server on the PATH")
            urls = self.nats.start()
            log("chaos: NATS cluster up: %s (logs: %s/n*.log)" % (urls, self.nats.dir))
            # The servers' ports were free when drawn, before the nodes took theirs.
            taken = set(self.nats.ports())
            for srv in (self.secondary, self.primary):
                while srv.port in taken:
                    srv.port = free_port()  # free now: never one of the nodes'
                taken.add(srv.port)
        if self.jetstream:
            # The primary creates the JetStream stream; the secondary's consumer needs it
            # (and its /health may wait for its consumer).
            self.primary.start()
            self.secondary.start()
        else:
            self.secondary.start()
            self.primary.start()
        streams = ["s%d" % (k + 1) for k in range(a.streams)]
        limits = Limits(huge=max(2, int(a.duration / 15)), too_big=max(1, int(a.duration / 40)))
        invalid_rate = 0.0 if a.no_invalid else 0.015
        for k in range(a.publishers):
            p = Publisher(k + 1, self.seed, self.primary.port, streams, self.token, self.record,
                          self.stop_publishing, self.clock, limits, invalid_rate)
            self.publishers.append(p)
            p.start()
        for t, action, p in plan:
            self.sleep(max(0.0, t - self.clock()))
            self.do(action, p)
        self.sleep(max(0.0, a.duration - self.clock()))
        self.say("publishing stops")
        self.stop_publishing.set()
        self.nats_plan = []
        for p in self.publishers:
            p.join(45)
            if p.is_alive():
                self.problems.append("publisher %d did not finish within 45 s (a publish hangs)" % p.idx)
        # Faults stop: storage works, the secondary restarts without fault flags
        # (JetStream: every NATS node runs again).
        if self.jetstream and self.nats.down is not None:
            self.restart_nats()
        if not a.no_faults:
            for s in (self.primary, self.secondary):
                if self.storage and s.alive():
                    set_fsize(s.pid, "unlimited")
        if not a.no_faults and not self.jetstream:
            rc = self.secondary.terminate()
            if rc != 0:
                self.problems.append("the secondary exited with %s on SIGTERM (expected 0)" % rc)
            self.secondary.start(faults=False)
            self.say("faults stop: the secondary restarted without fault flags")
        elif self.jetstream and not a.no_faults:
            self.say("faults stop: every NATS node runs")
        try:
            status = self.wait_drained(a.drain_timeout)
        except CampaignFailure as e:
            # Still read the dump and check it: it says what is missing (the
            # status is the last one read).
            self.problems.append(str(e))
            status = self.last_status
            log("  [%5.1fs] NOT drained; checking what the secondary has anyway" % self.clock())
        if self.jetstream:
            code, body = http_get(self.secondary.port, "/health")
            try:
                js = json.loads(body).get("jetstream", {})
            except (ValueError, AttributeError):
                js = None
            if code != 200 or not isinstance(js, dict):
                self.problems.append("the secondary's /health after the drain: %s %s" % (code, short(body, 400)))
            elif js.get("blocked"):
                self.problems.append("the secondary reports blocked streams after the drain: %s" % json.dumps(js["blocked"]))
        dump = self.dump()
        log("  [%5.1fs] the secondary's dump has %d bytes; checking" % (self.clock(), os.path.getsize(dump)))
        for s in (self.primary, self.secondary):
            rc = s.terminate()
            if rc != 0:
                self.problems.append("the %s exited with %s on the final SIGTERM (expected 0)" % (s.name, rc))
        with self.record.lock:
            self.problems[:0] = self.record.problems
        with open(dump, "rb") as f:
            problems, figures = verify(f, self.record.acks, self.record.unknown, status)
        self.problems += problems
        return figures

    def primary_status(self):
        try:
            r = subprocess.run([os.path.join(self.bindir, "steadfast-primary"), "status", "--data",
                                os.path.join(self.work, "primary")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               timeout=30)
        except subprocess.TimeoutExpired:
            return None, "status did not finish within 30 s"
        except OSError as e:  # e.g. the binary being rebuilt meanwhile
            return None, "status could not run: %s" % e
        if r.returncode != 0:
            return None, "status exited with %d: %s" % (r.returncode, short(r.stderr))
        try:
            return json.loads(r.stdout), None
        except ValueError:
            return None, "status printed no JSON: %s" % short(r.stdout)

    def wait_drained(self, timeout):
        """The primary's status once nothing is pending; JetStream: also once the
        secondary has applied what the log holds (the primary's acked_seq of every
        stream), as the primary's pending 0 only says that the log has it."""
        deadline = time.monotonic() + timeout
        status, err, behind = None, None, None
        while time.monotonic() < deadline:
            status, err = self.primary_status()
            self.last_status = status if status is not None else self.last_status
            if status is not None and status.get("pending") == 0:
                if not self.jetstream:
                    return status
                behind = self.secondary_behind(status)
                if behind == {}:
                    return status
            self.sleep(0.5)
        extra = ""
        if self.jetstream:
            extra = "; the secondary is behind (stream: applied/acked) %s; its /health %s" % (
                json.dumps(behind), short(http_get(self.secondary.port, "/health")[1], 600))
        raise CampaignFailure("not drained %.0fs after the faults stopped: status %s%s%s"
                              % (timeout, json.dumps(status), " (%s)" % err if err else "", extra))

    def secondary_behind(self, status):
        """{stream: "applied/acked"} of the streams the secondary has not applied up to
        the primary's acked_seq ({}: none), or None without an answer from it."""
        st, body = http_get(self.secondary.port, "/metrics", timeout=2.0)
        if st != 200:
            return None
        applied = {}
        for line in body.decode("utf-8", "replace").splitlines():
            m = re.match(r'steadfast_secondary_last_applied_seq\{stream="([^"]*)"\} (\S+)$', line)
            if m:
                applied[m.group(1)] = int(float(m.group(2)))
        return {s: "%d/%d" % (applied.get(s, 0), n) for s, n in (status.get("acked_seq") or {}).items()
                if applied.get(s, 0) != n}

    def dump(self):
        out = os.path.join(self.work, "dump")
        try:
            with open(out, "wb") as f:
                r = subprocess.run([os.path.join(self.bindir, "steadfast-secondary"), "dump", "--data",
                                    os.path.join(self.work, "secondary")], stdout=f, stderr=subprocess.PIPE,
                                   timeout=300)
        except subprocess.TimeoutExpired:
            raise CampaignFailure("dump (while the secondary runs) did not finish within 300 s")
        except OSError as e:
            raise CampaignFailure("dump could not run: %s" % e)
        if r.returncode != 0:
            raise CampaignFailure("dump (while the secondary runs) exited with %d: %s" % (r.returncode, short(r.stderr)))
        return out

    def save_records(self):
        """What the publishers saw, for a post-mortem next to the logs."""
        with open(os.path.join(self.work, "acks.jsonl"), "w") as f:
            for a in self.record.acks:
                f.write(json.dumps(dict(a, text=repr(a["text"]))) + "\n")
        with open(os.path.join(self.work, "unknown.jsonl"), "w") as f:
            for u in self.record.unknown:
                f.write(json.dumps(dict(u, text=repr(u["text"]))) + "\n")
        with open(os.path.join(self.work, "invalid_no_answer.jsonl"), "w") as f:
            for u in self.record.invalid_lost:
                f.write(json.dumps(u) + "\n")

    def cleanup(self):
        self.stop_publishing.set()
        try:
            for s in (self.primary, self.secondary):
                s.kill9()
            for p in self.publishers:
                p.join(35)
        finally:
            if self.nats is not None:
                self.nats.stop()


# Log events that must not happen here: nothing is invalid, no secondary is
# restored from an older copy (a kill -9 loses nothing it acknowledged), and
# there is one primary with one epoch.
BAD_EVENTS = ("blocked", "dead_letter", "demoted", "rewind", "secondary_behind", "conflict")


# JetStream (source.hpp): a secondary whose consumer delivers a stream's
# message before an earlier one (redelivered later: nak'd, or not acknowledged
# before a kill) answers it "gap", naks it and logs the stream "blocked"
# until the earlier one comes. That is how it keeps the order, not a fault;
# "blocked" for any other reason (a conflict) still is.
def tolerated_gap(ev, obj):
    return ev == "blocked" and str(obj.get("reason", "")).startswith("gap")


def log_events(path, tolerate=None):
    """Counts of the "event" of each JSON log line, the first line of each bad event,
    and the counts of the bad events `tolerate(event, line object)` lets pass."""
    counts, bad, tolerated = collections.Counter(), {}, collections.Counter()
    try:
        with open(path, "rb") as f:
            for line in f:
                if not line.startswith(b"{"):
                    continue
                try:
                    obj = json.loads(line)
                    ev = obj.get("event")
                except (ValueError, AttributeError):
                    continue
                if isinstance(ev, str):
                    counts[ev] += 1
                    if ev in BAD_EVENTS and tolerate is not None and tolerate(ev, obj):
                        tolerated[ev] += 1
                    elif ev in BAD_EVENTS and ev not in bad:
                        bad[ev] = line.decode("utf-8", "replace").strip()[:400]
    except OSError:
        pass
    return counts, bad, tolerated


def tail(path, n=25):
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        return "\n".join("    " + l[:400] for l in lines[-n:])
    except OSError:
        return "    (no log)"


def main():
    ap = argparse.ArgumentParser(description="Chaos campaign against steadfast-primary and steadfast-secondary.")
    ap.add_argument("--bin", help="folder with steadfast-primary and steadfast-secondary")
    ap.add_argument("--seed", type=int, default=None, help="seed of the campaign (default: random)")
    ap.add_argument("--duration", type=float, default=90, help="seconds of publishing under faults (default 90)")
    ap.add_argument("--streams", type=int, default=8, help="streams (default 8)")
    ap.add_argument("--publishers", type=int, default=8, help="publisher threads (default 8)")
    ap.add_argument("--drain-timeout", type=float, default=120, help="seconds to drain once faults stop (default 120)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder even on success")
    ap.add_argument("--stop-early", action="store_true", help="end the campaign at the first publish problem")
    ap.add_argument("--no-faults", action="store_true",
                    help="no kills, no storage windows, no 503s or drops (to check the checker)")
    ap.add_argument("--no-invalid", action="store_true", help="send no deliberately invalid payloads")
    ap.add_argument("--drop-flag", action="append", default=[], metavar="FLAG",
                    help="leave out a server flag (and its value), e.g. --drop-flag --connections, "
                         "to try binaries that predate it")
    ap.add_argument("--jetstream", action="store_true",
                    help="the pair over a 3-node NATS JetStream cluster (test/integration/jetstream/cluster.sh; "
                         "nats-server on the PATH), with kill -9 of NATS nodes instead of 503s and drops")
    ap.add_argument("--secure", action="store_true",
                    help="with --jetstream: the cluster asks for TLS with client certificates and .creds logins "
                         "(an operator-mode cluster), and both daemons give them")
    ap.add_argument("--self-test", action="store_true", help="check the checker against made-up dumps, and exit")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.bin:
        ap.error("--bin is required")
    for b in ("steadfast-primary", "steadfast-secondary"):
        if not os.access(os.path.join(args.bin, b), os.X_OK):
            ap.error("no executable %s in %s" % (b, args.bin))
    if args.secure and not args.jetstream:
        ap.error("--secure is for --jetstream (over HTTP, the campaign uses a token)")
    if args.streams < 1 or args.publishers < 1 or args.duration < 10:
        ap.error("--streams and --publishers must be at least 1, --duration at least 10")
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 2**31)

    def on_signal(sig, _frame):
        raise KeyboardInterrupt("signal %d" % sig)

    signal.signal(signal.SIGTERM, on_signal)
    c = Campaign(args)
    figures = collections.Counter()
    try:
        figures = c.run()
    except CampaignFailure as e:
        c.problems.insert(0, str(e))
    except KeyboardInterrupt as e:
        c.problems.insert(0, "interrupted (%s)" % (e or "SIGINT"))
    finally:
        c.cleanup()
    try:
        c.save_records()
    except OSError:
        pass
    rc = c.record.counts
    f = c.faults
    log("")
    log("chaos totals (seed %d):" % c.seed)
    log("  publishes: %d sent, %d acknowledged, %d unknown (no answer; %d of them applied), %d refused "
        "(primary down), %d answered 503, %d answered 429"
        % (rc["sent"], rc["acked"], rc["unknown"], figures["unknown_applied"], rc["refused"], rc["answered_503"],
           rc["answered_429"]))
    log("  payload kinds: %s" % ", ".join("%s %d" % (k[5:], v) for k, v in sorted(rc.items()) if k.startswith("kind_")))
    no_answer = ", ".join("%s %d" % (k[18:], v) for k, v in sorted(rc.items()) if k.startswith("invalid_no_answer_"))
    if rc["invalid_no_answer"]:
        no_answer += "; %d of them refused: the primary was down" % rc["invalid_conn_refused"]
    log("  invalid payloads: %d sent, %d refused as the contract says, %d answered 503, %d without an answer%s"
        % (rc["invalid_sent"], rc["invalid_refused"], rc["invalid_503"], rc["invalid_no_answer"],
           " (%s)" % no_answer if no_answer else ""))
    log("  applied at the secondary: %d (%d acknowledged and checked byte for byte, %d unknown)"
        % (figures["applied"], figures["acked_applied"], figures["unknown_applied"]))
    log("  faults: primary kill -9 x%d (%d mid-publish), secondary kill -9 x%d (%d %s), SIGTERM+restart "
        "primary x%d, secondary x%d, storage windows primary x%d, secondary x%d, secondary paused (SIGSTOP) x%d"
        % (f["kill_primary"], f["kill_primary_mid_publish"], f["kill_secondary"], f["kill_secondary_mid_send"],
           "with a consumer lag" if c.jetstream else "mid-send",
           f["term_primary"],
           f["term_secondary"], f["storage_primary"], f["storage_secondary"], f["pause_secondary"]))
    if c.jetstream:
        log("  NATS: kill -9 of a node x%d (%d of them the stream's leader), each restarted after 0.5-6 s, "
            "one node down at most" % (f["kill_nats"], f["kill_nats_leader"]))
    else:
        log("  secondary faults: --fault-rate %s --drop-rate %s --delay-ms %d"
            % (c.fault_rate, c.drop_rate, c.delay_ms))
    warnings = []
    for srv in (c.primary, c.secondary):
        counts, bad, tolerated = log_events(srv.log_path, tolerated_gap if c.jetstream and srv is c.secondary
                                            else None)
        log("  %s log events: %s" % (srv.name, ", ".join("%s %d" % kv for kv in sorted(counts.items())) or "none"))
        if tolerated["blocked"]:
            log("  the %s logged %d \"blocked\" event(s) for a gap (a stream's message delivered before an "
                "earlier one: nak'd, delivered again later; the order holds, checked below)"
                % (srv.name, tolerated["blocked"]))
        for ev, line in bad.items():
            c.problems.append("the %s logged %d \"%s\" event(s)%s, e.g. %s"
                              % (srv.name, counts[ev] - tolerated[ev], ev,
                                 " (not for a gap)" if tolerated[ev] else "", line))
        if c.jetstream and srv is c.secondary and counts["consumer_restart"]:
            warnings.append("the secondary restarted its consumer %d time(s) (a gap that lasted 30 s: the stream "
                            "replayed from its start), though no store here is ever behind" % counts["consumer_restart"])
        if srv is c.primary and rc["answered_503"] and not (counts["publish_failed"] or counts["storage_failed"]):
            warnings.append("the primary answered %d publishes 503 but logged no publish_failed/storage_failed "
                            "event" % rc["answered_503"])
        if srv is c.secondary and f["storage_secondary"] and not counts["storage_failed"]:
            warnings.append("the %s had %d storage failure windows but logged no storage_failed event"
                            % (srv.name, f["storage_" + srv.name]))
    for w in warnings:
        log("  warning: " + w)
    if not c.problems and rc["acked"] == 0:
        c.problems.append("nothing was acknowledged: the campaign tested nothing")
    if c.problems:
        log("")
        log("CHAOS FAILED (seed %d): %d problem(s)" % (c.seed, len(c.problems)))
        for p in c.problems[:60]:
            log("  - " + p)
        if len(c.problems) > 60:
            log("  ... and %d more" % (len(c.problems) - 60))
        log("--- primary log (last lines)")
        log(tail(c.primary.log_path))
        log("--- secondary log (last lines)")
        log(tail(c.secondary.log_path))
        log("work folder kept: %s (logs, dump, acks.jsonl, unknown.jsonl%s)"
            % (c.work, ", nats/n*.log" if c.jetstream else ""))
        log("replay: %s" % c.replay())
        return 1
    log("CHAOS PASSED (seed %d)" % c.seed)
    if args.keep:
        log("work folder kept: %s" % c.work)
    else:
        shutil.rmtree(c.work, ignore_errors=True)
    return 0


# --------------------------------------------------------------------------
# The checker's own test
# --------------------------------------------------------------------------

def self_test():
    """verify() on made-up dumps: a right one passes, each kind of wrong one fails."""
    rng = random.Random(7)
    limits = Limits(huge=0, too_big=0)
    acks, lines, unknown = [], [], []
    seqs = collections.Counter()
    for n in range(1, 400):
        s = "s%d" % (n % 3 + 1)
        kind, body = make_payload(rng, "t-%d" % n, n, limits)
        seqs[s] += 1
        mid = "id-%s-%d" % (s, seqs[s])
        lines.append((s, seqs[s], mid, body))
        if n % 37 == 0:
            unknown.append(dict(stream=s, text=Text(body), pub="t-%d" % n, error="test", t=0))
        else:
            acks.append(dict(stream=s, seq=seqs[s], id=mid, text=Text(body), pub="t-%d" % n, t=0))
    # an unknown publish that was never applied
    unknown.append(dict(stream="s1", text=Text(b'{"never":1}'), pub="t-never", error="test", t=0))
    status = {"pending": 0, "acked_seq": dict(seqs), "next_seq": {}, "dead_letter": 0, "blocked": {}}

    def render(ls):
        out = []
        for s, q, i, b in ls:
            out.append(b'{"stream":"%s","seq":%d,"id":"%s","payload":%s}\n'
                       % (s.encode(), q, i.encode(), b.strip(WS)))
        return b"".join(out)

    def expect(name, dump, ok, acks_=None, unknown_=None, status_=None):
        problems, _ = verify(dump, acks if acks_ is None else acks_, unknown if unknown_ is None else unknown_,
                             status if status_ is None else status_)
        good = (not problems) == ok
        print("  %-48s %s%s" % (name, "ok" if good else "WRONG", "" if ok or not problems else ": " + problems[0][:110]))
        return good

    results = []
    results.append(expect("a right dump passes", render(lines), True))
    untrimmed = b"".join(b'{"stream":"%s","seq":%d,"id":"%s","payload":%s}\n' % (s.encode(), q, i.encode(), b)
                         for s, q, i, b in lines)
    results.append(expect("payload whitespace kept (not trimmed) passes", untrimmed, True))
    results.append(expect("an acknowledged message missing fails", render(lines[:-1]), False))
    sw = list(lines)
    a, b = next(k for k, l in enumerate(sw) if l[0] == "s1"), None
    b = next(k for k in range(a + 1, len(sw)) if sw[k][0] == "s1")
    sw[a], sw[b] = sw[b], sw[a]
    results.append(expect("two messages applied out of order fails", render(sw), False))
    dup = list(lines) + [lines[5]]
    results.append(expect("a message applied twice fails", render(dup), False))
    dup2 = list(lines)
    s0 = lines[0][0]
    dup2.append((s0, seqs[s0] + 1, "id-new", lines[0][3]))
    results.append(expect("an acknowledged payload at a second seq fails", render(dup2),
                          False, status_=dict(status, acked_seq=dict(seqs, **{s0: seqs[s0] + 1}))))
    resorted = [(s, q, i, json.dumps(json.loads(b), sort_keys=True).encode()) if k == 10 else (s, q, i, b)
                for k, (s, q, i, b) in enumerate(lines)]
    results.append(expect("a re-serialised payload (sorted keys) fails", render(resorted), False))
    bignum = [l for l in lines if b'"big":12345678901234567890123' in l[3]][0]
    reser = [(s, q, i, b.replace(b"12345678901234567890123", b"1.2345678901234568e+22")) if (s, q) == bignum[:2]
             else (s, q, i, b) for s, q, i, b in lines]
    results.append(expect("a big integer turned into a double fails", render(reser), False))
    wrongid = [(s, q, "other" if k == 3 else i, b) for k, (s, q, i, b) in enumerate(lines)]
    results.append(expect("a different id at an acknowledged seq fails", render(wrongid), False))
    gap = [l for l in lines if not (l[0] == "s2" and l[1] == 4)]
    results.append(expect("a gap in a stream fails", render(gap), False))
    extra = list(lines) + [("s1", seqs["s1"] + 1, "id-x", b'{"never":1}'), ("s1", seqs["s1"] + 2, "id-y", b'{"x":1}')]
    results.append(expect("a message never published fails", render(extra), False,
                          status_=dict(status, acked_seq=dict(seqs, s1=seqs["s1"] + 2))))
    ok_unknown = list(lines) + [("s1", seqs["s1"] + 1, "id-x", b'{"never":1}')]
    results.append(expect("an unknown publish applied once passes", render(ok_unknown), True,
                          status_=dict(status, acked_seq=dict(seqs, s1=seqs["s1"] + 1))))
    twice_unknown = list(ok_unknown) + [("s1", seqs["s1"] + 2, "id-z", b'{"never":1}')]
    results.append(expect("an unknown publish applied twice fails", render(twice_unknown), False,
                          status_=dict(status, acked_seq=dict(seqs, s1=seqs["s1"] + 2))))
    tomb = [(s, q, i, b'{"steadfast_dead_letter":{"reason":"x"}}') if k == 7 else (s, q, i, b)
            for k, (s, q, i, b) in enumerate(lines)]
    results.append(expect("a dead-letter tombstone fails", render(tomb), False))
    results.append(expect("status pending 3 fails", render(lines), False, status_=dict(status, pending=3)))
    results.append(expect("status dead_letter 1 fails", render(lines), False, status_=dict(status, dead_letter=1)))
    results.append(expect("status blocked fails", render(lines), False, status_=dict(status, blocked={"s1": "conflict"})))
    notlast = render(lines[:1]).replace(b'{"stream"', b'{"payload":1,"stream"', 1) + render(lines[1:])
    results.append(expect("payload not the last key fails", notlast, False))
    results.append(expect("a truncated dump line fails", render(lines)[:-30], False))
    twoack = acks + [dict(acks[0], id="again")]
    results.append(expect("the same seq acknowledged twice fails", render(lines), False, acks_=twoack))
    big = next(l for l in lines if len(l[3]) > 3 * Text.WHOLE)
    k = big[3].rindex(b"]") - 1  # the last digit of "nums", near the end of the payload
    changed = big[3][:k] + (b"1" if big[3][k:k + 1] != b"1" else b"2") + big[3][k + 1:]
    lastbyte = [(s, q, i, changed) if (s, q) == big[:2] else (s, q, i, b) for s, q, i, b in lines]
    results.append(expect("a big payload changed near its end fails", render(lastbyte), False))
    nl_body = b'{"pub":"t-nl",\n "a":\t[1,\r\n 2]}'
    nl = list(lines) + [("s1", seqs["s1"] + 1, "id-nl", nl_body)]
    results.append(expect("a payload with newlines inside passes", render(nl), True,
                          acks_=acks + [dict(stream="s1", seq=seqs["s1"] + 1, id="id-nl", text=Text(nl_body),
                                             pub="t-nl", t=0)],
                          status_=dict(status, acked_seq=dict(seqs, s1=seqs["s1"] + 1))))
    broken = render(lines[:50]) + b'{"stream":"s1","seq":\n' + render(lines[50:])
    results.append(expect("a broken line in the middle fails", broken, False))
    print("self-test: %d of %d right" % (sum(results), len(results)))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
