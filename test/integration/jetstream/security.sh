#!/usr/bin/env bash
# TLS and credentials toward NATS (issue 30), on both daemons, against
# nats-server instances of the test's own (one node each):
# 1. a server with a token: with --nats-token-file the pair replicates; with a
#    wrong token both name the refusal (/ready 503 nats_credentials_refused, a
#    log line, the nats_refused gauge) and the primary keeps what it accepts,
#    delivered once the token is fixed;
# 2. a server requiring TLS with client certificates (mutual TLS) and users:
#    tls:// with --nats-ca, --nats-cert/--nats-key, --nats-user and
#    --nats-password-file replicates; a wrong password is named as refused
#    (and what was accepted meanwhile is delivered once fixed); with another
#    CA, without the client certificate, without the CA, or plain nats:// to
#    it, /ready names the TLS mismatch;
#    a server that stalls while they start: /ready 503 nats_connection_closed;
#    a user that may not subscribe to $JS.EVENT.> replicates, and the primary
#    says once that failover then waits out the attempt timeout;
# 3. a .creds file (an operator-mode server: operator, accounts and users made
#    by nats_creds.py, as nsc would): the pair replicates; a user of an
#    account the server does not know is refused by name, and what was
#    accepted meanwhile is delivered once the right .creds is given;
# 4. bad flags exit 2 at start, naming the problem.
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../pair/lib.sh"
command -v nats-server >/dev/null || fail "nats-server is needed"
command -v openssl >/dev/null || fail "openssl is needed"
cd "$WORK"

# A CA, a server certificate for 127.0.0.1, a client certificate.
openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca.pem -days 2 -subj "/CN=steadfast test CA" \
  2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout server-key.pem -out server.csr -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out server.pem -days 2 \
  -extfile server.ext 2>/dev/null
openssl req -newkey rsa:2048 -nodes -keyout client-key.pem -out client.csr -subj "/CN=steadfast-client" 2>/dev/null
openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out client.pem -days 2 2>/dev/null
echo "s3cret-token" >token
echo "wrong-token" >wrong
echo "pw-of-steadfast" >password
echo "not-the-password" >wrong-password
# A CA that signed nothing of the server's: its certificate is not trusted.
openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca-key.pem -out other-ca.pem -days 2 -subj "/CN=another CA" \
  2>/dev/null

NT=$(free_port)
NM=$(free_port)
cat >token.conf <<EOF
port: $NT
jetstream { store_dir: "$WORK/js-token" }
authorization { token: "s3cret-token" }
EOF
cat >mtls.conf <<EOF
port: $NM
jetstream { store_dir: "$WORK/js-mtls" }
tls { cert_file: "$WORK/server.pem", key_file: "$WORK/server-key.pem", ca_file: "$WORK/ca.pem", verify: true }
authorization { users = [
  { user: "steadfast", password: "pw-of-steadfast" }
  { user: "restricted", password: "pw-of-steadfast", permissions: { subscribe: { deny: ["\$JS.EVENT.>"] } } }
] }
EOF
_launch "$WORK/nats-token.log" nats-server -c token.conf
NT_PID=$LAUNCHED
_launch "$WORK/nats-mtls.log" nats-server -c mtls.conf
wait_for 10 "the NATS servers listening" bash -c "exec 3<>/dev/tcp/127.0.0.1/$NT && exec 4<>/dev/tcp/127.0.0.1/$NM"

ready_is() {  # ready_is PORT STATUS CODE: /ready answers {"status": STATUS, ...} with CODE
  local out
  out=$(curl -s -m 5 -w '\n%{http_code}' "http://127.0.0.1:$1/ready")
  [ "${out##*$'\n'}" = "$3" ] && json_is "${out%$'\n'*}" "j['status'] == '$2'"
}
# pair NAME URL FLAGS...: a primary and a secondary with these NATS flags;
# sets P_PORT, S_PORT, P_PID, S_PID; logs in $WORK/NAME-primary.log, NAME-secondary.log
pair() {
  local name=$1 url=$2
  shift 2
  P_PORT=$(free_port)
  S_PORT=$(free_port)
  _launch "$WORK/$name-primary.log" "$BIN/steadfast-primary" --secondary "$url" --data "$WORK/$name-p" \
    --listen "127.0.0.1:$P_PORT" --js-stream "$name" "$@"
  P_PID=$LAUNCHED
  _launch "$WORK/$name-secondary.log" "$BIN/steadfast-secondary" --source "$url" --js-stream "$name" \
    --consumer "c-$name" --data "$WORK/$name-s" --listen "127.0.0.1:$S_PORT" "$@"
  S_PID=$LAUNCHED
  wait_http "http://127.0.0.1:$P_PORT/health" 10 "$P_PID"
  wait_http "http://127.0.0.1:$S_PORT/metrics" 10 "$S_PID"
}
publish_to() {  # publish_to PORT N: N messages, each answered 202
  local i code
  for i in $(seq "$2"); do
    code=$(curl -s -m 10 -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
      --data "{\"i\":$i}" "http://127.0.0.1:$1/publish?stream=s")
    [ "$code" = 202 ] || fail "publish $i to the primary on $1: $code"
  done
}
applied() { [ "$("$BIN/steadfast-secondary" dump --data "$WORK/$1-s" | wc -l)" -ge "$2" ]; }  # applied NAME N
# On a failure: where the pair running then stands (delivery and consumption).
on_fail() {
  [ -n "${P_PORT:-}" ] || return 0
  echo "--- the primary's metrics (port $P_PORT)"
  curl -s -m 5 "http://127.0.0.1:$P_PORT/metrics" |
    grep -E '^steadfast_primary_(delivered|outbox|pending|jetstream|nats|published|redeliver)' || true
  echo "--- the secondary's metrics (port $S_PORT)"
  curl -s -m 5 "http://127.0.0.1:$S_PORT/metrics" | grep -E '^steadfast_secondary_(applied|jetstream|last|nats)' || true
  # Whether its source still runs, and what it says of itself (consuming,
  # problem, lag): a stalled consumer and an ended one look alike in metrics.
  echo "--- the secondary's /health and /ready"
  curl -s -m 5 "http://127.0.0.1:$S_PORT/health" || true
  echo
  curl -s -m 5 "http://127.0.0.1:$S_PORT/ready" || true
  echo
}
delivered() { [ "$(metric "$1" steadfast_primary_delivered_total)" -ge "$2" ]; }               # delivered PORT N
stop_pair() {
  kill "$P_PID" "$S_PID" 2>/dev/null || true
  wait "$P_PID" "$S_PID" 2>/dev/null || true
}

echo "== 1. a token"
pair tok "nats://127.0.0.1:$NT" --nats-token-file token
wait_for 20 "the primary ready with the token" ready_is "$P_PORT" ready 200
publish_to "$P_PORT" 20
wait_for 20 "20 messages applied through the token server" applied tok 20
wait_for 10 "20 messages acknowledged" delivered "$P_PORT" 20
ready_is "$S_PORT" ready 200 || fail "the secondary with the right token is not ready"
[ "$(metric "$P_PORT" steadfast_primary_nats_refused)" = 0 ] || fail "nats_refused is not 0 with the right token"
stop_pair

pair badtok "nats://127.0.0.1:$NT" --nats-token-file wrong
wait_for 10 "the primary naming the refused token on /ready" ready_is "$P_PORT" nats_credentials_refused 503
wait_for 10 "the secondary naming the refused token on /ready" ready_is "$S_PORT" nats_credentials_refused 503
health=$(curl -s "http://127.0.0.1:$S_PORT/health")
json_is "$health" "j['status'] == 'nats_credentials_refused'" || fail "the secondary's /health: $health"
[ "$(metric "$P_PORT" steadfast_primary_nats_refused)" = 1 ] || fail "the primary's nats_refused gauge is not 1"
[ "$(metric "$S_PORT" steadfast_secondary_nats_refused)" = 1 ] || fail "the secondary's nats_refused gauge is not 1"
wait_for 10 "the primary's nats_refused line" log_has "$WORK/badtok-primary.log" nats_refused
grep -q 'Authorization Violation' "$WORK/badtok-primary.log" || fail "the primary's log does not say what NATS said"
publish_to "$P_PORT" 5  # accepted and kept: the outbox does not need the link
[ "$(metric "$P_PORT" steadfast_primary_outbox_depth)" = 5 ] || fail "the 5 messages are not kept while refused"
! grep -q '"fatal"' "$WORK/badtok-primary.log" "$WORK/badtok-secondary.log" || fail "a refused token ended a daemon"
stop_pair
# Fixed (the right token) and restarted on the same data: what was accepted
# while refused is delivered.
pair badtok "nats://127.0.0.1:$NT" --nats-token-file token
wait_for 20 "the 5 messages kept while refused applied once fixed" applied badtok 5
wait_for 10 "the 5 messages acknowledged once fixed" delivered "$P_PORT" 5
stop_pair

# A server that accepts the connection and then says nothing (stopped) while
# a pair starts: the connection closes after the connect timeout, for good;
# both say so by name instead of answering ready.
kill -STOP "$NT_PID"
pair stall "nats://127.0.0.1:$NT" --nats-token-file token
wait_for 15 "the primary naming the closed connection on /ready" ready_is "$P_PORT" nats_connection_closed 503
wait_for 15 "the secondary naming the closed connection on /ready" ready_is "$S_PORT" nats_connection_closed 503
kill -CONT "$NT_PID"
stop_pair

echo "== 2. TLS with client certificates, and a user"
MTLS=(--nats-ca "$WORK/ca.pem" --nats-cert "$WORK/client.pem" --nats-key "$WORK/client-key.pem"
  --nats-user steadfast --nats-password-file password)
pair mtls "tls://127.0.0.1:$NM" "${MTLS[@]}"
wait_for 20 "the primary ready over mutual TLS" ready_is "$P_PORT" ready 200
publish_to "$P_PORT" 20
wait_for 20 "20 messages applied over mutual TLS" applied mtls 20
wait_for 10 "20 messages acknowledged over mutual TLS" delivered "$P_PORT" 20
stop_pair
# A user that may not subscribe to JetStream's advisories: the pair works, and
# the primary says once that a leader's crash will cost it the attempt timeout.
pair restricted "tls://127.0.0.1:$NM" --nats-ca "$WORK/ca.pem" --nats-cert "$WORK/client.pem" \
  --nats-key "$WORK/client-key.pem" --nats-user restricted --nats-password-file password
wait_for 20 "the restricted primary ready" ready_is "$P_PORT" ready 200
publish_to "$P_PORT" 10
wait_for 20 "10 messages applied for the restricted user" applied restricted 10
wait_for 10 "the primary saying that the advisories are refused" \
  log_has "$WORK/restricted-primary.log" jetstream_advisories_refused
ready_is "$P_PORT" ready 200 || fail "a refused advisory subscription made the primary not ready"
[ "$(grep -c jetstream_advisories_refused "$WORK/restricted-primary.log")" = 1 ] ||
  fail "jetstream_advisories_refused is said more than once"
stop_pair

# A wrong password: named as refused on both; what the primary accepts
# meanwhile is kept, and delivered once the password is fixed.
pair badpw "tls://127.0.0.1:$NM" --nats-ca "$WORK/ca.pem" --nats-cert "$WORK/client.pem" \
  --nats-key "$WORK/client-key.pem" --nats-user steadfast --nats-password-file wrong-password
wait_for 10 "the primary naming the refused password on /ready" ready_is "$P_PORT" nats_credentials_refused 503
wait_for 10 "the secondary naming the refused password on /ready" ready_is "$S_PORT" nats_credentials_refused 503
wait_for 10 "the primary's nats_refused line for the password" log_has "$WORK/badpw-primary.log" nats_refused
publish_to "$P_PORT" 5
stop_pair
pair badpw "tls://127.0.0.1:$NM" "${MTLS[@]}"
wait_for 20 "the 5 messages kept while the password was wrong applied once fixed" applied badpw 5
stop_pair
# A CA that did not sign the server's certificate: a TLS mismatch, by name.
pair wrongca "tls://127.0.0.1:$NM" --nats-ca "$WORK/other-ca.pem" --nats-cert "$WORK/client.pem" \
  --nats-key "$WORK/client-key.pem" --nats-user steadfast --nats-password-file password
wait_for 10 "the primary with another CA naming the TLS mismatch" ready_is "$P_PORT" nats_tls_mismatch 503
wait_for 10 "the secondary with another CA naming the TLS mismatch" ready_is "$S_PORT" nats_tls_mismatch 503
wait_for 10 "the primary's nats_refused line for the CA" log_has "$WORK/wrongca-primary.log" nats_refused
grep -q 'certificate verify failed\|unable to get local issuer certificate' "$WORK/wrongca-primary.log" ||
  fail "the primary's log does not say that the server's certificate was not trusted"
publish_to "$P_PORT" 3  # kept, and delivered once the CA is fixed
stop_pair
pair wrongca "tls://127.0.0.1:$NM" "${MTLS[@]}"
wait_for 20 "the 3 messages kept under the wrong CA applied once fixed" applied wrongca 3
stop_pair

pair nocert "tls://127.0.0.1:$NM" --nats-ca "$WORK/ca.pem" --nats-user steadfast --nats-password-file password
wait_for 10 "the primary without a client certificate naming the TLS mismatch" ready_is "$P_PORT" nats_tls_mismatch 503
wait_for 10 "the secondary without a client certificate naming the TLS mismatch" ready_is "$S_PORT" nats_tls_mismatch 503
stop_pair
pair noca "tls://127.0.0.1:$NM" --nats-cert "$WORK/client.pem" --nats-key "$WORK/client-key.pem" \
  --nats-user steadfast --nats-password-file password
wait_for 10 "the primary without the CA naming the TLS mismatch" ready_is "$P_PORT" nats_tls_mismatch 503
grep -q 'unable to get local issuer certificate\|certificate verify failed' "$WORK/noca-primary.log" ||
  fail "the primary's log does not say that the server's certificate was not trusted"
stop_pair
pair plain "tls://127.0.0.1:$NT" --nats-token-file token  # TLS to a server without it
wait_for 10 "the primary asking TLS of a plain server naming the mismatch" ready_is "$P_PORT" nats_tls_mismatch 503
stop_pair

echo "== 3. a .creds file (decentralised auth: an operator, accounts, a user JWT and its nkey seed)"
python3 "$HERE/nats_creds.py" "$WORK/jwt" || fail "making the operator, accounts and users"
NC=$(free_port)
{
  echo "port: $NC"
  echo "jetstream { store_dir: \"$WORK/js-creds\" }"
  cat "$WORK/jwt/server.conf.inc"
} >creds.conf
_launch "$WORK/nats-creds.log" nats-server -c creds.conf
wait_for 10 "the operator-mode NATS server listening" bash -c "exec 3<>/dev/tcp/127.0.0.1/$NC"
pair creds "nats://127.0.0.1:$NC" --nats-creds "$WORK/jwt/user.creds"
wait_for 20 "the primary ready with the .creds" ready_is "$P_PORT" ready 200
publish_to "$P_PORT" 20
wait_for 20 "20 messages applied with the .creds" applied creds 20
wait_for 10 "20 messages acknowledged with the .creds" delivered "$P_PORT" 20
stop_pair
# A user of an account the server does not know: refused, by name; what is
# accepted meanwhile is kept and delivered once the right .creds is given.
pair badcreds "nats://127.0.0.1:$NC" --nats-creds "$WORK/jwt/stranger.creds"
wait_for 10 "the primary naming the refused .creds on /ready" ready_is "$P_PORT" nats_credentials_refused 503
wait_for 10 "the secondary naming the refused .creds on /ready" ready_is "$S_PORT" nats_credentials_refused 503
wait_for 10 "the primary's nats_refused line" log_has "$WORK/badcreds-primary.log" nats_refused
publish_to "$P_PORT" 5
stop_pair
pair badcreds "nats://127.0.0.1:$NC" --nats-creds "$WORK/jwt/user.creds"
wait_for 20 "the 5 messages kept while refused applied once fixed" applied badcreds 5
stop_pair

echo "== 4. bad flags exit 2"
bad_flags() {  # bad_flags WORDS-IN-THE-MESSAGE -- primary flags...
  local want=$1 rc=0
  shift 2
  "$BIN/steadfast-primary" --data "$WORK/bad-p" --listen "127.0.0.1:$(free_port)" "$@" >"$WORK/bad.out" 2>&1 || rc=$?
  [ "$rc" = 2 ] || fail "primary $*: exit $rc, not 2: $(cat "$WORK/bad.out")"
  grep -q -- "$want" "$WORK/bad.out" || fail "primary $*: the message does not say '$want': $(cat "$WORK/bad.out")"
}
bad_flags "go together" -- --secondary "tls://127.0.0.1:$NM" --nats-cert "$WORK/client.pem"
bad_flags "needs --nats-password-file" -- --secondary "nats://127.0.0.1:$NT" --nats-user steadfast
bad_flags "cannot be read" -- --secondary "tls://127.0.0.1:$NM" --nats-ca "$WORK/nothere.pem"
bad_flags "one kind of NATS credential" -- --secondary "nats://127.0.0.1:$NT" --nats-token-file token \
  --nats-user steadfast --nats-password-file password
bad_flags "is for NATS servers" -- --secondary "http://127.0.0.1:1" --nats-token-file token
# A .creds file whose seed or JWT is damaged: said at start, not as a server's fault later.
python3 - "$WORK/jwt/user.creds" "$WORK" <<'PY'
import sys
text = open(sys.argv[1]).read()
lines = text.split("\n")
seed = lines.index("-----BEGIN USER NKEY SEED-----") + 1
jwt = lines.index("-----BEGIN NATS USER JWT-----") + 1
damaged = list(lines); s = damaged[seed]; damaged[seed] = s[:10] + ("A" if s[10] != "A" else "B") + s[11:]
open(sys.argv[2] + "/damaged-seed.creds", "w").write("\n".join(damaged))
cut = list(lines); cut[jwt] = cut[jwt].rsplit(".", 1)[0]
open(sys.argv[2] + "/cut-jwt.creds", "w").write("\n".join(cut))
PY
bad_flags "fails its checksum" -- --secondary "nats://127.0.0.1:$NC" --nats-creds "$WORK/damaged-seed.creds"
bad_flags "is not a JWT" -- --secondary "nats://127.0.0.1:$NC" --nats-creds "$WORK/cut-jwt.creds"
bad_flags "would be logged" -- --secondary "nats://user:pw@127.0.0.1:$NT"
echo garbage >"$WORK/bad.creds"
bad_flags "is not a .creds file" -- --secondary "nats://127.0.0.1:$NT" --nats-creds "$WORK/bad.creds"
rc=0
"$BIN/steadfast-secondary" --data "$WORK/bad-s" --source "tls://127.0.0.1:$NM" --consumer c \
  --nats-ca "$WORK/ca.pem" --nats-key "$WORK/client-key.pem" >"$WORK/bad.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "go together" "$WORK/bad.out" || fail "the secondary with a key and no certificate: $rc $(cat "$WORK/bad.out")"
rc=0
"$BIN/steadfast-secondary" --data "$WORK/bad-s" --listen "127.0.0.1:$(free_port)" --nats-token-file token \
  >"$WORK/bad.out" 2>&1 || rc=$?
[ "$rc" = 2 ] && grep -q "is for NATS servers" "$WORK/bad.out" || fail "the secondary's --nats-* without --source: $rc"
echo "PASS"
