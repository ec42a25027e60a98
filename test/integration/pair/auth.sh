#!/usr/bin/env bash
# A wrong token: 401; the primary reports the auth failure clearly and keeps the messages.
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
start_primary --token-file "$WORK/primary.token" --quick-retries 2 --ladder "1s"
PUBLISH_TOKEN=wrong-token  # (v2) /publish wants the primary's own token
publish 10
sleep 2
log_has "$WORK/primary.log" link_error || fail "the primary did not report the auth failure (event link_error)"
grep -q 'check --token-file' "$WORK/primary.log" || fail "the report does not say what to check"
[ "$(metric "$PPORT" 'steadfast_primary_link_errors_total{reason="auth"}')" -gt 0 ] \
  || fail "steadfast_primary_link_errors_total{reason=\"auth\"} is not counting"
[ "$(pending)" = 10 ] || fail "messages were not kept: pending $(pending)"
grep -q '"event":"dead_letter"' "$WORK/primary.log" && fail "an auth failure must not dead-letter messages"
[ "$(dead_letters)" = 0 ] || fail "an auth failure must not dead-letter messages: $(status_json)"
# With the right token after a restart, everything goes through.
kill9 "$PPID_"
start_primary --token-file "$WORK/secondary.token"
PUBLISH_TOKEN=right-token
wait_drained 30
verify
