# Helpers for the pair's integration tests: start, kill and check the real binaries.
# Each test runs in its own scratch folder with its own ports; everything it starts is killed on exit.
#
# Acknowledgements are recorded per stream in $WORK/acks.STREAM, one line per 202 answer:
#   <the 202 answer's JSON text> TAB <the exact body sent, as a JSON string>
# so that `verify` can compare what the secondary applied with what was published, byte for byte.
set -euo pipefail
BIN="${BIN:?set BIN to the folder with steadfast-primary and steadfast-secondary}"
WORK="$(mktemp -d /tmp/steadfast-pair.XXXXXX)"
PAIR_LIB_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The interpreter itself, once: a version manager's python3 shim can cost 0.4 s a call.
PYTHON="$(python3 -c 'import sys; print(sys.executable)')"
python3() { "$PYTHON" "$@"; }
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && { kill -9 "$p"; wait "$p"; } 2>/dev/null || true; done
  # What a scenario mounted under WORK (mountns.sh), innermost first.
  local m
  for m in $(awk -v w="$WORK/" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r); do umount -l "$m" 2>/dev/null || true; done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# fail MESSAGE: says why, with what the scenario's on_fail function prints
# if it has one, then the end of every process's log (primary.log,
# secondary.log, the JetStream tests' secondaryN.log, fake.log), the most
# recently written first (what failed), and exits 1. CI keeps only the head
# and the tail of a long output: a scenario with many logs loses its middle.
fail() { echo "FAIL: $*" >&2
         # A scenario's own last words first (its processes' state), if it has any.
         if declare -F on_fail >/dev/null; then on_fail >&2 || true; fi
         local f
         while IFS= read -r f; do
           [ -f "$f" ] || continue
           echo "--- $(basename "$f")" >&2; tail -20 "$f" >&2 || true
         done < <(ls -t "$WORK"/*.log 2>/dev/null)
         echo "FAIL: $*" >&2
         exit 1; }
# free_port: a free port, never handed to another test in the last 15
# minutes (test/ports.py says why).
free_port() { python3 "$(dirname "${BASH_SOURCE[0]}")/../../ports.py"; }
SPORT=$(free_port); PPORT=$(free_port)
SDATA="$WORK/sdata"; PDATA="$WORK/pdata"
# The primary's --secondary; tests that put a fake or a proxy in between change it.
SECONDARY_URL=""
# Set to the primary's /publish token when it runs with --token-file.
PUBLISH_TOKEN=""
# 1: the servers' stderr goes through a pipe, not straight into the log file. Needed while a test
# limits a server's file size (prlimit --fsize): its writes to a log file would fail too.
LOG_PIPE=0
CT=(-H 'Content-Type: application/json')

now_ms() { date +%s%3N; }
wait_http() {  # wait_http URL [seconds [PID]]: until URL answers 2xx; with PID, fails at once if PID exits
  local deadline=$((SECONDS + ${2:-10}))
  until curl -fs -o /dev/null "$1"; do
    [ $SECONDS -lt $deadline ] || fail "$1 did not answer"
    if [ -n "${3:-}" ] && exited "$3"; then
      local rc=0; wait "$3" 2>/dev/null || rc=$?
      fail "the server for $1 exited ($rc) before answering"
    fi
    sleep 0.05
  done
  # An answer from another process on that port (the server failed to bind
  # it and is exiting) is not this server's.
  if [ -n "${3:-}" ]; then
    sleep 0.1
    if exited "$3"; then
      local rc=0; wait "$3" 2>/dev/null || rc=$?
      fail "the server for $1 exited ($rc); something else answered on its port"
    fi
  fi
}
wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...: until COMMAND succeeds, or fail
  local deadline=$((SECONDS + $1)) limit=$1 what=$2; shift 2
  until "$@"; do
    [ $SECONDS -lt $deadline ] || fail "timed out after ${limit}s waiting for: $what"
    sleep 0.1
  done
}
# _launch LOGFILE COMMAND...: starts COMMAND in the background (its pid in LAUNCHED), logging to LOGFILE.
_launch() {
  local log=$1; shift
  if [ "$LOG_PIPE" = 1 ]; then
    "$@" > >(cat >>"$log") 2>&1 &
  else
    "$@" >>"$log" 2>&1 &
  fi
  LAUNCHED=$!; PIDS+=("$LAUNCHED")
}
start_secondary() {  # extra flags...  (listens on $SPORT, data in $SDATA)
  _launch "$WORK/secondary.log" "$BIN/steadfast-secondary" --listen "127.0.0.1:$SPORT" --data "$SDATA" "$@"
  SPID=$LAUNCHED
  wait_http "http://127.0.0.1:$SPORT/health" 10 "$SPID"
}
start_primary() {  # extra flags...  (listens on $PPORT, data in $PDATA, sends to $SECONDARY_URL or $SPORT)
  _launch "$WORK/primary.log" "$BIN/steadfast-primary" --secondary "${SECONDARY_URL:-http://127.0.0.1:$SPORT}" \
    --data "$PDATA" --listen "127.0.0.1:$PPORT" --max-backoff 500ms "$@"
  PPID_=$LAUNCHED
  wait_http "http://127.0.0.1:$PPORT/health" 10 "$PPID_"
}
# kill9 PID: kill -9, and reap it (so that bash does not report the kill)
kill9() { { kill -9 "$1"; wait "$1"; } 2>/dev/null || true; }
# exited PID: the process is gone (an unreaped child counts as gone)
exited() { ! kill -0 "$1" 2>/dev/null || [ "$(ps -o stat= -p "$1" 2>/dev/null | cut -c1)" = Z ]; }
# wait_exit PID SECONDS: waits for the process to end (fails the test after SECONDS); its exit code in EXIT_RC
wait_exit() {
  local deadline=$((SECONDS + $2))
  until exited "$1"; do
    [ $SECONDS -lt $deadline ] || fail "process $1 still running after $2s"
    sleep 0.05
  done
  EXIT_RC=0; wait "$1" 2>/dev/null || EXIT_RC=$?
}
# stop PID [seconds]: SIGTERM, then waits for the exit (fails after SECONDS, default 10); exit code in EXIT_RC
stop() {
  kill -TERM "$1" 2>/dev/null || true
  wait_exit "$1" "${2:-10}"
}

# post_publish STREAM BODY: one POST /publish with Content-Type (and the token when set); the answer's body in
# PUB_ANSWER, its status in PUB_CODE; succeeds only on 202. (No subshell of its own: publishing loops are
# dominated by forks on a busy machine.)
post_publish() {
  local out auth=()
  [ -z "$PUBLISH_TOKEN" ] || auth=(-H "Authorization: Bearer $PUBLISH_TOKEN")
  PUB_CODE=000
  out=$(curl -sS -m 30 -X POST "${auth[@]}" "${CT[@]}" --data-binary "$2" -w '\n%{http_code}' \
    "http://127.0.0.1:$PPORT/publish?stream=$1" 2>&1) || { PUB_ANSWER="curl failed: $out"; return 1; }
  PUB_CODE=${out##*$'\n'}; PUB_ANSWER=${out%$'\n'*}
  [ "$PUB_CODE" = 202 ]
}
# record_ack FILE ANSWER BODY: BODY is written as a JSON string (enough for the bodies these scripts build in
# bash: no newlines or other control characters but tabs)
record_ack() { local s=${3//\\/\\\\}; s=${s//\"/\\\"}; printf '%s\t"%s"\n' "$2" "$s" >>"$1"; }
# The publishers below run test/integration/pair/publish.py (one process, not a curl process a message), which
# records each acknowledgement in $WORK/acks.STREAM as record_ack does.
publish_py() { local out; out=$(python3 "$PAIR_LIB_DIR/publish.py" "$PPORT" "$PUBLISH_TOKEN" "$WORK" "$@" 2>&1) || fail "$out"; }
publish() {  # publish N [stream]: N messages {"n":i}, one request each; records the acknowledgements
  publish_py counted "$1" "${2:-default}"
}
publish_one() {  # publish_one STREAM BODY: one message with this exact body (one line, no control characters but tabs)
  post_publish "$1" "$2" || fail "publish of ${2:0:80} on stream $1 was not acknowledged: $PUB_CODE ${PUB_ANSWER:0:300}"
  record_ack "$WORK/acks.$1" "$PUB_ANSWER" "$2"
}
publish_file() {  # publish_file STREAM FILE: one message whose body is FILE's bytes (any size or content)
  publish_py file "$2" "$1"
}
publish_parallel() {  # publish_parallel N [stream]: N messages {"k":K,"i":i} from 8 concurrent publishers; any failure fails the test
  publish_py parallel "$1" "${2:-default}"
}
# publish_streams N STREAM...: one concurrent publisher per argument (keep-alive), N messages each (a
# stream named twice gets two publishers), bodies that a re-serializing store would change (spaces, 1.50,
# a 23-digit integer, é raw and escaped).
publish_streams() {
  publish_py streams "$@"
}
# publish_sized N STREAM...: the same, with every fourth body over 6 KB and every third under an Idempotency-Key
publish_sized() {
  publish_py sized "$@"
}
acked_count() { [ -f "$WORK/acks.$1" ] && wc -l <"$WORK/acks.$1" || echo 0; }

# status_json: the primary's status (read-only, works while it runs); status_get PYEXPR: a field of it, `j` is
# the parsed object, e.g. status_get 'j["dead_letter"]'
status_json() { "$BIN/steadfast-primary" status --data "$PDATA"; }
status_get() {
  local s; s=$(status_json) || fail "steadfast-primary status failed"
  python3 -c 'import sys,json; j=json.loads(sys.argv[1]); v=eval(sys.argv[2]); print(json.dumps(v) if isinstance(v,(dict,list)) else v)' "$s" "$1" \
    || fail "status has no $1: $s"
}
pending() { status_get 'j["pending"]'; }
dead_letters() { status_get 'j.get("dead_letter")'; }
blocked() { status_get 'j.get("blocked", {})'; }
# metric PORT NAME: the sum of NAME over all its label sets (0 when absent); NAME may include labels
metric() {
  curl -fs "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 { s += $2 } END { printf "%.0f\n", s }'
}
# log_has FILE EVENT [KEY=VALUE...]: a JSON log line with this event (and these fields) exists, from byte LOG_FROM on
LOG_FROM=0
log_lines() {  # log_lines FROM FILE EVENT [KEY=VALUE...]: the log's JSON lines of EVENT from byte FROM on
  python3 - "$@" <<'PY'
import json, sys
start, path, event, want = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
want = dict(w.split("=", 1) for w in want)
with open(path, "rb") as f:
    f.seek(start)
    for line in f:
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if isinstance(j, dict) and j.get("event") == event and all(str(j.get(k)) == v for k, v in want.items()):
            print(json.dumps(j))
PY
}
log_has() { [ -n "$(log_lines "$LOG_FROM" "$@")" ]; }  # log_has FILE EVENT [KEY=VALUE...], from $LOG_FROM on
log_size() { [ -f "$1" ] && wc -c <"$1" || echo 0; }
wait_drained() {  # wait_drained [seconds]
  local deadline=$((SECONDS + ${1:-60}))
  until [ "$(curl -fs "http://127.0.0.1:$PPORT/metrics" | awk '/^steadfast_primary_outbox_depth /{print $2}')" = "0" ]; do
    [ $SECONDS -lt $deadline ] || fail "not drained after ${1:-60}s"
    sleep 0.2
  done
}
dump() { "$BIN/steadfast-secondary" dump --data "$SDATA"; }
# dump_lacks PATTERN: dump succeeds and no line matches PATTERN (a failing dump fails the test, rather than
# passing a check that nothing was applied)
dump_lacks() {
  local out
  out=$(dump) || fail "steadfast-secondary dump failed: $out"
  ! grep -q -- "$1" <<<"$out"
}

# verify [STREAM]: every acknowledged message of STREAM applied exactly once, in seq order, with the payload
# byte for byte as published (whitespace around the whole payload may be trimmed), as many applied as
# acknowledged (VERIFY_APPLIED=N expects N instead, e.g. when the test applied some directly), and no
# dead-letter tombstone among them.
verify() {
  local stream=${1:-default}
  dump >"$WORK/dump" || fail "steadfast-secondary dump failed"
  [ -f "$WORK/acks.$stream" ] || fail "verify: nothing was acknowledged on stream $stream"
  python3 - "$WORK/dump" "$WORK/acks.$stream" "$stream" "${VERIFY_APPLIED:-}" <<'PY' || fail "verification of stream $stream failed"
import json, sys
dump, acks, stream, want_applied = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
KEY = b'"payload":'
rows = []
for n, line in enumerate(open(dump, "rb"), 1):
    line = line.rstrip(b"\n")
    if not line.strip():
        continue
    # {"stream":..,"seq":..,"id":..,"payload":<raw>}: the payload is last, its text is the rest of the line but the final }
    k = line.find(KEY)
    assert k > 0 and line.endswith(b"}"), f"dump line {n} is not {{...,\"payload\":...}}: {line[:200]!r}"
    head = json.loads(line[:k] + b'"payload":null}')
    if head["stream"] == stream:
        rows.append((head["seq"], head["id"], line[k + len(KEY):-1]))
seqs = [r[0] for r in rows]
assert seqs == list(range(1, len(seqs) + 1)), f"stream {stream}: applied seqs not 1..n in order, exactly once: {seqs[:30]}..."
by_seq = {r[0]: r for r in rows}
acked = []
for n, line in enumerate(open(acks, "rb"), 1):
    if not line.strip():
        continue
    answer, body = line.rstrip(b"\n").split(b"\t", 1)
    a = json.loads(answer)
    acked.append((a, json.loads(body, strict=False).encode("utf-8")))
aseqs = [a["seq"] for a, _ in acked]
assert len(set(aseqs)) == len(aseqs), f"stream {stream}: a seq was acknowledged twice: {sorted(aseqs)[:30]}"
wrong_stream = [a for a, _ in acked if a.get("stream") != stream]
assert not wrong_stream, f"acknowledged on another stream: {wrong_stream[:3]}"
missing = [a for a, _ in acked if a["seq"] not in by_seq]
assert not missing, f"stream {stream}: {len(missing)} acknowledged messages never applied, e.g. {missing[:3]}"
wrong_id = [(a, by_seq[a["seq"]][1]) for a, _ in acked if by_seq[a["seq"]][1] != a["id"]]
assert not wrong_id, f"stream {stream}: applied ids do not match the acknowledged ones: {wrong_id[:3]}"
# dump prints a line break between a payload's tokens as a space (one message a line); nothing else may differ.
def as_dumped(b):
    return b.replace(b"\r", b" ").replace(b"\n", b" ")
changed = [(a["seq"], body, by_seq[a["seq"]][2]) for a, body in acked
           if by_seq[a["seq"]][2] not in (as_dumped(body), as_dumped(body.strip(b" \t\r\n")))]
assert not changed, "stream %s: %d payloads not byte-identical, e.g. seq %d: sent %r, applied %r" % (
    stream, len(changed), changed[0][0], changed[0][1][:200], changed[0][2][:200])
want = int(want_applied) if want_applied else len(acked)
assert len(rows) == want, f"stream {stream}: {len(rows)} applied, expected {want} ({len(acked)} acknowledged)"
for seq, id_, raw in rows:
    try:
        p = json.loads(raw)
    except ValueError:
        raise AssertionError(f"stream {stream} seq {seq}: the applied payload is not JSON: {raw[:200]!r}")
    assert not (isinstance(p, dict) and "steadfast_dead_letter" in p), \
        f"stream {stream} seq {seq}: a dead-letter tombstone was applied: {raw[:200]!r}"
print(f"verified: {len(acked)} acknowledged, {len(rows)} applied on stream {stream}, in order, exactly once, payloads byte-identical")
PY
}

# post_secondary BODY [EXPECTED_CODE]: POST /api/messages straight to the secondary (token: SECONDARY_TOKEN);
# prints the answer's body; with EXPECTED_CODE, fails the test on another status.
SECONDARY_TOKEN=""
post_secondary() {
  local out code auth=()
  [ -z "$SECONDARY_TOKEN" ] || auth=(-H "Authorization: Bearer $SECONDARY_TOKEN")
  out=$(curl -sS -m 30 -X POST "${auth[@]}" "${CT[@]}" --data-binary "$1" -w '\n%{http_code}' \
    "http://127.0.0.1:$SPORT/api/messages" 2>&1) || fail "POST to the secondary failed: $out"
  code=${out##*$'\n'}; out=${out%$'\n'*}
  if [ -n "${2:-}" ] && [ "$code" != "$2" ]; then fail "secondary: expected $2, got $code $out for ${1:0:300}"; fi
  echo "$out"
}
# json_is TEXT PYEXPR: the JSON TEXT, parsed as `j`, satisfies PYEXPR
json_is() { python3 -c 'import sys,json; j=json.loads(sys.argv[1]); sys.exit(0 if eval(sys.argv[2]) else 1)' "$1" "$2" 2>/dev/null; }

# A fake secondary or a proxy in front of the real one, on loopback (python3, no packages):
#   start_fake PORT apply              answers like a secondary that applies everything, except:
#                                      a request whose first message's stream is "cNNN" gets HTTP NNN,
#                                      one whose stream starts with "slow" is answered after 2.5 s,
#                                      a message whose payload is {"poison": NNN} makes its request get HTTP NNN
#   start_fake PORT fixed NNN          every POST gets HTTP NNN
#   start_fake PORT proxy TARGET_PORT [GAP_STREAM]
#                                      forwards to 127.0.0.1:TARGET_PORT; with GAP_STREAM, the first request
#                                      starting at seq 1 of that stream is forwarded, applied, and then
#                                      answered 409 gap with an expected seq 100 past the batch's end
# GET /health is 200 (forwarded by the proxy); GET /stats is the fake's JSON counters:
#   requests{stream} (by a request's first stream), applied[[stream,seq,id,tombstone]], max_inflight
#   (requests), max_inflight_stream{stream} (requests carrying the stream), max_streams_inflight (streams in
#   the requests in flight), max_streams_per_request, batches{stream}[[first,last,status]] (each stream's part
#   of a request), fake_gap{stream:last}
cat >"$WORK/fake.py" <<'PY'
import http.client, json, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
port, mode, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
lock = threading.Lock()
st = {"requests": {}, "applied": [], "max_inflight": 0, "max_inflight_stream": {}, "batches": {}, "fake_gap": {},
      "max_streams_inflight": 0, "max_streams_per_request": 0}
inflight = {}  # stream: requests in flight carrying it
requests_inflight = [0]
def log(*a):
    print(*a, flush=True)
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def answer(self, code, body, extra=()):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in extra: self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
    def forward(self, method, body=None):
        c = http.client.HTTPConnection("127.0.0.1", int(args[0]), timeout=60)
        h = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "authorization", "idempotency-key")}
        c.request(method, self.path, body=body, headers=h)
        r = c.getresponse()
        data = r.read()
        c.close()
        return r.status, data
    def do_GET(self):
        if self.path == "/stats":
            with lock: return self.answer(200, json.dumps(st))
        if mode == "proxy":
            try:
                code, data = self.forward("GET")
            except OSError as e:
                return self.answer(503, json.dumps({"status": "unreachable", "error": str(e)}))
            return self.answer(code, data)
        if self.path == "/health": return self.answer(200, '{"status":"ok"}')
        return self.answer(404, '{"error":"not found"}')
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            j = json.loads(body)
            msgs = j["messages"] if isinstance(j, dict) and "messages" in j else [j]
            stream = msgs[0]["stream"]
        except Exception:
            msgs, stream = [], ""
        parts = {}  # stream: [first seq, last seq], in the request's order
        for m in msgs:
            k = m.get("stream", "") if isinstance(m, dict) else ""
            parts.setdefault(k, [m.get("seq") if isinstance(m, dict) else None, None])[1] = m.get("seq") if isinstance(m, dict) else None
        with lock:
            st["requests"][stream] = st["requests"].get(stream, 0) + 1
            requests_inflight[0] += 1
            st["max_inflight"] = max(st["max_inflight"], requests_inflight[0])
            st["max_streams_per_request"] = max(st["max_streams_per_request"], len(parts))
            for k in parts or [stream]:
                inflight[k] = inflight.get(k, 0) + 1
                st["max_inflight_stream"][k] = max(st["max_inflight_stream"].get(k, 0), inflight[k])
            st["max_streams_inflight"] = max(st["max_streams_inflight"], sum(1 for v in inflight.values() if v > 0))
        try:
            code, data = self.handle_post(body, msgs, stream)
        finally:
            with lock:
                requests_inflight[0] -= 1
                for k in parts or [stream]: inflight[k] -= 1
        with lock:
            for k, (first, last) in parts.items():
                st["batches"].setdefault(k, []).append([first, last, code])
        log(mode, stream, [m.get("seq") for m in msgs][:3], "...", code, data[:120])
        self.answer(code, data, [("Retry-After", "1")] if code == 503 else ())
    def handle_post(self, body, msgs, stream):
        if mode == "fixed":
            return int(args[0]), json.dumps({"error": "fake answer " + args[0]}).encode()
        if mode == "proxy":
            try:
                code, data = self.forward("POST", body)
            except OSError as e:
                return 502, json.dumps({"error": "proxy: " + str(e)}).encode()
            if args[1:] and stream == args[1] and code == 200 and msgs and msgs[0].get("seq") == 1:
                with lock:
                    first = args[1] not in st["fake_gap"]
                    if first: st["fake_gap"][args[1]] = msgs[-1]["seq"]
                if first:
                    return 409, json.dumps({"error": "gap", "stream": stream, "expected": msgs[-1]["seq"] + 100}).encode()
            return code, data
        # apply
        if stream.startswith("slow"):
            time.sleep(2.5)
        if len(stream) == 4 and stream[0] == "c" and stream[1:].isdigit():
            return int(stream[1:]), json.dumps({"error": "fake answer for stream " + stream}).encode()
        for m in msgs:
            p = m.get("payload")
            if isinstance(p, dict) and "poison" in p:
                return int(p["poison"]), json.dumps({"error": "poisoned message", "id": m["id"]}).encode()
        if not msgs:
            return 400, b'{"error":"not an envelope"}'
        res = []
        with lock:
            for m in msgs:
                p = m.get("payload")
                st["applied"].append([m["stream"], m["seq"], m["id"], isinstance(p, dict) and "steadfast_dead_letter" in p])
                res.append({"seq": m["seq"], "status": "applied"})
        if "messages" in json.loads(body):
            return 200, json.dumps({"results": res}).encode()
        return 200, json.dumps({"status": "applied", "seq": msgs[0]["seq"]}).encode()
s = ThreadingHTTPServer(("127.0.0.1", port), H)
s.daemon_threads = True
s.serve_forever()
PY
start_fake() {  # start_fake PORT MODE [ARGS...]; sets FAKE_PID
  "$PYTHON" "$WORK/fake.py" "$@" >>"$WORK/fake.log" 2>&1 &   # not the python3 function: $! must be python itself
  FAKE_PID=$!; PIDS+=("$FAKE_PID")
  local deadline=$((SECONDS + 10))
  until curl -fs -o /dev/null "http://127.0.0.1:$1/stats"; do
    [ $SECONDS -lt $deadline ] || fail "the fake on port $1 did not start"
    sleep 0.05
  done
}
fake_stats() {  # fake_stats PORT PYEXPR: evaluates PYEXPR on the fake's /stats as `j`
  local s; s=$(curl -fs "http://127.0.0.1:$1/stats") || fail "no stats from the fake on port $1"
  python3 -c 'import sys,json; j=json.loads(sys.argv[1]); v=eval(sys.argv[2]); print(json.dumps(v) if isinstance(v,(dict,list)) else v)' "$s" "$2"
}
