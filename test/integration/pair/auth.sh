#!/usr/bin/env bash
# A wrong token: 401; the primary reports the auth failure clearly and keeps
# the messages; once the token is fixed, SIGHUP or a restart delivers at once
# rather than after the ladder's step.
source "$(dirname "$0")/lib.sh"
echo "right-token" >"$WORK/secondary.token"
echo "wrong-token" >"$WORK/primary.token"
start_secondary --token-file "$WORK/secondary.token"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
  -d '{"id":"a","stream":"s","seq":1,"payload":1}' "http://127.0.0.1:$SPORT/api/messages")
[ "$code" = 401 ] || fail "no token: expected 401, got $code"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Authorization: Bearer wrong' -H 'Content-Type: application/json' \
  -d '{"id":"a","stream":"s","seq":1,"payload":1}' "http://127.0.0.1:$SPORT/api/messages")
[ "$code" = 401 ] || fail "wrong token: expected 401, got $code"
# A client that asks to be told to go on (Expect: 100-continue) without the
# token is refused at its header: it never sends its body. With the token, or
# for health, readiness and metrics (open to all), it is told to go on.
first_answer() {  # PORT METHOD PATH TOKEN: the first line the server sends after the header
  python3 - "$@" <<'PY'
import socket, sys
port, method, path, token = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
auth = f"Authorization: Bearer {token}\r\n" if token else ""
c = socket.create_connection(("127.0.0.1", port)); c.settimeout(5)
c.sendall(f"{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\n"
          f"Content-Length: 900000\r\nExpect: 100-continue\r\n\r\n".encode())
print(c.recv(4096).split(b"\r\n")[0].decode())
PY
}
refused_before=$(metric "$SPORT" 'steadfast_secondary_rejected_total{reason="unauthorized"}')
[ "$(first_answer "$SPORT" POST /api/messages '')" = "HTTP/1.1 401 Unauthorized" ] \
  || fail "Expect: 100-continue without a token: not refused at the header"
[ "$(first_answer "$SPORT" POST /api/messages wrong)" = "HTTP/1.1 401 Unauthorized" ] \
  || fail "Expect: 100-continue with a wrong token: not refused at the header"
[ "$(metric "$SPORT" 'steadfast_secondary_rejected_total{reason="unauthorized"}')" = $((${refused_before:-0} + 2)) ] \
  || fail "the requests refused at their header are not counted as unauthorized"
[ "$(first_answer "$SPORT" POST /api/messages right-token)" = "HTTP/1.1 100 Continue" ] \
  || fail "Expect: 100-continue with the token: not told to go on"
[ "$(first_answer "$SPORT" GET /health '')" = "HTTP/1.1 100 Continue" ] \
  || fail "Expect: 100-continue to /health (open to all): not told to go on"
# The ladder's second step is an hour: only "try again now" can deliver
# within the test after the configuration is fixed.
start_primary --token-file "$WORK/primary.token" --quick-retries 2 --ladder "1s 1h"
PUBLISH_TOKEN=wrong-token  # (v2) /publish wants the primary's own token
[ "$(first_answer "$PPORT" POST /publish?stream=s '')" = "HTTP/1.1 401 Unauthorized" ] \
  || fail "the primary told a publisher without its token to go on"
[ "$(first_answer "$PPORT" POST /publish?stream=s wrong-token)" = "HTTP/1.1 100 Continue" ] \
  || fail "the primary did not tell a publisher with its token to go on"
publish 10
wait_for 20 "the ladder's second step (1 h)" log_has "$WORK/primary.log" link_error ladder_step=2
grep -q 'check --token-file' "$WORK/primary.log" || fail "the report does not say what to check"
[ "$(metric "$PPORT" 'steadfast_primary_link_errors_total{reason="auth"}')" -gt 0 ] \
  || fail "steadfast_primary_link_errors_total{reason=\"auth\"} is not counting"
[ "$(pending)" = 10 ] || fail "messages were not kept: pending $(pending)"
grep -q '"event":"dead_letter"' "$WORK/primary.log" && fail "an auth failure must not dead-letter messages"
[ "$(dead_letters)" = 0 ] || fail "an auth failure must not dead-letter messages: $(status_json)"
# The operator fixes the primary's token file and sends SIGHUP: the tokens are
# reloaded and the stream waiting for its 1 h step tries again at once.
echo "right-token" >"$WORK/primary.token"
PUBLISH_TOKEN=right-token
kill -HUP "$PPID_"
wait_drained 15
log_has "$WORK/primary.log" retry_now why=SIGHUP || fail "no retry_now event after SIGHUP"
log_has "$WORK/primary.log" link_recovered ladder_steps=2 || fail "no link_recovered event once delivery resumed"
verify
# Wrong again, and this time a restart (kill -9) with the right file: the
# restarted primary tries the waiting stream at once too (the step is kept in
# the outbox, so without that it would wait the hour).
echo "wrong-token" >"$WORK/primary.token"
kill -HUP "$PPID_"
PUBLISH_TOKEN=wrong-token
LOG_FROM=$(log_size "$WORK/primary.log")
publish 5
wait_for 20 "the ladder's second step again" log_has "$WORK/primary.log" link_error ladder_step=2
kill9 "$PPID_"
echo "right-token" >"$WORK/primary.token"
start_primary --token-file "$WORK/primary.token" --quick-retries 2 --ladder "1s 1h"
PUBLISH_TOKEN=right-token
wait_drained 15
log_has "$WORK/primary.log" link_recovered ladder_steps=2 || fail "no link_recovered event after the restart"
verify
# Headers a proxy and this server could read differently are refused, on both
# daemons and whichever copy comes first: two Authorization (401), two
# Content-Type (415), two Idempotency-Key (400, /publish); never a 400 from the
# secondary, which a primary would read as its message's fault; a body in a Content-Encoding
# it does not decode is 415 naming it; "Bearer" may be followed by several
# spaces (RFC 6750). Nothing of these is stored.
answer_of() {  # PORT PATH BODY HEADER...: "STATUS BODY" of one POST
  local port=$1 path=$2 body=$3; shift 3
  local args=()
  for h in "$@"; do args+=(-H "$h"); done
  curl -s -m 10 -w ' %{http_code}' -X POST "${args[@]}" --data-binary "$body" "http://127.0.0.1:$port$path"
}
expect_answer() {  # WANT_STATUS WANT_TEXT PORT PATH BODY HEADER...
  local want=$1 text=$2; shift 2
  local got; got=$(answer_of "$@")
  [ "${got##* }" = "$want" ] && [[ "$got" == *"$text"* ]] || fail "POST $2 with ${*:4}: expected $want ($text), got $got"
}
published_before=$(metric "$PPORT" steadfast_primary_published_total)
for order in "right-token wrong" "wrong right-token"; do
  set -- $order
  expect_answer 401 "Authorization is given more than once" "$PPORT" /publish?stream=h '{"h":1}' \
    "Authorization: Bearer $1" "Authorization: Bearer $2" 'Content-Type: application/json'
  expect_answer 401 "Authorization is given more than once" "$SPORT" /api/messages \
    '{"id":"h-1","stream":"h","seq":1,"payload":1}' "Authorization: Bearer $1" "Authorization: Bearer $2" \
    'Content-Type: application/json'
done
expect_answer 415 "Content-Type is given more than once" "$PPORT" /publish?stream=h '{"h":1}' \
  'Authorization: Bearer right-token' 'Content-Type: application/json' 'Content-Type: text/plain'
expect_answer 415 "Content-Type is given more than once" "$SPORT" /api/messages \
  '{"id":"h-1","stream":"h","seq":1,"payload":1}' 'Authorization: Bearer right-token' \
  'Content-Type: text/plain' 'Content-Type: application/json'
expect_answer 400 "Idempotency-Key is given more than once" "$PPORT" /publish?stream=h '{"h":1}' \
  'Authorization: Bearer right-token' 'Content-Type: application/json' 'Idempotency-Key: a' 'Idempotency-Key: b'
printf '{"h":1}' | gzip >"$WORK/h.gz"
expect_answer 415 'Content-Encoding \"gzip\" is not supported' "$PPORT" /publish?stream=h "$(cat "$WORK/h.gz" | base64 -w0)" \
  'Authorization: Bearer right-token' 'Content-Type: application/json' 'Content-Encoding: gzip'
expect_answer 415 'Content-Encoding \"br\" is not supported' "$SPORT" /api/messages \
  '{"id":"h-1","stream":"h","seq":1,"payload":1}' 'Authorization: Bearer right-token' \
  'Content-Type: application/json' 'Content-Encoding: br'
[ "$(metric "$PPORT" steadfast_primary_published_total)" = "$published_before" ] \
  || fail "a refused publish was stored"
dump | grep -c '"stream":"h"' >/dev/null && fail "a refused post was applied on the secondary"
expect_answer 202 '"seq":1' "$PPORT" /publish?stream=h '{"h":1}' 'Authorization: Bearer    right-token' \
  'Content-Type: application/json' 'Content-Encoding: identity'
# A POST without a length has no body: 411, and the connection is closed (what
# the client sent after its header is no request: not answered as one).
for target in "$PPORT /publish?stream=h" "$SPORT /api/messages"; do
  set -- $target
  port=$1
  out=$(python3 - "$port" "$2" <<'PY'
import socket, sys
c = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); c.settimeout(5)
c.sendall(b"POST " + sys.argv[2].encode() + b" HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer right-token\r\n"
          b"Content-Type: application/json\r\n\r\n{\"a\":1}")
got = b""
while True:
    b = c.recv(4096)
    if not b: break
    got += b
print(got.count(b"HTTP/1.1 "), got.split(b"\r\n")[0].decode())
PY
  ) || fail "a POST without a length: the connection to $port was not closed ($out)"
  [ "$out" = "1 HTTP/1.1 411 Length Required" ] || fail "a POST without a length to $port: $out"
done
wait_drained 15
[ "$(dump | grep -c '"stream":"h"')" = 1 ] || fail "the secondary holds $(dump | grep -c '"stream":"h"') messages of stream h, not 1"
