#!/usr/bin/env bash
# A NATS JetStream cluster on loopback for the tests, the demo and the
# benchmarks: N nats-server processes (JetStream on, a store directory each,
# routes between them), in DIR.
#   cluster.sh start DIR [N] [--secure]
#                                start N nodes (default 3); prints the client URLs.
#                                --secure: clients must speak TLS with a certificate
#                                (DIR/tls: ca.pem, client.pem, client-key.pem) and log
#                                in with a .creds file (DIR/jwt/user.creds: an
#                                operator-mode cluster, nats_creds.py); URLs are tls://
#   cluster.sh urls DIR          nats://127.0.0.1:P1,nats://... (all nodes; tls:// when secure)
#   cluster.sh kill DIR I        kill -9 node I (1-based)
#   cluster.sh restart DIR I     start node I again (same ports, same store)
#   cluster.sh leader DIR STREAM the node (1-based) leading STREAM, from the monitoring port
#   cluster.sh stop DIR          stop every node (SIGTERM, then -9)
set -euo pipefail
cmd=${1:?command}; dir=${2:?directory}

free_ports() {  # N free TCP ports on 127.0.0.1
  # test/ports.py: one picker for every test (below the ephemeral range: a
  # node restarts on its ports; never a port another test was handed lately).
  python3 "$(dirname "${BASH_SOURCE[0]}")/../../ports.py" "$1"
}

start_node() {  # start_node I
  local i=$1
  # shellcheck disable=SC1091
  source "$dir/ports"
  nats-server -c "$dir/n$i.conf" >>"$dir/n$i.log" 2>&1 &
  echo $! >"$dir/n$i.pid"
  local port_var="CLIENT_$i"
  for _ in $(seq 1 100); do
    if (exec 3<>"/dev/tcp/127.0.0.1/${!port_var}") 2>/dev/null; then return 0; fi
    kill -0 "$(cat "$dir/n$i.pid")" 2>/dev/null || { echo "cluster.sh: node $i exited:" >&2; tail -5 "$dir/n$i.log" >&2; return 1; }
    sleep 0.1
  done
  echo "cluster.sh: node $i does not listen on ${!port_var}" >&2
  return 1
}

case "$cmd" in
  start)
    n=${3:-3}
    secure=${4:-}
    case "$n" in '' | *[!0-9]* | 0) echo "cluster.sh: start DIR [N] [--secure]: N must be a number of nodes, not '$n'" >&2; exit 2 ;; esac
    case "$secure" in '' | --secure) ;; *) echo "cluster.sh: start: unknown option '$secure'" >&2; exit 2 ;; esac
    command -v nats-server >/dev/null || { echo "cluster.sh: nats-server is not installed (bash .ci/setup)" >&2; exit 1; }
    mkdir -p "$dir"
    if [ "$secure" = --secure ]; then
      # A throwaway CA, a server certificate for 127.0.0.1, a client's; and
      # an operator with an account and a user (nats_creds.py).
      mkdir -p "$dir/tls"
      (
        cd "$dir/tls"
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca-key.pem -out ca.pem -days 2 -subj "/CN=cluster CA"
        openssl req -newkey rsa:2048 -nodes -keyout server-key.pem -out server.csr -subj "/CN=localhost"
        printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >server.ext
        openssl x509 -req -in server.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out server.pem -days 2 \
          -extfile server.ext
        openssl req -newkey rsa:2048 -nodes -keyout client-key.pem -out client.csr -subj "/CN=cluster client"
        openssl x509 -req -in client.csr -CA ca.pem -CAkey ca-key.pem -CAcreateserial -out client.pem -days 2
      ) >/dev/null 2>&1 || { echo "cluster.sh: making the certificates failed (openssl)" >&2; exit 1; }
      python3 "$(dirname "$0")/nats_creds.py" "$dir/jwt" || { echo "cluster.sh: making the .creds failed" >&2; exit 1; }
      echo "SECURE=1" >"$dir/secure"
    else
      rm -f "$dir/secure"
    fi
    read -r -a ports <<<"$(free_ports $((n * 3)))"
    : >"$dir/ports"
    echo "N=$n" >>"$dir/ports"
    routes=""
    for i in $(seq 1 "$n"); do
      echo "CLIENT_$i=${ports[$((i - 1))]}" >>"$dir/ports"
      echo "ROUTE_$i=${ports[$((n + i - 1))]}" >>"$dir/ports"
      echo "HTTP_$i=${ports[$((2 * n + i - 1))]}" >>"$dir/ports"
      routes+="${routes:+, }nats://127.0.0.1:${ports[$((n + i - 1))]}"
    done
    for i in $(seq 1 "$n"); do
      mkdir -p "$dir/n$i"
      {
        echo "server_name: n$i"
        echo "listen: 127.0.0.1:${ports[$((i - 1))]}"
        echo "http: 127.0.0.1:${ports[$((2 * n + i - 1))]}"
        # An envelope may be 1 MiB (the pair's limit), and a batch more.
        echo "max_payload: 4MB"
        echo "jetstream { store_dir: \"$dir/n$i\", max_memory_store: 256MB, max_file_store: 4GB }"
        if [ -f "$dir/secure" ]; then
          echo "tls { cert_file: \"$dir/tls/server.pem\", key_file: \"$dir/tls/server-key.pem\", ca_file: \"$dir/tls/ca.pem\", verify: true }"
          cat "$dir/jwt/server.conf.inc"
        fi
        if [ "$n" -gt 1 ]; then
          echo "cluster { name: steadfast, listen: 127.0.0.1:${ports[$((n + i - 1))]}, routes: [ $routes ] }"
        fi
      } >"$dir/n$i.conf"
    done
    for i in $(seq 1 "$n"); do start_node "$i"; done
    "$0" urls "$dir"
    ;;
  urls)
    # shellcheck disable=SC1091
    source "$dir/ports"
    out=""
    scheme=nats
    [ -f "$dir/secure" ] && scheme=tls
    for i in $(seq 1 "$N"); do v="CLIENT_$i"; out+="${out:+,}$scheme://127.0.0.1:${!v}"; done
    echo "$out"
    ;;
  kill)
    i=${3:?node}
    kill -9 "$(cat "$dir/n$i.pid")" 2>/dev/null || true
    ;;
  restart)
    start_node "${3:?node}"
    ;;
  leader)
    stream=${3:?stream}
    # shellcheck disable=SC1091
    source "$dir/ports"
    for i in $(seq 1 "$N"); do
      v="HTTP_$i"
      leader=$(curl -s "http://127.0.0.1:${!v}/jsz?streams=true" 2>/dev/null | python3 -c '
import json, sys
s = sys.argv[1]
try: j = json.load(sys.stdin)
except Exception: sys.exit(0)
for a in j.get("account_details", []):
    for st in a.get("stream_detail", []):
        if st.get("name") == s and st.get("cluster", {}).get("leader"): print(st["cluster"]["leader"]); sys.exit(0)
' "$stream" || true)
      if [ -n "$leader" ]; then echo "${leader#n}"; exit 0; fi
    done
    exit 1
    ;;
  stop)
    for f in "$dir"/n*.pid; do
      [ -e "$f" ] || continue
      kill "$(cat "$f")" 2>/dev/null || true
    done
    sleep 0.5
    for f in "$dir"/n*.pid; do
      [ -e "$f" ] || continue
      kill -9 "$(cat "$f")" 2>/dev/null || true
      rm -f "$f"
    done
    ;;
  *) echo "cluster.sh: unknown command $cmd" >&2; exit 2 ;;
esac
