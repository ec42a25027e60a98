#!/usr/bin/env bash
# Settings from three places, one precedence: the command line, then STEADFAST_* variables, then
# --config FILE. Durations are written one way ("500ms", "30s"); the older *-ms flags still work.
# --log-level filters lines; every standard-error line is a JSON object, refusals of bad flags included.
source "$(dirname "$0")/lib.sh"

# 1. A secondary configured only by a file, logging warnings and errors only.
cat >"$WORK/secondary.conf" <<CONF
# the secondary of this test
listen = 127.0.0.1:$SPORT
data = $SDATA
sync = off
log-level = warn
CONF
_launch "$WORK/secondary.log" "$BIN/steadfast-secondary" --config "$WORK/secondary.conf"
SPID=$LAUNCHED
wait_http "http://127.0.0.1:$SPORT/health" 10 "$SPID"

# 2. Which stream a publish without ?stream= goes to tells where --stream came from.
cat >"$WORK/primary.conf" <<CONF
secondary = http://127.0.0.1:$SPORT
data = $PDATA
listen = 127.0.0.1:$PPORT
stream = from-file
max-backoff = 500ms
CONF
stream_of_publish() {  # stream_of_publish [env assignments...] -- [flags...]: the stream a publish lands in
  local envs=() 
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  _launch "$WORK/primary.log" env "${envs[@]}" "$BIN/steadfast-primary" --config "$WORK/primary.conf" "$@"
  PPID_=$LAUNCHED
  wait_http "http://127.0.0.1:$PPORT/health" 10 "$PPID_"
  local answer
  answer=$(curl -fsS -X POST "${CT[@]}" -d '{"x":1}' "http://127.0.0.1:$PPORT/publish") || fail "publish failed"
  stop "$PPID_"
  [ "$EXIT_RC" = 0 ] || fail "the primary exited $EXIT_RC on SIGTERM"
  python3 -c 'import json,sys; print(json.loads(sys.argv[1])["stream"])' "$answer"
}
got=$(stream_of_publish --)
[ "$got" = from-file ] || fail "--config: expected stream from-file, got $got"
got=$(stream_of_publish STEADFAST_STREAM=from-env --)
[ "$got" = from-env ] || fail "STEADFAST_STREAM should win over the file: got $got"
got=$(stream_of_publish STEADFAST_STREAM=from-env -- --stream from-cli)
[ "$got" = from-cli ] || fail "the command line should win over STEADFAST_STREAM: got $got"
# STEADFAST_CONFIG names the file too.
_launch "$WORK/primary.log" env STEADFAST_CONFIG="$WORK/primary.conf" STEADFAST_STREAM=via-env-config "$BIN/steadfast-primary"
PPID_=$LAUNCHED
wait_http "http://127.0.0.1:$PPORT/health" 10 "$PPID_"
answer=$(curl -fsS -X POST "${CT[@]}" -d '{"x":2}' "http://127.0.0.1:$PPORT/publish") || fail "publish failed"
echo "$answer" | grep -q '"stream":"via-env-config"' || fail "STEADFAST_CONFIG was not read: $answer"
wait_for 20 "everything delivered" bash -c "[ \"\$(\"$BIN/steadfast-primary\" status --data \"$PDATA\" | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"pending\"])')\" = 0 ]"
stop "$PPID_"
"$BIN/steadfast-secondary" dump --data "$SDATA" | wc -l | grep -qx 4 || fail "the secondary should hold the 4 messages"

# 3. --log-level warn: the secondary wrote no info line (it logs "started" at info), but lines it did write are JSON.
grep -q '"level":"info"' "$WORK/secondary.log" && fail "--log-level warn (from the file) still wrote info lines"
grep -q '"event":"started"' "$WORK/primary.log" || fail "the primary at the default level should log started"

# 4. Refusals: exit 2, one JSON line on standard error naming the problem.
refused() {  # refused WHAT-TO-FIND COMMAND...: exits 2 and every stderr line is JSON naming WHAT-TO-FIND
  local want=$1; shift
  local rc=0
  "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  [ "$rc" = 2 ] || fail "$*: expected exit 2, got $rc: $(cat "$WORK/err")"
  python3 - "$WORK/err" "$want" <<'PY' || fail "$*: standard error is not JSON lines naming '$want': $(cat "$WORK/err")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert lines, "nothing on standard error"
objs = [json.loads(l) for l in lines]
assert any(o.get("event") == "usage_error" and sys.argv[2] in o.get("error", "") for o in objs), objs
PY
}
P=("$BIN/steadfast-primary" --secondary "http://127.0.0.1:$SPORT" --data "$WORK/p2")
printf 'secondary = http://127.0.0.1:1\nbogus = 1\n' >"$WORK/bad.conf"
refused "bogus" "$BIN/steadfast-primary" --config "$WORK/bad.conf" --data "$WORK/p2"
refused "cannot read" "${P[@]}" --config "$WORK/missing.conf"
refused "STEADFAST_MAX_BACKOF" env STEADFAST_MAX_BACKOF=1s "${P[@]}"
refused "--max-backoff" "${P[@]}" --max-backoff 5
refused "--attempt-timeout" "${P[@]}" --attempt-timeout 1ms
refused "--linger must be from 0ms to 10ms" "${P[@]}" --linger 11ms
refused "--linger: duration" "${P[@]}" --linger 1.5ms
refused "two spellings of one setting" "${P[@]}" --max-backoff 5s --max-backoff-ms 5000   # named, not "given twice"
S=("$BIN/steadfast-secondary" --listen 127.0.0.1:0 --data "$WORK/s2")
refused "empty step between commas" "${P[@]}" --ladder "10s,,1m"
refused "--drop-rate" "${S[@]}" --drop-rate nan
refused "--fault-rate" "${S[@]}" --fault-rate nan
refused "--max-connections must be 1" "${P[@]}" --max-connections 0
refused "--max-connections must be 1" "${S[@]}" --max-connections 0
refused "--header-timeout" "${S[@]}" --header-timeout 0s
refused "--min-free-space" "${P[@]}" --min-free-space 12XB
refused "at least the largest message" "${S[@]}" --min-free-space 1000
refused "--max-epoch-step" "${S[@]}" --max-epoch-step 0
refused "--max-body must be from 1024 to 67108864" "${S[@]}" --max-body 99999999999   # (its 4x would be the free-space floor)
refused "--max-body must be from 1024 to 67108864" "${S[@]}" --max-body 67108865
refused "--max-body must be from 1024" "${S[@]}" --max-body 1023
# ... and the bound itself is taken.
MPORT=$(free_port)
_launch "$WORK/maxbody.log" "$BIN/steadfast-secondary" --listen "127.0.0.1:$MPORT" --data "$WORK/smax" --max-body 67108864 \
  --min-free-space 0
wait_http "http://127.0.0.1:$MPORT/health" 10 "$LAUNCHED"
stop "$LAUNCHED"
refused "out of range" "${P[@]}" --max-backoff-ms 10000000000000
refused "--attempt-timeout" "${P[@]}" --attempt-timeout-ms 9300000000000
refused "--attempt-timeout must be from 10ms to 3600s" "${P[@]}" --attempt-timeout-ms 7200000
refused "--max-backoff-ms takes milliseconds" "${P[@]}" --max-backoff-ms 5s
refused "--epoch must not be negative" "${P[@]}" --epoch -1
refused "--batch-max must not be negative" env STEADFAST_BATCH_MAX=-1 "${P[@]}"
refused "--batch-max must be 1 to 10000" "${P[@]}" --batch-max 10001   # more than a secondary takes
refused "--data is empty" "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$SPORT" --data ''
# A --secondary that is this primary's own --listen (every send would reach the primary itself).
OWN=$(free_port)
refused "is this primary's own --listen address" "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$OWN" \
  --listen "127.0.0.1:$OWN" --data "$WORK/own"
refused "is this primary's own --listen address" "$BIN/steadfast-primary" --secondary "http://localhost:$OWN" \
  --listen "0.0.0.0:$OWN" --data "$WORK/own"
refused "is this primary's own --listen address" "$BIN/steadfast-primary" --secondary "http://[::1]:$OWN" \
  --listen "[::1]:$OWN" --data "$WORK/own"
refused "is this primary's own --listen address" "$BIN/steadfast-primary" --secondary "http://[::ffff:127.0.0.1]:0$OWN" \
  --listen "127.0.0.1:$OWN" --data "$WORK/own"   # (an IPv4-mapped address, a leading zero in the port)
# ... but the same port on another host is a secondary like any (both on 8080 is the common case).
_launch "$WORK/own.log" "$BIN/steadfast-primary" --secondary "http://192.0.2.1:$OWN" --listen "0.0.0.0:$OWN" \
  --data "$WORK/own2"
wait_http "http://127.0.0.1:$OWN/health" 10 "$LAUNCHED"
stop "$LAUNCHED"
# ... and localhost is 127.0.0.1 or ::1, not every loopback address.
_launch "$WORK/own3.log" "$BIN/steadfast-primary" --secondary "http://localhost:$OWN" --listen "127.0.0.2:$OWN" \
  --data "$WORK/own3"
wait_http "http://127.0.0.2:$OWN/health" 10 "$LAUNCHED"
stop "$LAUNCHED"
refused "--listen is empty" "${P[@]}" --listen ''
refused "--ladder: step 1 is shorter than 100ms" "${P[@]}" --ladder 0s   # a busy loop of attempts and log lines
refused "--ladder: step 2 is shorter than 100ms" "${P[@]}" --ladder "1s,50ms"
refused "has no steps" "${P[@]}" --ladder ''
refused '--ladder: duration "fast"' "${P[@]}" --ladder "1s fast"
refused '--header-timeout: duration "-1s" must start with a number' "${P[@]}" --header-timeout -1s
refused '--retain: duration "1q" needs a unit' "${P[@]}" --retain 1q
# A --token-file that cannot serve is a bad file (exit 2, so that a unit
# that does not restart on 2 is not restarted every 2 s), for both daemons.
printf '' >"$WORK/empty.token"
printf '# only a comment\n\n' >"$WORK/comment.token"
printf 'caf\xc3\xa9\n' >"$WORK/utf8.token"
printf 'one two\n' >"$WORK/space.token"
S=("$BIN/steadfast-secondary" --listen "127.0.0.1:$(free_port)" --data "$WORK/s-tok")
for app in P S; do
  declare -n cmd=$app
  refused "cannot read --token-file" "${cmd[@]}" --token-file "$WORK/missing.token"
  refused "holds no token" "${cmd[@]}" --token-file "$WORK/empty.token"
  refused "holds no token" "${cmd[@]}" --token-file "$WORK/comment.token"
  refused "line 1: byte 0xc3" "${cmd[@]}" --token-file "$WORK/utf8.token"
  refused "line 1: a token cannot hold spaces" "${cmd[@]}" --token-file "$WORK/space.token"
done
unset -n cmd
[ ! -e "$WORK/s-tok" ] || fail "a refused --token-file created the secondary's data directory"
# A node on the other node's (stopped) data directory is refused, naming it, and leaves nothing there.
mkdir -p "$WORK/shared" && cp "$PDATA/primary.db" "$WORK/shared/" || fail "no primary.db to copy for the shared-directory check"
rc=0
"$BIN/steadfast-secondary" --listen "127.0.0.1:$(free_port)" --data "$WORK/shared" >"$WORK/out" 2>"$WORK/err" || rc=$?
[ "$rc" != 0 ] && grep -q "holds primary.db, another node's store" "$WORK/err" ||
  fail "a secondary on a primary's data directory: exit $rc, $(cat "$WORK/err")"
[ ! -e "$WORK/shared/secondary.db" ] && [ ! -e "$WORK/shared/LOCK" ] ||
  fail "the refused secondary left $(ls "$WORK/shared" | tr '\n' ' ')in the primary's directory"
# The other daemon's read commands on it name it too.
for c in status dump; do
  rc=0
  "$BIN/steadfast-secondary" "$c" --data "$WORK/shared" >"$WORK/out" 2>"$WORK/err" || rc=$?
  [ "$rc" != 0 ] && grep -q "holds primary.db, another node's store (use that node's command)" "$WORK/err" ||
    fail "steadfast-secondary $c on a primary's data directory: exit $rc, $(cat "$WORK/err")"
done
# A word that is no flag's value is refused, not dropped (a "requeue" that listed and exited 0).
refused 'unexpected argument "stray"' "${P[@]}" stray
refused 'unexpected argument "requeue"' "$BIN/steadfast-primary" dead-letters requeue --data "$WORK/p2"
refused 'unexpected argument "extra"' "$BIN/steadfast-primary" status --data "$WORK/p2" extra
refused 'unexpected argument "extra"' "$BIN/steadfast-secondary" dump --data "$WORK/s2" extra
printf 'version = 1\n' >"$WORK/version.conf"
refused "version" "${P[@]}" --config "$WORK/version.conf"
printf 'config = /etc/other.conf\n' >"$WORK/nested.conf"
refused "config" "${P[@]}" --config "$WORK/nested.conf"
refused "is a directory" "${P[@]}" --config "$WORK"
# A legacy spelling in the file loses to the new one on the command line, like any flag.
printf 'max-backoff-ms = 500\nmax-backoff = 7s\n' >"$WORK/both.conf"
refused "max-backoff" "${P[@]}" --config "$WORK/both.conf"   # twice in one place: refused
refused "--log-level" "${P[@]}" --log-level loud
refused "--delay" "$BIN/steadfast-secondary" --listen 127.0.0.1:1 --data "$WORK/s2" --delay soon
refused "full or off" env STEADFAST_SYNC=sometimes "$BIN/steadfast-secondary" --listen 127.0.0.1:1 --data "$WORK/s2"
[ ! -e "$WORK/p2" ] && [ ! -e "$WORK/s2" ] || fail "a refused start created its data directory"
# A legacy spelling from the file loses to the new one on the command line (no "given twice").
printf 'max-backoff-ms = 500\n' >"$WORK/legacy.conf"
rc=0; "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$SPORT" --data "$WORK/p3" --config "$WORK/legacy.conf" \
  --max-backoff 1s --exit-when-drained 2>"$WORK/err" || rc=$?
[ "$rc" = 0 ] || fail "--max-backoff on the command line and max-backoff-ms in the file: exit $rc, $(cat "$WORK/err")"
# A runtime failure is a JSON line too (exit 1): the data directory is a file.
touch "$WORK/afile"
rc=0; "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$SPORT" --data "$WORK/afile" 2>"$WORK/err" || rc=$?
[ "$rc" = 1 ] || fail "--data on a file: expected exit 1, got $rc"
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$WORK/err" || fail "not JSON: $(cat "$WORK/err")"
grep -q 'not a directory' "$WORK/err" || fail "the error does not say what is wrong: $(cat "$WORK/err")"
# 5. The example configuration files of apps/deploy hold only known flags: with their /etc paths absent
#    here, each daemon gets as far as a missing file under /etc/steadfast (exit 2), not an unknown key.
DEPLOY="$(dirname "$0")/../../../apps/deploy"
for b in primary secondary; do
  rc=0; "$BIN/steadfast-$b" --config "$DEPLOY/$b.conf" --data "$WORK/deploy-$b" 2>"$WORK/err" || rc=$?
  [ "$rc" = 2 ] && grep -q '/etc/steadfast/' "$WORK/err" && ! grep -q 'unrecognised' "$WORK/err" \
    || fail "apps/deploy/$b.conf: exit $rc, $(cat "$WORK/err")"
  grep -q -- "--config /etc/steadfast/$b.conf" "$DEPLOY/steadfast-$b.service" || fail "steadfast-$b.service does not use $b.conf"
done
echo "config: file, environment and command line in that order; refusals are JSON lines"
