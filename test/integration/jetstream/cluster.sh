#!/usr/bin/env bash
# A NATS JetStream cluster on loopback for the tests, the demo and the
# benchmarks: N nats-server processes (JetStream on, a store directory each,
# routes between them), in DIR.
#   cluster.sh start DIR [N]     start N nodes (default 3); prints the client URLs
#   cluster.sh urls DIR          nats://127.0.0.1:P1,nats://... (all nodes)
#   cluster.sh kill DIR I        kill -9 node I (1-based)
#   cluster.sh restart DIR I     start node I again (same ports, same store)
#   cluster.sh leader DIR STREAM the node (1-based) leading STREAM, from the monitoring port
#   cluster.sh stop DIR          stop every node (SIGTERM, then -9)
set -euo pipefail
cmd=${1:?command}; dir=${2:?directory}

free_ports() {  # N free TCP ports on 127.0.0.1
  # Below the ephemeral range when there is room: a node restarts on its ports,
  # and a client socket that the kernel gave one of them meanwhile (a route or a
  # client reconnecting) would make the restart fail.
  python3 - "$1" <<'PY'
import random, socket, sys
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 0
socks, pick = [], random.SystemRandom()
for _ in range(int(sys.argv[1])):
    s = None
    for _ in range(100 if low > 12000 else 0):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", pick.randrange(10000, low)))
            break
        except OSError:
            s.close()
            s = None
    if s is None:
        s = socket.socket(); s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
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
    command -v nats-server >/dev/null || { echo "cluster.sh: nats-server is not installed (bash .ci/setup)" >&2; exit 1; }
    mkdir -p "$dir"
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
    for i in $(seq 1 "$N"); do v="CLIENT_$i"; out+="${out:+,}nats://127.0.0.1:${!v}"; done
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
