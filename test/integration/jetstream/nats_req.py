#!/usr/bin/env python3
"""One NATS request from the command line, in the raw NATS protocol (Debian
ships no NATS client for Python or a CLI): prints the reply's payload.

    nats_req.py URLS SUBJECT [PAYLOAD]

URLS: nats://HOST:PORT[,...] (the first is used). Exits 1, saying why, when
nobody answers (no responders) or the server refuses. The tests use it for
JetStream's API: reading a stored message, deleting one (a hole in the log).
"""
import random
import socket
import sys

def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    url = sys.argv[1].split(",")[0]
    host, port = url.removeprefix("nats://").rsplit(":", 1)
    subject = sys.argv[2].encode()
    payload = sys.argv[3].encode() if len(sys.argv) > 3 else b""
    s = socket.create_connection((host, int(port)), timeout=10)
    f = s.makefile("rb")
    if not f.readline().startswith(b"INFO "):
        sys.exit("nats_req: not a NATS server at " + url)
    inbox = b"_INBOX.nats_req.%d" % random.randrange(1 << 40)
    s.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true}\r\n'
              b"SUB %s 1\r\nPUB %s %s %d\r\n%s\r\nPING\r\n" % (inbox, subject, inbox, len(payload), payload))
    while True:
        line = f.readline()
        if not line:
            sys.exit("nats_req: the server closed the connection")
        if line.startswith(b"PING"):
            s.sendall(b"PONG\r\n")
        elif line.startswith(b"-ERR"):
            sys.exit("nats_req: " + line.decode().strip())
        elif line.startswith(b"MSG "):
            n = int(line.split()[-1])
            sys.stdout.write(f.read(n + 2)[:n].decode())
            return
        elif line.startswith(b"HMSG "):
            parts = line.split()
            hlen, total = int(parts[-2]), int(parts[-1])
            data = f.read(total + 2)[:total]
            status = data[:hlen].split(b"\r\n")[0]
            if b" 503" in status:
                sys.exit("nats_req: no responders on " + subject.decode())
            sys.stdout.write(data[hlen:].decode())
            return

main()
