#!/usr/bin/env bash
# What an operator looks for first: --version on both binaries (the version of
# steadfast/version.hpp), /ready next to /health, and steadfast_build_info.
source "$(dirname "$0")/lib.sh"
want=$(sed -n 's/^#define STEADFAST_VERSION_STRING "\(.*\)"$/\1/p' "$(dirname "$0")/../../../engine/include/steadfast/version.hpp")
[ -n "$want" ] || fail "no version in engine/include/steadfast/version.hpp"
for b in steadfast-primary steadfast-secondary; do
  out=$("$BIN/$b" --version) || fail "$b --version exited non-zero"
  [ "$out" = "$b $want" ] || fail "$b --version printed \"$out\", expected \"$b $want\""
  "$BIN/$b" --help | grep -q -- "--version" || fail "$b --help does not list --version"
done

start_secondary
start_primary
for p in "$SPORT" "$PPORT"; do
  body=$(curl -s -w ' %{http_code}' "http://127.0.0.1:$p/ready")
  [ "$body" = '{"status":"ready"} 200' ] || fail "/ready on port $p answered: $body"
done
for pair in "$PPORT steadfast-primary" "$SPORT steadfast-secondary"; do
  set -- $pair
  n=$(metric "$1" "steadfast_build_info{binary=\"$2\",version=\"$want\"}")
  [ "$n" = 1 ] || fail "steadfast_build_info for $2 $want is \"$n\", expected 1: $(curl -s "http://127.0.0.1:$1/metrics" | grep build_info)"
done
publish 5
wait_drained 30
verify
echo "PASS: --version, /ready and steadfast_build_info on both binaries ($want)"
