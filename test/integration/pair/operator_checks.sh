#!/usr/bin/env bash
# Smaller operator checks (issue 28):
# 1. /publish refuses a query parameter it does not know (a typo must not send data to the default stream),
#    naming it; nothing is stored;
# 2. a listen address in use is a configuration error: exit 2 (listen_failed), on both daemons, before
#    anything is logged as started;
# 3. the listening line says whether TLS is on;
# 4. NATS unreachable at start (issue 30): the online gauge reads 0 as /health says false, and a port with
#    trailing characters (nats://HOST:4222x, ...:4222?tls=true) is refused at start (exit 2), not later.
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
    args=(--secondary "http://127.0.0.1:$SPORT" --data "$WORK/p-busy" --listen "127.0.0.1:$PPORT")  # (the running primary's)
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

# 4. JetStream unreachable: nothing listens on the secondary's old port once it is stopped.
nats_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
jport=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN/steadfast-primary" --secondary "nats://127.0.0.1:$nats_port" --data "$WORK/p-js" --listen "127.0.0.1:$jport" \
  >"$WORK/p-js.log" 2>&1 &
jpid=$!
for _ in $(seq 1 200); do curl -fs -o /dev/null "http://127.0.0.1:$jport/health" && break; sleep 0.05; done
health=$(curl -fs "http://127.0.0.1:$jport/health") || fail "the JetStream primary does not answer /health: $(cat "$WORK/p-js.log")"
json_is "$health" 'j["secondary_online"] is False' || fail "/health with NATS unreachable: $health"
gauge=$(curl -fs "http://127.0.0.1:$jport/metrics" | awk '$1=="steadfast_primary_secondary_online" {print $2}')
[ "$gauge" = 0 ] || fail "steadfast_primary_secondary_online reads '$gauge' with NATS unreachable (/health: $health)"
kill "$jpid"; wait "$jpid" 2>/dev/null || true
for bad in "nats://127.0.0.1:${nats_port}x" "nats://127.0.0.1:$nats_port?tls=true"; do
  rc=0; "$BIN/steadfast-primary" --secondary "$bad" --data "$WORK/p-bad" >"$WORK/bad.out" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "--secondary $bad: exit $rc, not 2: $(cat "$WORK/bad.out")"
  grep -q "not a nats://HOST:PORT address" "$WORK/bad.out" || fail "--secondary $bad: not named: $(cat "$WORK/bad.out")"
  rc=0; "$BIN/steadfast-secondary" --source "$bad" --consumer c --data "$WORK/s-bad" >"$WORK/bad.out" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "the secondary's --source $bad: exit $rc, not 2: $(cat "$WORK/bad.out")"
done
echo "PASS"
