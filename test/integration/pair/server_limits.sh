#!/usr/bin/env bash
# (v2) The servers' own limits: --max-streams on the primary (429 for a new stream while that many have pending
# messages), --max-connections on both (connections past the limit are closed at once and counted); and a
# client that sends Expect: 100-continue is told to go on before it sends its body (curl waits a second for it);
# one that sends a body over the limit whole before reading gets the 413.
source "$(dirname "$0")/lib.sh"

# 1. --max-streams 2, the secondary down: a and b pending, c refused, a still taken.
start_primary --max-streams 2
publish 3 a
publish 3 b
code=$(curl -s -m 10 -o "$WORK/body" -w '%{http_code}' -X POST "${CT[@]}" -d '{"c":1}' "http://127.0.0.1:$PPORT/publish?stream=c")
[ "$code" = 429 ] || fail "a third stream with --max-streams 2: expected 429, got $code $(cat "$WORK/body")"
json_is "$(cat "$WORK/body")" '"too many streams" in j["error"] and "2" in j["error"]' \
  || fail "the 429 answer does not say why: $(cat "$WORK/body")"
publish_one a '{"still":"accepted"}'
json_is "$(status_json)" 'j["pending"] == 7 and "c" not in j["next_seq"]' || fail "the refused publish left a trace: $(status_json)"
# Once a and b are delivered, c is welcome.
start_secondary
wait_drained 30
publish 2 c
wait_drained 30
for s in a b c; do verify "$s"; done

# 2. --max-connections: hold the limit's worth of idle connections, then one more is closed at once.
# held PORT N: opens N connections and keeps them; then one more, which must be closed within 1 s;
# then everything is closed again and the server must serve as before.
held() {
  python3 - "$1" "$2" <<'PY'
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
keep = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
time.sleep(0.3)  # let the server take them all
extra = socket.create_connection(("127.0.0.1", port))
extra.settimeout(1.0)
try:
    data = extra.recv(100)
    closed = data == b""
except ConnectionResetError:
    closed = True
except socket.timeout:
    closed = False
assert closed, f"connection {n + 1} was not closed within 1 s with --max-connections {n}"
# the held ones still work
keep[0].sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
keep[0].settimeout(5)
assert keep[0].recv(100).startswith(b"HTTP/1.1 200"), "a held connection stopped working"
print(f"connection {n + 1} closed at once; the {n} held ones still served")
PY
}
stop "$PPID_"
start_primary --max-connections 4 --reserved-connections 0  # the reserve: idle_connections.sh
held "$PPORT" 4 || fail "the primary's --max-connections"
rejected=$(metric "$PPORT" steadfast_primary_connections_rejected_total)
[ "$rejected" -ge 1 ] || fail "steadfast_primary_connections_rejected_total is $rejected"
publish 2 d
stop "$SPID"
start_secondary --max-connections 4 --reserved-connections 0
held "$SPORT" 4 || fail "the secondary's --max-connections"
wait_drained 30
verify d

# 3. --max-streams against publishes to new streams at the same moment: 40
# publishers, each to a stream of its own, released together with the
# secondary down; exactly the cap's worth are accepted (a check that only
# counted streams already pending let all of them through until the first
# commits landed).
stop "$SPID"
stop "$PPID_"
start_primary --max-streams 3
python3 - "$PPORT" "$WORK/concurrent" <<'PY'
import http.client, sys, threading
port, out = int(sys.argv[1]), sys.argv[2]
n = 40
gate = threading.Barrier(n, timeout=20)
codes = [None] * n
def go(i):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    c.connect()
    gate.wait()
    c.request("POST", f"/publish?stream=new{i}", body=b'{"i":%d}' % i, headers={"Content-Type": "application/json"})
    codes[i] = c.getresponse().status
threads = [threading.Thread(target=go, args=(i,)) for i in range(n)]
for t in threads: t.start()
for t in threads: t.join()
with open(out, "w") as f:
    for i, code in enumerate(codes):
        f.write(f"new{i} {code}\n")
PY
accepted=$(awk '$2 == 202' "$WORK/concurrent" | wc -l)
refused_n=$(awk '$2 == 429' "$WORK/concurrent" | wc -l)
[ "$accepted" = 3 ] && [ "$refused_n" = 37 ] \
  || fail "40 new streams at once with --max-streams 3: $accepted accepted, $refused_n refused (want 3 and 37): $(tr '\n' ' ' <"$WORK/concurrent")"
json_is "$(status_json)" 'len([s for s in j["next_seq"] if s.startswith("new")]) == 3 and j["pending"] == 3' \
  || fail "the streams stored are not the 3 accepted: $(status_json)"
start_secondary
wait_drained 30
# Once delivered, the admitted streams hold no place: three more new ones are welcome.
for s in later1 later2 later3; do publish 1 "$s"; done
wait_drained 30
for s in later1 later2 later3; do verify "$s"; done

# 3. Expect: 100-continue, on both daemons: the interim 100 comes after the header and before the body is sent
#    (within a second), then the request's own answer; HTTP/1.0 (which has no interim answers) gets none.
expect_continue() {
  python3 - "$1" "$2" "$3" <<'PY'
import socket, sys
port, path, want = int(sys.argv[1]), sys.argv[2], sys.argv[3]
body = b'{"expect":"continue"}'
for version in ("1.1", "1.0"):
    c = socket.create_connection(("127.0.0.1", port)); c.settimeout(1.0)
    c.sendall(f"POST {path} HTTP/{version}\r\nHost: x\r\nContent-Type: application/json\r\n"
              f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\n\r\n".encode())
    try:
        got = c.recv(4096)
    except socket.timeout:
        got = b""
    if version == "1.1":
        assert got == b"HTTP/1.1 100 Continue\r\n\r\n", f"no 100 Continue within 1 s after the header: {got!r}"
    else:
        assert got == b"", f"an HTTP/1.0 request got an interim answer: {got!r}"
    c.settimeout(10.0)
    c.sendall(body)
    final = b""
    while b"\r\n" not in final:
        more = c.recv(4096)
        if not more:
            break
        final += more
    status = final.split(b" ")[1].decode() if final.startswith(b"HTTP/1.") else "none"
    assert status == want, f"HTTP/{version} with Expect: 100-continue: answered {final[:200]!r}, want {want}"
    c.close()
PY
}
expect_continue "$PPORT" "/publish?stream=expect" 202 || fail "Expect: 100-continue on the primary's /publish"
# No 100 without the header, nor for a body the server refuses by its Content-Length (413 at once).
python3 - "$PPORT" <<'PY' || fail "100 Continue sent where it must not be"
import socket, sys
port = int(sys.argv[1])
body = b'{"no":"expect"}'
c = socket.create_connection(("127.0.0.1", port)); c.settimeout(10)
c.sendall(f"POST /publish?stream=expect HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
got = c.recv(4096)
assert got.startswith(b"HTTP/1.1 202"), f"without Expect the first answer is not the final one: {got[:200]!r}"
c = socket.create_connection(("127.0.0.1", port)); c.settimeout(10)
c.sendall(b"POST /publish?stream=expect HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
          b"Content-Length: 50000000\r\nExpect: 100-continue\r\n\r\n")
got = c.recv(4096)
assert got.startswith(b"HTTP/1.1 413"), f"a body over the limit with Expect: {got[:200]!r}"
# A path that does not exist, or a method it does not take: the final answer instead of a 100.
for line, want in ((b"POST /nope", b"HTTP/1.1 404"), (b"PUT /publish", b"HTTP/1.1 405")):
    c = socket.create_connection(("127.0.0.1", port)); c.settimeout(10)
    c.sendall(line + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 15\r\n"
              b"Expect: 100-continue\r\n\r\n")
    got = c.recv(4096)
    assert got.startswith(want), f"{line!r} with Expect: {got[:200]!r}"
PY
# The secondary's own POST (an envelope it refuses: the answer is the point, after the 100).
expect_continue "$SPORT" "/api/messages" 400 || fail "Expect: 100-continue on the secondary"
# 4. A client that writes its whole body before it reads (Python's http.client does) gets the 413 of a
#    body over the limit, on both daemons, not a broken pipe: the server reads the rest away first.
python3 - "$PPORT" "$SPORT" <<'PY' || fail "a body over the limit sent whole: not answered 413"
import http.client, sys
body = b"x" * (20 << 20)
for port, path in ((int(sys.argv[1]), "/publish?stream=big"), (int(sys.argv[2]), "/api/messages")):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("POST", path, body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        text = r.read()
    except OSError as e:
        sys.exit(f"port {port} {path}: {e!r} instead of an answer")
    assert r.status == 413 and b"request body over" in text, f"port {port} {path}: {r.status} {text[:200]!r}"
PY
wait_drained 30
n=$(dump | grep -c '"stream":"expect".*"payload":{"expect":"continue"}}$') || true
[ "$n" = 2 ] || fail "the two publishes after 100 Continue: $n delivered, want 2"
[ "$(dump | grep -c '"stream":"expect"')" = 3 ] || fail "stream expect: not the three publishes accepted"
echo "server limits: as documented"
