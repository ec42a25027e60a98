#!/usr/bin/env bash
# Malformed requests of every kind in the contract, to both servers: the documented 4xx, and they keep serving.
source "$(dirname "$0")/lib.sh"
start_secondary
start_primary
S="http://127.0.0.1:$SPORT"; P="http://127.0.0.1:$PPORT"
expect() {  # expect CODE curl-args...
  local want=$1; shift
  local got; got=$(curl -s -o "$WORK/body" -w '%{http_code}' "$@")
  [ "$got" = "$want" ] || fail "expected $want, got $got for: $* ($(cat "$WORK/body"))"
  if [ "$want" -ge 400 ]; then python3 -c 'import json,sys; assert "error" in json.load(open(sys.argv[1]))' "$WORK/body" \
    || fail "the $want answer is not {\"error\": ...}: $(cat "$WORK/body")"; fi
}
J=(-H 'Content-Type: application/json')
expect 400 -X POST "${J[@]}" -d '{not json' "$S/api/messages"
expect 400 -X POST "${J[@]}" -d '[]' "$S/api/messages"
expect 400 -X POST "${J[@]}" -d '{"stream":"s","seq":1,"payload":1}' "$S/api/messages"
expect 400 -X POST "${J[@]}" -d '{"id":"a","stream":"s","seq":"1","payload":1}' "$S/api/messages"
expect 400 -X POST "${J[@]}" -d '{"id":"a","stream":"s","seq":0,"payload":1}' "$S/api/messages"
expect 400 -X POST "${J[@]}" -d '{"id":"a","stream":"s","seq":1,"epoch":-2,"payload":1}' "$S/api/messages"
expect 400 -X POST "${J[@]}" -d '{"id":"a","stream":"s","seq":1}' "$S/api/messages"
expect 400 -X POST "${J[@]}" -d '{"messages":[{"id":"a","stream":"s","seq":1,"payload":1},{"id":"b","stream":"s","seq":3,"payload":1}]}' "$S/api/messages"
expect 415 -X POST -H 'Content-Type: text/plain' -d '{}' "$S/api/messages"
expect 415 -X POST -d '{}' "$S/api/messages"
head -c 1100000 /dev/zero | tr '\0' 'a' >"$WORK/big"
expect 413 -X POST "${J[@]}" --data-binary @"$WORK/big" "$S/api/messages"
expect 404 "$S/nope"
expect 405 -X GET "$S/api/messages"
expect 405 -X DELETE "$S/health"
expect 409 -X POST "${J[@]}" -d '{"id":"x","stream":"s","seq":5,"payload":1}' "$S/api/messages"
printf 'GARBAGE\r\n\r\n' | timeout 5 python3 -c 'import socket,sys; s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.sendall(sys.stdin.buffer.read()); print(s.recv(100).decode().split("\r\n")[0])' "$SPORT" | grep -q '400' || fail "garbage HTTP not answered 400"
# The primary's /publish.
expect 400 -X POST "${J[@]}" -d '{not json' "$P/publish"
expect 400 -X POST "${J[@]}" -d '' "$P/publish"
expect 400 -X POST "${J[@]}" -d '1' "$P/publish?stream=bad%20name"
expect 413 -X POST "${J[@]}" --data-binary @"$WORK/big" "$P/publish"
expect 415 -X POST -d '{"ok":1}' "$P/publish"    # curl's default form content type
expect 404 "$P/nope"
expect 405 -X GET "$P/publish"
# Both still serve.
expect 200 "$S/health"
expect 202 -X POST "${J[@]}" -d '{"ok":true}' "$P/publish"
wait_drained 20
"$BIN/steadfast-secondary" dump --data "$WORK/sdata" | grep -c '"ok":true' >/dev/null || fail "the good message was not delivered"
# A percent-encoded stream name is decoded (Boost.URL): a%2Eb is the stream a.b.
answer=$(curl -fsS -X POST "${CT[@]}" -d '{"enc":1}' "http://127.0.0.1:$PPORT/publish?stream=a%2Eb") || fail "?stream=a%2Eb refused"
echo "$answer" | grep -q '"stream":"a.b"' || fail "?stream=a%2Eb should be the stream a.b: $answer"
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "${CT[@]}" -d '{"enc":2}' "http://127.0.0.1:$PPORT/publish?stream=a%20b")
[ "$code" = 400 ] || fail "?stream=a%20b (a space) answered $code, expected 400"
# Bad flags and data directories: a clear error and a non-zero exit.
out=$("$BIN/steadfast-primary" --secondary nope --data "$WORK/x" 2>&1) && fail "bad --secondary accepted"
echo "$out" | grep -q 'not an http:// or https:// URL' || fail "unclear error: $out"
out=$("$BIN/steadfast-secondary" --listen 127.0.0.1:1 --data "$WORK/y" --sync sometimes 2>&1) && fail "bad --sync accepted"
echo "$out" | grep -q 'full or off' || fail "unclear error: $out"
mkdir -p "$WORK/corrupt" && echo "this is not a database" >"$WORK/corrupt/secondary.db"
out=$("$BIN/steadfast-secondary" --listen 127.0.0.1:1 --data "$WORK/corrupt" 2>&1) && fail "corrupt data accepted"
echo "$out" | grep -q 'not a SQLite database' || fail "unclear error: $out"
[ "$(cat "$WORK/corrupt/secondary.db")" = "this is not a database" ] || fail "the corrupt file was replaced"
echo "malformed requests: all answered as documented"
