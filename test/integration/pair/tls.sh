#!/usr/bin/env bash
# The pair over TLS, with a throwaway CA made at test time (test/tls/make-certs.sh):
#  1. an https:// secondary: delivery on two streams, byte for byte, over kept-alive connections;
#  2. a wrong CA and a wrong host name: refused with a clear error (secondary_tls_failed), nothing lost,
#     nothing dead-lettered; with the right CA everything arrives;
#  3. mutual TLS: a primary without a client certificate, or with one of another CA, is refused; with
#     the right one it delivers;
#  4. HTTPS on the primary's --listen (/publish), with a plain-HTTP client refused;
#  5. TLS files that cannot be used, and TLS flags without https://: exit 2 naming the problem;
#  6. each refusal names OpenSSL's reason: an unknown CA, a wrong name, an expired certificate (which the
#     secondary also reports when it starts on it).
source "$(dirname "$0")/lib.sh"
CERTS="$WORK/certs"
bash "$(dirname "$0")/../../tls/make-certs.sh" "$CERTS"
S_TLS=(--tls-cert "$CERTS/server.pem" --tls-key "$CERTS/server.key")
CA=(--cacert "$CERTS/ca.pem")
CLIENT=(--cert "$CERTS/client.pem" --key "$CERTS/client.key")
SECONDARY_URL="https://127.0.0.1:$SPORT"

start_tls_secondary() {  # extra flags...
  _launch "$WORK/secondary.log" "$BIN/steadfast-secondary" --listen "127.0.0.1:$SPORT" --data "$SDATA" "${S_TLS[@]}" "$@"
  SPID=$LAUNCHED
  wait_for 10 "the secondary answering https://127.0.0.1:$SPORT/health" \
    curl -fs -o /dev/null "${CA[@]}" "${CLIENT[@]}" "https://127.0.0.1:$SPORT/health"
}
smetric() {  # smetric NAME: a secondary metric, over HTTPS (with the client certificate, in case it asks)
  curl -fs "${CA[@]}" "${CLIENT[@]}" "https://127.0.0.1:$SPORT/metrics" | awk -v n="$1" '$1 == n {print int($2)}'
}
tls_failed() {  # tls_failed TEXT: a secondary_tls_failed line whose error contains TEXT, from byte LOG_FROM of the primary's log
  python3 - "$LOG_FROM" "$WORK/primary.log" "$1" <<'PY'
import json, sys
with open(sys.argv[2], "rb") as f:
    f.seek(int(sys.argv[1]))
    for line in f:
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("event") == "secondary_tls_failed" and sys.argv[3] in j.get("error", "") and j.get("hint"):
            sys.exit(0)
sys.exit(1)
PY
}
pending_is() { [ "$(pending)" = "$1" ]; }

# 5 first: refusals at start, before anything runs.
refused() {  # refused WHAT COMMAND...: exit 2, naming WHAT
  local want=$1 rc=0; shift
  "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  [ "$rc" = 2 ] || fail "$*: expected exit 2, got $rc: $(cat "$WORK/err")"
  grep -qF -- "$want" "$WORK/err" || fail "$*: the refusal does not name '$want': $(cat "$WORK/err")"
}
refused "$WORK/nope.pem" "$BIN/steadfast-secondary" --listen 127.0.0.1:1 --data "$WORK/x" --tls-cert "$WORK/nope.pem" --tls-key "$CERTS/server.key"
refused "--tls-key" "$BIN/steadfast-secondary" --listen 127.0.0.1:1 --data "$WORK/x" --tls-cert "$CERTS/server.pem"
refused "$CERTS/ca.pem" "$BIN/steadfast-secondary" --listen 127.0.0.1:1 --data "$WORK/x" --tls-cert "$CERTS/server.pem" --tls-key "$CERTS/ca.pem"
refused "https://" "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$SPORT" --data "$WORK/x" --tls-ca "$CERTS/ca.pem"
refused "--tls-listen" "$BIN/steadfast-primary" --secondary "http://127.0.0.1:$SPORT" --data "$WORK/x" --tls-cert "$CERTS/node.pem" --tls-key "$CERTS/node.key"
refused "$CERTS/server.key" "$BIN/steadfast-primary" --secondary "$SECONDARY_URL" --data "$WORK/x" --tls-ca "$CERTS/server.key"
[ ! -e "$WORK/x" ] || fail "a refused start created its data directory"

# 1. Delivery over TLS, one message a request so that connection reuse shows.
start_tls_secondary
start_primary --tls-ca "$CERTS/ca.pem" --batch-max 1 --connections 2
publish 20 a
publish 20 b
# A request body above a TLS record (16 KiB) and one far above it.
python3 -c 'import json; print(json.dumps({"big": "y" * 20000}))' >"$WORK/big1.json"
python3 -c 'import json; print(json.dumps({"big": "z" * 300000}))' >"$WORK/big2.json"
publish_file big "$WORK/big1.json"
publish_file big "$WORK/big2.json"
wait_drained 60
verify a
verify b
verify big
accepted=$(smetric steadfast_secondary_connections_accepted_total)
[ -n "$accepted" ] && [ "$accepted" -le 8 ] \
  || fail "42 requests over TLS took $accepted connections: keep-alive should reuse them (2 for delivery, 1 probe, the test's scrapes)"
stop "$PPID_"

# 2. A wrong CA, then a wrong name: the primary accepts, keeps and reports; nothing is dead-lettered.
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary --tls-ca "$CERTS/other-ca.pem" --ladder 1s
publish 5 c
wait_for 20 "secondary_tls_failed naming the unknown CA in the primary's log" tls_failed "unable to get local issuer certificate"
pending_is 5 || fail "the 5 messages of c should be kept: $(status_json)"
[ "$(dead_letters)" = 0 ] || fail "a TLS failure dead-lettered messages: $(status_json)"
stop "$PPID_"
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary --tls-ca "$CERTS/ca.pem" --tls-server-name wrong.example --ladder 1s
wait_for 20 "secondary_tls_failed naming a wrong name" tls_failed "hostname mismatch"
sleep 1
pending_is 5 || fail "the messages of c should still be kept: $(status_json)"
dump_lacks '"stream":"c"' || fail "a message reached a secondary whose name did not match"
stop "$PPID_"
# A name OpenSSL cannot check (a scoped IPv6 address) refuses the handshake; it must never skip the check.
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary --tls-ca "$CERTS/ca.pem" --tls-server-name '::2%lo' --ladder 1s
wait_for 20 "secondary_tls_failed for a name that cannot be checked" tls_failed "cannot be checked"
sleep 1
dump_lacks '"stream":"c"' || fail "a message reached the secondary without its name checked"
stop "$PPID_"
start_primary --tls-ca "$CERTS/ca.pem" --tls-server-name localhost   # the certificate's other name
wait_drained 60
verify c

# 3. Mutual TLS.
stop "$PPID_"; stop "$SPID"
start_tls_secondary --tls-client-ca "$CERTS/ca.pem"
failures_before=$(smetric steadfast_secondary_tls_handshake_failures_total)
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary --tls-ca "$CERTS/ca.pem" --ladder 1s
publish 3 d
wait_for 20 "secondary_tls_failed without a client certificate" tls_failed "certificate required"
more_failures() { [ "$(smetric steadfast_secondary_tls_handshake_failures_total)" -gt "$failures_before" ]; }
wait_for 20 "steadfast_secondary_tls_handshake_failures_total counting the refusals" more_failures
pending_is 3 || fail "the 3 messages of d should be kept: $(status_json)"
stop "$PPID_"
start_primary --tls-ca "$CERTS/ca.pem" --tls-cert "$CERTS/other-client.pem" --tls-key "$CERTS/other-client.key" --ladder 1s
sleep 2
pending_is 3 || fail "a client certificate of another CA was accepted: $(status_json)"
stop "$PPID_"
start_primary --tls-ca "$CERTS/ca.pem" --tls-cert "$CERTS/client.pem" --tls-key "$CERTS/client.key"
wait_drained 60
verify d
[ "$(dead_letters)" = 0 ] || fail "dead letters after TLS failures: $(status_json)"
stop "$PPID_"

# 4. HTTPS on the primary's --listen (--tls-listen), with one certificate for both roles: served to
#    publishers and shown to the secondary, which asks for one.
_launch "$WORK/primary.log" "$BIN/steadfast-primary" --secondary "$SECONDARY_URL" --data "$PDATA" --listen "127.0.0.1:$PPORT" \
  --tls-ca "$CERTS/ca.pem" --tls-cert "$CERTS/node.pem" --tls-key "$CERTS/node.key" --tls-listen
PPID_=$LAUNCHED
wait_for 10 "the primary answering over HTTPS" curl -fs -o /dev/null "${CA[@]}" "https://127.0.0.1:$PPORT/health"
answer=$(curl -fsS "${CA[@]}" "${CT[@]}" -d '{"over":"https"}' "https://127.0.0.1:$PPORT/publish?stream=e") \
  || fail "publish over HTTPS failed"
echo "$answer" | grep -q '"seq":1' || fail "unexpected answer: $answer"
curl -fs -o /dev/null "${CT[@]}" -d '{"x":1}' "http://127.0.0.1:$PPORT/publish?stream=e" && fail "plain HTTP to an HTTPS --listen was answered"
tls_refused() { [ "$(curl -fs "${CA[@]}" "https://127.0.0.1:$PPORT/metrics" | awk '$1 == "steadfast_primary_tls_handshake_failures_total" {print int($2)}')" -ge 1 ]; }
wait_for 10 "steadfast_primary_tls_handshake_failures_total counting the plain client" tls_refused
delivered_e() { dump | grep -c '"payload":{"over":"https"}' >/dev/null; }
wait_for 30 "the message published over HTTPS delivered" delivered_e
stop "$PPID_"

# 6. An expired certificate: said at the secondary's start, and named as expired by the primary.
stop "$SPID"
LOG_FROM=$(log_size "$WORK/secondary.log")
_launch "$WORK/secondary.log" "$BIN/steadfast-secondary" --listen "127.0.0.1:$SPORT" --data "$SDATA" \
  --tls-cert "$CERTS/expired.pem" --tls-key "$CERTS/expired.key"
SPID=$LAUNCHED
wait_for 10 "the secondary answering (not verified)" curl -fsk -o /dev/null "https://127.0.0.1:$SPORT/health"
log_has "$WORK/secondary.log" tls_certificate_invalid || fail "the secondary started on an expired certificate without a word"
python3 - "$WORK/secondary.log" <<'PY' || fail "tls_certificate_invalid does not say expired: $(grep tls_certificate_invalid "$WORK/secondary.log")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if '"tls_certificate_invalid"' in l]
sys.exit(0 if lines and lines[-1]["problem"].startswith("expired on") else 1)
PY
LOG_FROM=$(log_size "$WORK/primary.log")
start_primary --tls-ca "$CERTS/ca.pem" --ladder 1s
wait_for 20 "secondary_tls_failed naming the expired certificate" tls_failed "certificate has expired"
echo "tls: delivery over HTTPS, wrong CA and name refused, mutual TLS, HTTPS /publish, reasons named"
