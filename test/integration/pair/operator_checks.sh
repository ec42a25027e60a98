#!/usr/bin/env bash
# Smaller operator checks (issue 28):
# 1. /publish refuses a query parameter it does not know (a typo must not send data to the default stream),
#    naming it; nothing is stored;
# 2. a listen address in use is a configuration error: exit 2 (listen_failed), on both daemons, before
#    anything is logged as started;
# 3. the listening line says whether TLS is on.
source "$(dirname "$0")/lib.sh"
start_secondary
start_primary
for q in "strem=x" "STREAM=x" "stream=x&priority=high"; do
  code=$(curl -s -m 10 -o "$WORK/body" -w '%{http_code}' -X POST "${CT[@]}" -d '{"q":1}' "http://127.0.0.1:$PPORT/publish?$q")
  [ "$code" = 400 ] || fail "/publish?$q: expected 400, got $code $(cat "$WORK/body")"
  name=${q##*&}; name=${name%%=*}
  json_is "$(cat "$WORK/body")" "\"unknown query parameter\" in j[\"error\"] and \"$name\" in j[\"error\"]" \
    || fail "/publish?$q: the 400 does not name $name: $(cat "$WORK/body")"
done
json_is "$(status_json)" 'j["next_seq"] == {}' || fail "a refused publish was stored: $(status_json)"
publish_one x '{"ok":1}'   # ?stream=x alone is fine
wait_drained 30
verify x

# 2. The address in use.
for b in primary secondary; do
  if [ "$b" = primary ]; then
    args=(--secondary "http://127.0.0.1:$SPORT" --data "$WORK/p-busy" --listen "127.0.0.1:$SPORT")
  else
    args=(--data "$WORK/s-busy" --listen "127.0.0.1:$PPORT")
  fi
  rc=0; "$BIN/steadfast-$b" "${args[@]}" >"$WORK/busy.out" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "the $b on an address in use exited $rc, not 2: $(cat "$WORK/busy.out")"
  log_has "$WORK/busy.out" listen_failed || fail "the $b does not log listen_failed: $(cat "$WORK/busy.out")"
  grep -q "in use" "$WORK/busy.out" || fail "the $b does not say the address is in use: $(cat "$WORK/busy.out")"
  grep -q '"event":"started"' "$WORK/busy.out" && fail "the $b logged started before failing to listen"
done

# 3. TLS in the listening line.
log_has "$WORK/primary.log" listening tls=False || fail "the primary's listening line does not say tls false"
log_has "$WORK/secondary.log" listening tls=False || fail "the secondary's listening line does not say tls false"
echo "PASS"
