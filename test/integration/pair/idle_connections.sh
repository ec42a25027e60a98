#!/usr/bin/env bash
# Idle connections cannot lock out health checks (issue 28), on both daemons:
# 1. --max-connections 100 filled by 100 connections that never send a byte: /health, /ready and /metrics are
#    answered within a second (the reserve), while /publish on a reserve connection is 503 naming the limit;
# 2. a flood of 1,000 more idle connections (the reserve full): /health still answered within a second (a new
#    connection replaces the reserve's oldest silent one);
# 3. a connection that sends nothing is closed after --header-timeout (here 1s), one that dribbles its header
#    too; then the cap is free again and publishing works.
source "$(dirname "$0")/lib.sh"
# hold PORT N SECONDS CHECKS...: opens N connections that send nothing, keeps them SECONDS, and meanwhile runs
# each check "PATH STATUS" on a new connection, each within 1 s; prints how many of the N were closed by the
# server by the end.
hold() {
  python3 - "$@" <<'PY'
import socket, sys, time
port, n, keep_for = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
held = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port)); held.append(s)
time.sleep(0.3)
for check in sys.argv[4:]:
    method, path, want = check.split()
    t0 = time.monotonic()
    c = socket.create_connection(("127.0.0.1", port)); c.settimeout(1.0)
    body = b'{"x":1}' if method == "POST" else b""
    c.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body)
    try:
        got = c.recv(4096)
    except socket.timeout:
        got = b""
    took = time.monotonic() - t0
    status = got.split(b" ")[1].decode() if got.startswith(b"HTTP/1.1 ") else "none"
    assert status == want and took < 1.0, f"{method} {path} with {n} idle connections: {status} in {took:.2f}s (want {want} within 1s): {got[:300]!r}"
    if want == "503":
        assert b"connection limit" in got, f"the 503 does not name the limit: {got[:300]!r}"
time.sleep(max(0.0, keep_for - 0.3))
closed = 0
for s in held:
    s.setblocking(False)
    try:
        closed += s.recv(1) == b""
    except BlockingIOError:
        pass
    except OSError:
        closed += 1
print(closed)
PY
}
checks=("GET /health 200" "GET /ready 200" "GET /metrics 200" "GET /health 200")
start_secondary --max-connections 100 --header-timeout 1s
start_primary --max-connections 100 --header-timeout 1s
for port in "$PPORT" "$SPORT"; do
  # 1. and 3.: the held connections are cut after about 1 s, not 30.
  closed=$(hold "$port" 100 2.5 "${checks[@]}") || fail "health checks on $port with 100 idle connections"
  [ "$closed" = 100 ] || fail "$closed of 100 silent connections closed after 2.5 s with --header-timeout 1s (port $port)"
done
closed=$(hold "$PPORT" 100 0 "POST /publish?stream=r 503") || fail "a publish on a reserve connection"
# 2. The flood: 1,100 idle connections, then health checks.
closed=$(hold "$PPORT" 1100 0 "${checks[@]}") || fail "health checks on the primary during a flood of 1,100 idle connections"
closed=$(hold "$SPORT" 1100 0 "${checks[@]}") || fail "health checks on the secondary during a flood of 1,100 idle connections"
# 3. A header dribbled a byte at a time is cut at the header timeout too.
python3 - "$PPORT" <<'PY' || fail "a dribbled header was not cut at --header-timeout"
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
t0 = time.monotonic()
try:
    for b in b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
        s.sendall(bytes([b])); time.sleep(0.1)
    sys.exit(1)
except (BrokenPipeError, ConnectionResetError):
    pass
took = time.monotonic() - t0
assert took < 3, f"cut after {took:.1f}s"
PY
rejected=$(metric "$PPORT" steadfast_primary_connections_rejected_total)
[ "$rejected" -ge 900 ] || fail "steadfast_primary_connections_rejected_total is $rejected after the flood"
sleep 1.2  # the flood's leftovers time out
publish 10 r
wait_drained 30
verify r
echo "PASS"
