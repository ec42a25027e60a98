#!/usr/bin/env bash
# Token rotation without downtime: token files hold several tokens (any is
# accepted, the first is sent); SIGHUP reloads them; delivery in flight goes on.
#   1. the secondary accepts old and new; the primary sends and requires old;
#   2. the primary moves to new, old second (SIGHUP): it sends new and accepts both;
#   3. both drop old (SIGHUP): old is refused with 401 on both;
#   4. a bad file on SIGHUP keeps the tokens in use; SIGHUP never ends a process.
# Publishing runs all along; every message is delivered, with no auth failure.
source "$(dirname "$0")/lib.sh"
printf '# rotation in progress\nold-token\n\nnew-token\n' >"$WORK/secondary.token"
echo "old-token" >"$WORK/primary.token"
start_secondary --token-file "$WORK/secondary.token"
start_primary --token-file "$WORK/primary.token"
env='{"id":"x-%s","stream":"direct-%s","seq":1,"epoch":0,"payload":1}'
for t in old-token new-token; do
  SECONDARY_TOKEN=$t post_secondary "$(printf "$env" "$t" "$t")" 200 >/dev/null
done

PUBLISH_TOKEN=old-token
publish 50 a
kill -HUP "$SPID"  # the same two tokens again: harmless
wait_for 10 "the secondary logs tokens_reloaded" log_has "$WORK/secondary.log" tokens_reloaded tokens=2

printf 'new-token\nold-token\n' >"$WORK/primary.token"
kill -HUP "$PPID_"
wait_for 10 "the primary logs tokens_reloaded" log_has "$WORK/primary.log" tokens_reloaded tokens=2
publish 50 b  # still with the old token: accepted during the move
PUBLISH_TOKEN=new-token
publish 50 b

echo "new-token" >"$WORK/primary.token"
kill -HUP "$PPID_"
wait_for 10 "the primary logs tokens_reloaded with one token" log_has "$WORK/primary.log" tokens_reloaded tokens=1
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Authorization: Bearer old-token' "${CT[@]}" -d '1' \
  "http://127.0.0.1:$PPORT/publish?stream=a")
[ "$code" = 401 ] || fail "/publish with the old token after the primary dropped it: $code, expected 401"

echo "new-token" >"$WORK/secondary.token"
kill -HUP "$SPID"
wait_for 10 "the secondary logs tokens_reloaded with one token" log_has "$WORK/secondary.log" tokens_reloaded tokens=1
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Authorization: Bearer old-token' "${CT[@]}" \
  -d "$(printf "$env" old2 old2)" "http://127.0.0.1:$SPORT/api/messages")
[ "$code" = 401 ] || fail "the secondary still accepts the old token after its reload: $code"
publish 50 c

# A file without a token: logged, the tokens in use stay.
: >"$WORK/secondary.token"
kill -HUP "$SPID"
wait_for 10 "the secondary logs tokens_reload_failed" log_has "$WORK/secondary.log" tokens_reload_failed
publish 20 d
# A token that cannot travel in an HTTP header (a UTF-16 file) is refused, naming the line.
printf 'new-token\r\n' | iconv -t UTF-16 >"$WORK/utf16.token"
kill -HUP "$PPID_"; sleep 0.1  # (a storm of reloads is harmless)
cp "$WORK/utf16.token" "$WORK/primary.token"
kill -HUP "$PPID_"
wait_for 10 "the primary refuses the UTF-16 file" log_has "$WORK/primary.log" tokens_reload_failed
grep -q 'line 1: byte 0x' "$WORK/primary.log" || fail "the refusal does not name the line and byte"
out=$("$BIN/steadfast-secondary" --listen "127.0.0.1:$(free_port)" --data "$WORK/other" --token-file "$WORK/utf16.token" 2>&1) \
  && fail "a secondary started with a UTF-16 token file"
echo "$out" | grep -q 'cannot be part of a bearer token' || fail "unclear refusal of a UTF-16 token file: $out"
out=$("$BIN/steadfast-primary" --secondary http://127.0.0.1:1 --data "$WORK/other" --token-file '' 2>&1) \
  && fail "the primary started with --token-file ''"
echo "$out" | grep -q -- '--token-file is empty' || fail "unclear refusal of --token-file '': $out"
publish 20 e
wait_drained 60
kill -0 "$SPID" && kill -0 "$PPID_" || fail "a process ended on SIGHUP"
for s in a b c d e; do verify "$s"; done
auth=$(metric "$PPORT" 'steadfast_primary_link_errors_total{reason="auth"}')
[ "$auth" = 0 ] || fail "delivery met $auth auth failures during the rotation"
echo "PASS: rotated the token on both sides with 240 messages delivered and no auth failure"
