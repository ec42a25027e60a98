#!/usr/bin/env bash
# The shipped units' secret setup works for their dynamic user (issue 28): both daemons run as an unprivileged
# user (nobody) with the units' own ExecStart= line (read from apps/deploy), the shipped configuration files, and
# secrets (token, private keys) root-owned, mode 0640, readable only through a supplementary group, as
# SupplementaryGroups=steadfast gives them; /etc/steadfast is a scratch copy here.
# 1. without the group, the daemon cannot read its files: exit 2 naming the file (what an operator met);
# 2. with it, the pair delivers over mutual TLS with the token, byte for byte;
# 3. the token rotates live: the new token written (still root:group 0640), SIGHUP, the new one is accepted.
# Needs root (to switch to nobody).
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || fail "this test switches to an unprivileged user: run it as root"
command -v setpriv >/dev/null || fail "setpriv (util-linux) is needed"
DEPLOY="$(cd "$(dirname "$0")/../../../apps/deploy" && pwd)"
GID=64999   # stands in for the group `steadfast`: a number no group has here
while getent group "$GID" >/dev/null; do GID=$((GID - 1)); done
chmod 0711 "$WORK"   # nobody passes through to its own directories
ETC="$WORK/etc"
mkdir -p "$ETC"
bash "$(dirname "$0")/../../tls/make-certs.sh" "$WORK/certs" >/dev/null
cp "$WORK/certs/ca.pem" "$ETC/ca.pem"
cp "$WORK/certs/server.pem" "$ETC/secondary.pem"; cp "$WORK/certs/server.key" "$ETC/secondary.key"
cp "$WORK/certs/node.pem" "$ETC/primary.pem"; cp "$WORK/certs/node.key" "$ETC/primary.key"
TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$TOKEN" >"$ETC/token"
# The shipped configuration, with this test's addresses and /etc/steadfast moved to the scratch copy.
sed -e "s#/etc/steadfast#$ETC#g" -e "s#^listen = .*#listen = 127.0.0.1:$SPORT#" "$DEPLOY/secondary.conf" >"$ETC/secondary.conf"
sed -e "s#/etc/steadfast#$ETC#g" -e "s#^listen = .*#listen = 127.0.0.1:$PPORT#" \
    -e "s#^secondary = .*#secondary = https://127.0.0.1:$SPORT#" "$DEPLOY/primary.conf" >"$ETC/primary.conf"
chown -R root:"$GID" "$ETC"
chmod 0750 "$ETC"
chmod 0640 "$ETC"/*.key "$ETC/token" "$ETC"/*.conf
chmod 0644 "$ETC"/*.pem
# The state directories systemd makes for the dynamic user (StateDirectory=, mode 0700).
for d in primary secondary; do install -d -o nobody -m 0700 "$WORK/state-$d"; done
SDATA="$WORK/state-secondary"; PDATA="$WORK/state-primary"
# exec_start UNIT STATE: the unit's ExecStart= words, as systemd would run them here.
exec_start() {
  sed -n 's/^ExecStart=//p' "$DEPLOY/$1" | sed -e "s#/etc/steadfast#$ETC#g" -e "s#\${STATE_DIRECTORY}#$2#g" \
    -e "s#^/usr/bin/#$BIN/#"
}
grep -q '^SupplementaryGroups=steadfast$' "$DEPLOY/steadfast-primary.service" || fail "the primary's unit has no SupplementaryGroups=steadfast"
grep -q '^SupplementaryGroups=steadfast$' "$DEPLOY/steadfast-secondary.service" || fail "the secondary's unit has no SupplementaryGroups=steadfast"
grep -q '^DynamicUser=yes$' "$DEPLOY/steadfast-secondary.service" || fail "the secondary's unit is not DynamicUser=yes"
read -r -a SEC <<<"$(exec_start steadfast-secondary.service "$SDATA")"
read -r -a PRI <<<"$(exec_start steadfast-primary.service "$PDATA")"
AS_NOBODY=(setpriv --reuid=nobody --regid=nogroup)
AS_SERVICE=(setpriv --reuid=nobody --regid=nogroup --groups="$GID")

# 1. Without the group: its files cannot be read, exit 2, named.
rc=0; "${AS_NOBODY[@]}" --clear-groups "${SEC[@]}" >"$WORK/nogroup.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "$ETC/" "$WORK/nogroup.out" \
  || fail "the secondary without the group: exit $rc, $(cat "$WORK/nogroup.out") (the test would prove nothing)"

# 2. With it: the pair over mutual TLS, with the token.
_launch "$WORK/secondary.log" "${AS_SERVICE[@]}" "${SEC[@]}"; SPID=$LAUNCHED
wait_for 10 "the secondary as nobody answering" curl -fs -o /dev/null --cacert "$ETC/ca.pem" \
  --cert "$WORK/certs/client.pem" --key "$WORK/certs/client.key" "https://127.0.0.1:$SPORT/health"
_launch "$WORK/primary.log" "${AS_SERVICE[@]}" "${PRI[@]}"; PPID_=$LAUNCHED
wait_for 10 "the primary as nobody answering" curl -fs -o /dev/null --cacert "$ETC/ca.pem" "https://127.0.0.1:$PPORT/health"
[ "$(stat -c %U "$PDATA/primary.db")" = nobody ] || fail "the primary's database is not nobody's: $(stat -c %U "$PDATA/primary.db")"
publish_tls() {  # publish_tls STREAM BODY TOKEN: prints the status; records a 202
  local out code
  out=$(curl -sS -m 30 --cacert "$ETC/ca.pem" -H "Authorization: Bearer $3" "${CT[@]}" --data-binary "$2" -w '\n%{http_code}' \
    "https://127.0.0.1:$PPORT/publish?stream=$1" 2>&1) || { echo "curl-failed: $out"; return; }
  code=${out##*$'\n'}
  [ "$code" != 202 ] || record_ack "$WORK/acks.$1" "${out%$'\n'*}" "$2"
  echo "$code"
}
for i in 1 2 3 4 5; do
  code=$(publish_tls c "{\"cred\":$i}" "$TOKEN"); [ "$code" = 202 ] || fail "publish $i as the service user: $code"
done
delivered() { [ "$(dump | grep -c '"stream":"c"')" = 5 ]; }
wait_for 30 "5 messages delivered between the two unprivileged daemons" delivered
verify c

# 3. Live rotation through the group: the new token, SIGHUP, accepted; the old one refused.
NEW=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "$NEW" >"$ETC/token.new" && chown root:"$GID" "$ETC/token.new" && chmod 0640 "$ETC/token.new" && mv "$ETC/token.new" "$ETC/token"
kill -HUP "$PPID_"; kill -HUP "$SPID"
rotated() { [ "$(publish_tls c '{"rotated":1}' "$NEW")" = 202 ]; }
wait_for 10 "the new token accepted after SIGHUP" rotated
[ "$(publish_tls c '{"old":1}' "$TOKEN")" = 401 ] || fail "the old token still accepted after the rotation"
delivered6() { [ "$(dump | grep -c '"stream":"c"')" = 6 ]; }
wait_for 30 "the message published with the new token delivered (the primary sends the new token)" delivered6
verify c
echo "PASS"
