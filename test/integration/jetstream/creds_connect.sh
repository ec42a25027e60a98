#!/usr/bin/env bash
# Every JetStream client with a .creds file connects at its first try
# (client.cpp's every_creds_client_connects_at_once), against an
# operator-mode nats-server of its own: the operator, accounts and user made
# by nats_creds.py.
#   creds_connect.sh TESTS: TESTS is steadfast_jetstream_tests.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
TESTS=$1
WORK=$(mktemp -d "${TMPDIR:-/tmp}/steadfast-creds.XXXXXX")
PID=""
cleanup() { if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi; rm -rf "$WORK"; }
trap cleanup EXIT
python3 "$HERE/nats_creds.py" "$WORK/jwt"
PORT=$(python3 "$HERE/../../ports.py")
{
  echo "port: $PORT"
  echo "jetstream { store_dir: \"$WORK/js\" }"
  cat "$WORK/jwt/server.conf.inc"
} >"$WORK/server.conf"
nats-server -c "$WORK/server.conf" >"$WORK/nats.log" 2>&1 &
PID=$!
for _ in $(seq 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then break; fi
  sleep 0.1
done
if ! SF_NATS_CREDS_URL="nats://127.0.0.1:$PORT" SF_NATS_CREDS="$WORK/jwt/user.creds" \
  "$TESTS" --run_test=jetstream_client/every_creds_client_connects_at_once --log_level=message; then
  echo "--- the server's log (refusals):"
  grep -E "ERR|WRN" "$WORK/nats.log" | tail -20 || true
  exit 1
fi
