#!/usr/bin/env bash
# (v2) /publish: the token first (401), then the content type (415), then the payload's shape: accepted only if an
# envelope carrying it alone fits a secondary's default limits (1 MiB body, nesting depth 64 with the envelope's
# own level: a payload may be 63 deep), else 413 or 400; accepted payloads are delivered byte for byte, and none
# is dead-lettered for its shape.
source "$(dirname "$0")/lib.sh"
echo "s3cret" >"$WORK/token"
# The primary starts before the secondary: everything below waits in the outbox, so that it goes out in batches.
start_primary --token-file "$WORK/token"
P="http://127.0.0.1:$PPORT/publish"
expect() {  # expect CODE curl-args...
  local want=$1; shift
  local got; got=$(curl -s -m 30 -o "$WORK/body" -w '%{http_code}' "$@")
  [ "$got" = "$want" ] || fail "expected $want, got $got for: ${*:0:12} ($(head -c 300 "$WORK/body"))"
}
AUTH=(-H 'Authorization: Bearer s3cret')
mkdepth() {  # mkdepth N FILE [obj]: a payload nested N deep
  python3 -c 'import sys; n=int(sys.argv[1]); o=len(sys.argv)>3
sys.stdout.write(("{\"a\":" * n + "1" + "}" * n) if o else ("[" * n + "1" + "]" * n))' "$@" >"$2"
}
mkdepth 63 "$WORK/d63"; mkdepth 64 "$WORK/d64"; mkdepth 62 "$WORK/d62"; mkdepth 65 "$WORK/d65"
mkdepth 63 "$WORK/o63" obj; mkdepth 64 "$WORK/o64" obj; mkdepth 100000 "$WORK/d100000"

# 1. The token, before anything else.
expect 401 -X POST -d '{"a":1}' "$P"
expect 401 -X POST "${CT[@]}" -d '{"a":1}' "$P"
expect 401 -X POST -H 'Authorization: Bearer wrong' "${CT[@]}" -d '{"a":1}' "$P"
expect 401 -X POST -H 'Authorization: Bearer s3cret2' "${CT[@]}" -d '{"a":1}' "$P"
expect 401 -X POST -H 'Authorization: Bearer s3cre' "${CT[@]}" -d '{"a":1}' "$P"
expect 401 -X POST -H 'Authorization: s3cret' "${CT[@]}" -d '{"a":1}' "$P"
expect 401 -X POST -H 'Authorization: Bearer wrong' -H 'Content-Type: text/plain' -d '{"a":1}' "$P"
expect 401 -X POST "${CT[@]}" -d '{not json' "$P"
expect 401 -X POST "${CT[@]}" --data-binary @"$WORK/d64" "$P"
expect 401 -X POST "${CT[@]}" -d '1' "$P?stream=bad%20name"

# 2. The content type.
expect 415 -X POST "${AUTH[@]}" -d '{"a":1}' "$P"                       # curl's form type
expect 415 -X POST "${AUTH[@]}" -H 'Content-Type:' -d '{"a":1}' "$P"    # none at all
expect 415 -X POST "${AUTH[@]}" -H 'Content-Type: text/plain' -d '{"a":1}' "$P"
expect 415 -X POST "${AUTH[@]}" -H 'Content-Type: application/x-ndjson' -d '{"a":1}' "$P"
expect 415 -X POST "${AUTH[@]}" -H 'Content-Type: application/jsonp' -d '{"a":1}' "$P"
PUBLISH_TOKEN=s3cret
body='{"charset":"utf-8"}'
ans=$(curl -sS -m 30 -X POST "${AUTH[@]}" -H 'Content-Type: application/json; charset=utf-8' --data-binary "$body" \
  -w '\n%{http_code}' "$P?stream=ct")
[ "${ans##*$'\n'}" = 202 ] || fail "Content-Type: application/json; charset=utf-8 must be accepted: $ans"
record_ack "$WORK/acks.ct" "${ans%$'\n'*}" "$body"
# A stream given twice is ambiguous: refused, nothing stored.
expect 400 -X POST "${AUTH[@]}" "${CT[@]}" -d '{"a":1}' "$P?stream=a&stream=b"
grep -q 'more than once' "$WORK/body" || fail "a repeated stream parameter: $(cat "$WORK/body")"

# 3. Depth: 63 deep fits (64 with the envelope), 64 does not.
expect 400 -X POST "${AUTH[@]}" "${CT[@]}" --data-binary @"$WORK/d64" "$P?stream=deep"
expect 400 -X POST "${AUTH[@]}" "${CT[@]}" --data-binary @"$WORK/o64" "$P?stream=deep"
expect 400 -X POST "${AUTH[@]}" "${CT[@]}" --data-binary @"$WORK/d65" "$P?stream=deep"
expect 400 -X POST "${AUTH[@]}" "${CT[@]}" --data-binary @"$WORK/d100000" "$P?stream=deep"
# A NUL byte is never JSON (a parser that stops at it once let "1\0junk" in, which the secondary refused).
printf '1\0junk' >"$WORK/nul"
expect 400 -X POST "${AUTH[@]}" "${CT[@]}" --data-binary @"$WORK/nul" "$P?stream=deep"
publish_file deep "$WORK/d62"
publish_file deep "$WORK/d63"
publish_file deep "$WORK/o63"

# 4. Size: the envelope must fit in 1 MiB. A payload 40 bytes under 1 MiB cannot (an envelope has more than
#    40 bytes of its own); one 512 bytes under can. Small messages around the big ones: those go out alone.
mkstring() { python3 -c 'import sys; sys.stdout.write("\"" + "a" * (int(sys.argv[1]) - 2) + "\"")' "$1" >"$2"; }
mkstring $((1048576 - 40)) "$WORK/over"
mkstring $((1048576 - 512)) "$WORK/under"
mkstring $((600 * 1024)) "$WORK/medium"
expect 413 -X POST "${AUTH[@]}" "${CT[@]}" --data-binary @"$WORK/over" "$P?stream=big"
publish_one big '{"small":1}'
publish_one big '{"small":2}'
publish_file big "$WORK/under"
publish_one big '{"small":3}'
publish_file big "$WORK/medium"
publish_file big "$WORK/medium"
expect 413 -X POST "${AUTH[@]}" "${CT[@]}" --data-binary @"$WORK/over" "$P?stream=big"
publish_one big '{"small":4}'

# 5. Byte for byte: number text, key order, escapes, non-ASCII text, inner whitespace.
publish_one raw '{"b":12345678901234567890123,"a":"\u00e9x","z":[1.0,2e5]}'
publish_one raw '{ "spaced" : [ 1 , 2 ] ,	"tab":"v" }'
publish_one raw '  {"outer":"whitespace may be trimmed"}  '
publish_one raw '"a string with \"quotes\", a \\ backslash and \/ a slash"'
publish_one raw '{"emoji":"\ud83d\ude00","raw":"é ü 😀 中文"}'
publish_one raw '-0.0'
publish_one raw '1E+2'
publish_one raw '0.1000000000000000055511151231257827'
publish_one raw '[-9223372036854775809,18446744073709551616,1e300]'
publish_one raw 'null'
publish_one raw '{}'
publish_one raw '[]'
publish_one raw '{"z":1,"y":{"x":[true,false,null]},"a":"last"}'
printf '{"trailing":"newline"}\n' >"$WORK/trailing"
publish_file raw "$WORK/trailing"
# Line breaks between a payload's tokens: stored and forwarded as sent; `dump` prints each as a space, so that
# it stays one JSON object a line (verify() compares them so).
printf '{ "z" : 1.0 ,\r\n\t"a":[1,\n2] }' >"$WORK/multiline"
publish_file raw "$WORK/multiline"

# Nothing accepted so far may be lost to its shape: start the secondary and check everything.
[ "$(pending)" = "$(( $(acked_count ct) + $(acked_count deep) + $(acked_count big) + $(acked_count raw) ))" ] \
  || fail "pending does not match the acknowledged count: $(status_json)"
SECONDARY_TOKEN=s3cret
start_secondary --token-file "$WORK/token"
wait_drained 60
for s in ct deep big raw; do verify "$s"; done
# verify() reads dump, where line breaks between tokens print as spaces: the secondary's store keeps them.
python3 - "$SDATA/secondary.db" "$WORK/multiline" <<'PY' || fail "the secondary did not store the multi-line payload byte for byte"
import sqlite3, sys
want = open(sys.argv[2], "rb").read()
got = [p for (p,) in sqlite3.connect(sys.argv[1]).execute("SELECT CAST(payload AS BLOB) FROM applied WHERE stream='raw'")]
assert want in got, f"{want!r} not among the stored payloads of raw"
PY
[ "$(dead_letters)" = 0 ] || fail "accepted messages were dead-lettered: $(status_json)"
[ "$(metric "$PPORT" steadfast_primary_dead_letter_total)" = 0 ] || fail "steadfast_primary_dead_letter_total is not 0"
grep -q '"event":"dead_letter"' "$WORK/primary.log" && fail "a dead_letter was logged"

# 6. --stdin carries its lines byte for byte too; a line that is not JSON is reported with its number, skipped.
stop "$PPID_"
printf '%s\n' '{"in": 1.50, "big":12345678901234567890123}' '  ["\u00e9", "é"]  ' 'not json' '{"k":{"n":null}}' \
  '"\ud83d\ude00"' >"$WORK/lines"
rc=0
timeout 60 "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$SPORT" --token-file "$WORK/token" \
  --data "$WORK/pdata-stdin" --stream in --stdin --exit-when-drained <"$WORK/lines" >"$WORK/stdin.log" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "--stdin --exit-when-drained exited $rc: $(tail -3 "$WORK/stdin.log")"
grep -Eq 'line"?[: ]+3([^0-9]|$)' "$WORK/stdin.log" || fail "the line that is not JSON was not reported with its number: $(cat "$WORK/stdin.log")"
dump >"$WORK/dump"
python3 - "$WORK/dump" "$WORK/lines" <<'PY' || fail "--stdin did not carry its lines byte for byte"
import sys
sent = [l.rstrip(b"\n") for l in open(sys.argv[2], "rb")]
sent = sent[:2] + sent[3:]
got = []
for line in open(sys.argv[1], "rb"):
    if line.startswith(b'{"stream":"in",'):
        line = line.rstrip(b"\n")
        got.append(line[line.find(b'"payload":') + 10:-1])
assert len(got) == len(sent), f"{len(got)} applied, {len(sent)} sent"
for s, g in zip(sent, got):
    assert g in (s, s.strip(b" \t")), f"sent {s!r}, applied {g!r}"
print("--stdin: byte for byte")
PY
echo "publish limits: as documented"
