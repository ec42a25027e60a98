#!/usr/bin/env python3
"""The JetStream failover rounds of run-jetstream.sh (issue 30).

A primary (default flags) publishes to a 3-node cluster while a publisher
posts to it; each round kills the stream's leader node (kill -9, or SIGTERM
for the graceful round) and prints:
  - when the cluster announced the new leader (its LEADER_ELECTED advisory,
    seen by a watcher connected to every node: the cluster's own cost);
  - when the primary's next publish was acknowledged (its delivered counter);
  - their difference: what the primary adds (goal: <= 1.0 s).
Some rounds first move the leader (a stepdown request) onto the node the
primary is connected to, so that the kill also takes the primary's
connection; the others move it away.

  js_failover.py CLUSTER_DIR STREAM PRIMARY_URL CLUSTER_SH [KILLS] [CONNECTED]

Prints one line a round, then a summary; exit status 0 always (a benchmark
reports, it does not judge: the summary says whether the goals were met).
"""
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time


def ports(cluster):
    out = {}
    for line in open(os.path.join(cluster, "ports")):
        k, _, v = line.strip().partition("=")
        out[k] = int(v)
    return out


class Nats:
    """The smallest NATS client that will do: one socket, the text protocol."""

    def __init__(self, port, timeout=2.0):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        self.readline()  # INFO
        self.s.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,'
                       b'"protocol":1,"name":"js_failover"}\r\nPING\r\n')
        while self.readline() != b"PONG":
            pass

    def readline(self):
        while b"\r\n" not in self.buf:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def readn(self, n):
        while len(self.buf) < n + 2:
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def next_message(self):
        """(subject, payload) of the next MSG/HMSG; answers PINGs."""
        while True:
            line = self.readline()
            if line == b"PING":
                self.s.sendall(b"PONG\r\n")
                continue
            parts = line.split()
            if not parts:
                continue
            if parts[0] == b"MSG":
                return parts[1].decode(), self.readn(int(parts[-1]))
            if parts[0] == b"HMSG":
                data = self.readn(int(parts[-1]))
                return parts[1].decode(), data[int(parts[-2]):]

    def request(self, subject, payload=b"", timeout=2.0):
        inbox = "_INBOX.js_failover.%d" % random.getrandbits(48)
        self.s.sendall(b"SUB %s 99\r\nPUB %s %s %d\r\n%s\r\n" %
                       (inbox.encode(), subject.encode(), inbox.encode(), len(payload), payload))
        self.s.settimeout(timeout)
        _, data = self.next_message()
        return data


class Watch:
    """The stream's LEADER_ELECTED advisories, from every node (the first copy
    of each counts), with the wall time each arrived."""

    def __init__(self, cluster, stream):
        self.subject = "$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED." + stream
        self.seen, self.events, self.lock = set(), [], threading.Lock()
        p = ports(cluster)
        for i in range(1, p["N"] + 1):
            threading.Thread(target=self.run, args=(p["CLIENT_%d" % i],), daemon=True).start()

    def run(self, port):
        while True:
            try:
                c = Nats(port)
                c.s.sendall(b"SUB %s 1\r\n" % self.subject.encode())
                c.s.settimeout(None)
                while True:
                    _, data = c.next_message()
                    t = time.time()
                    try:
                        j = json.loads(data)
                    except ValueError:
                        continue
                    with self.lock:
                        if j.get("id") in self.seen:
                            continue
                        self.seen.add(j.get("id"))
                        self.events.append((t, j.get("leader", "")))
            except (OSError, ConnectionError):
                time.sleep(0.05)

    def first_after(self, t0):
        with self.lock:
            later = [e for e in self.events if e[0] > t0]
        return min(later) if later else None


class Primary:
    def __init__(self, url):
        host, _, port = url.split("//", 1)[1].partition(":")
        self.host, self.port = host, int(port)
        self.c = None

    def get(self, path):
        for _ in range(3):
            try:
                if self.c is None:
                    self.c = http.client.HTTPConnection(self.host, self.port, timeout=5)
                self.c.request("GET", path)
                return self.c.getresponse().read().decode()
            except (OSError, http.client.HTTPException):
                self.c = None
        raise RuntimeError("the primary does not answer " + path)

    def delivered(self):
        for line in self.get("/metrics").splitlines():
            if line.startswith("steadfast_primary_delivered_total "):
                return float(line.split()[1])
        return 0.0

    def connected_port(self):
        server = json.loads(self.get("/health")).get("jetstream", {}).get("server", "")
        return int(server.rsplit(":", 1)[1]) if ":" in server else 0


def main():
    cluster, stream, url, cluster_sh = sys.argv[1:5]
    kills = int(sys.argv[5]) if len(sys.argv) > 5 else 6
    connected_kills = int(sys.argv[6]) if len(sys.argv) > 6 else 3
    p = ports(cluster)
    n = p["N"]
    node_of_port = {p["CLIENT_%d" % i]: i for i in range(1, n + 1)}
    watch, prim = Watch(cluster, stream), Primary(url)

    def leader():
        r = subprocess.run(["bash", cluster_sh, "leader", cluster, stream], capture_output=True, text=True)
        return int(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() else 0

    def progressing(timeout=30.0):
        """Waits until the primary acknowledges again; False if it does not."""
        base, end = prim.delivered(), time.time() + timeout
        while time.time() < end:
            if prim.delivered() > base:
                return True
            time.sleep(0.02)
        return False

    def settle():
        end = time.time() + 60
        while time.time() < end and not leader():
            time.sleep(0.1)
        progressing()
        time.sleep(1.0)

    def place_leader(on_connected):
        """Steps the leader down until it is (or is not) on the primary's node."""
        for _ in range(12):
            ln, cn = leader(), node_of_port.get(prim.connected_port(), 0)
            if ln and cn and (ln == cn) == on_connected:
                return ln, cn
            t = time.time()
            survivor = next(i for i in range(1, n + 1) if i != ln) if ln else 1
            try:
                Nats(p["CLIENT_%d" % survivor]).request("$JS.API.STREAM.LEADER.STEPDOWN." + stream)
            except (OSError, ConnectionError):
                pass
            end = time.time() + 10
            while time.time() < end and not watch.first_after(t):
                time.sleep(0.05)
            settle()
        return leader(), node_of_port.get(prim.connected_port(), 0)

    def measure(node, signal):
        pid = open(os.path.join(cluster, "n%d.pid" % node)).read().strip()
        t0 = time.time()
        if subprocess.run(["kill", "-" + signal, pid]).returncode != 0:
            sys.exit("js_failover.py: could not kill node %d (pid %s)" % (node, pid))
        time.sleep(0.05)  # an ack in flight at the kill is in by now
        base = prim.delivered()
        while prim.delivered() <= base:
            if time.time() - t0 > 120:
                return t0, None, watch.first_after(t0)
            time.sleep(0.002)
        return t0, time.time(), watch.first_after(t0)

    print("per round: the node killed (the stream's leader), whether the primary was connected to it, the cluster's "
          "new leader (its advisory), the primary's next acknowledged publish, and what the primary adds (goal: "
          "<= 1000 ms after the new leader)", flush=True)
    settle()
    diffs, connected_diffs = [], []
    for r in range(1, kills + 1):
        # The primary's own node in the last `connected_kills` rounds but
        # alternating where there is room: 6 and 3 give no, yes, no, yes, no, yes.
        on_connected = (kills - r) % 2 == 0 if kills - r + 1 <= 2 * connected_kills else False
        ln, cn = place_leader(on_connected)
        t0, t1, adv = measure(ln, "9")
        if t1 is None or adv is None:
            # No acknowledgement, or no new leader announced (a follower was
            # killed after all, or the watchers missed it): not a measurement.
            print("round %d: kill -9 of node %d: %s" % (r, ln, "no acknowledged publish within 120 s" if t1 is None
                                                        else "no new leader announced: not measured"), flush=True)
            diffs.append(None)
        else:
            d = (t1 - adv[0]) * 1000
            diffs.append(d)
            if ln == cn:
                connected_diffs.append(d)
            print("round %d: kill -9 of node %d (the leader; the primary %s connected to it): new leader %s after "
                  "%d ms, next publish acknowledged after %d ms: the primary adds %d ms" %
                  (r, ln, "was" if ln == cn else "was not", adv[1], (adv[0] - t0) * 1000, (t1 - t0) * 1000, d),
                  flush=True)
        subprocess.run(["bash", cluster_sh, "restart", cluster, str(ln)], check=True, capture_output=True)
        time.sleep(5)  # the restarted node catches up
        settle()
    ln, cn = place_leader(True)  # the harder case: the primary's connection goes too
    t0, t1, adv = measure(ln, "TERM")
    term = (t1 - t0) * 1000 if t1 else None
    print("graceful: SIGTERM of node %d (the leader; the primary %s connected to it): new leader after %s ms, next "
          "publish acknowledged after %s ms (goal: <= 1500 ms)" %
          (ln, "was" if ln == cn else "was not", "%d" % ((adv[0] - t0) * 1000) if adv else "?",
           "%d" % term if term is not None else "(none within 120 s)"), flush=True)
    subprocess.run(["bash", cluster_sh, "restart", cluster, str(ln)], capture_output=True)
    measured = [d for d in diffs if d is not None]
    ok = len(measured) == len(diffs) and measured and max(measured) <= 1000
    print("summary: %d kills (%d of the primary's node, %d measured): the primary added %s after the new leader "
          "(goal <= 1000 ms: %s); SIGTERM: %s (goal <= 1500 ms: %s)" %
          (len(diffs), len(connected_diffs), len(measured),
           "%d-%d ms" % (min(measured), max(measured)) if measured else "nothing measured", "met" if ok else "NOT met",
           "%d ms" % term if term is not None else "no ack", "met" if term is not None and term <= 1500 else "NOT met"),
          flush=True)


if __name__ == "__main__":
    main()
