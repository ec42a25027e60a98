#!/usr/bin/env bash
# A throwaway CA and certificates for the TLS tests, made at test time (no key
# is ever committed):
#   ca.pem            the test CA
#   server.pem/.key   signed by it, for 127.0.0.1 and localhost (serverAuth)
#   client.pem/.key   signed by it (clientAuth), for mutual TLS
#   node.pem/.key     signed by the test CA for both roles (serverAuth and clientAuth, 127.0.0.1):
#                     a primary's one certificate, shown to the secondary and served on --listen
#   other-ca.pem      an unrelated CA (a client trusting only it must refuse the server)
#   other-client.pem/.key  signed by the unrelated CA
#   expired.pem/.key  signed by the test CA for 127.0.0.1 and localhost, valid only on 1-2 January 2020
#   bash test/tls/make-certs.sh DIR
set -euo pipefail
dir=${1:?usage: make-certs.sh DIR}
mkdir -p "$dir"
cd "$dir"
ossl() { openssl "$@" 2>/dev/null; }
key() { ossl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }
ca() {  # ca NAME SUBJECT
  key "$1.key"
  ossl req -x509 -new -key "$1.key" -sha256 -days 2 -subj "/CN=$2" -out "$1.pem" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
}
leaf() {  # leaf NAME CA SUBJECT EXTENSIONS
  key "$1.key"
  ossl req -new -key "$1.key" -subj "/CN=$3" -out "$1.csr"
  printf '%s\n' "$4" >"$1.ext"
  ossl x509 -req -in "$1.csr" -CA "$2.pem" -CAkey "$2.key" -CAcreateserial -sha256 -days 2 -extfile "$1.ext" -out "$1.pem"
  rm -f "$1.csr" "$1.ext"
}
ca ca "steadfast test CA"
ca other-ca "some other CA"
leaf server ca "steadfast test server" "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth
basicConstraints=CA:FALSE"
leaf client ca "steadfast test client" "extendedKeyUsage=clientAuth
basicConstraints=CA:FALSE"
leaf node ca "steadfast test node" "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth,clientAuth
basicConstraints=CA:FALSE"
leaf other-client other-ca "a client of another CA" "extendedKeyUsage=clientAuth
basicConstraints=CA:FALSE"
# Expired: `openssl x509 -req` cannot date a certificate in the past before OpenSSL 3.4; `openssl ca` can.
key expired.key
ossl req -new -key expired.key -subj "/CN=steadfast expired server" -out expired.csr \
  -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" -addext "extendedKeyUsage=serverAuth"
printf '[ca]\ndefault_ca = ca\n[ca]\ndatabase = expired.idx\nnew_certs_dir = .\nserial = expired.srl\ndefault_md = sha256\npolicy = any\ncopy_extensions = copy\nunique_subject = no\n[any]\ncommonName = supplied\n' >expired.cnf
: >expired.idx
echo 1000 >expired.srl
ossl ca -batch -notext -config expired.cnf -cert ca.pem -keyfile ca.key -startdate 20200101000000Z -enddate 20200102000000Z \
  -in expired.csr -out expired.pem
rm -f expired.csr expired.cnf expired.idx* expired.srl* 1000.pem
for f in expired.pem expired.key ca.pem server.pem server.key client.pem client.key node.pem node.key other-ca.pem other-client.pem other-client.key; do
  [ -s "$f" ] || { echo "make-certs: $f was not made (is openssl installed?)" >&2; exit 1; }
done
