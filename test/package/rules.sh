#!/usr/bin/env bash
# The alerting rules beside the metrics (issue 28): apps/deploy/steadfast.rules.yml passes
# `promtool check rules`, its tests (steadfast.rules.test.yml) pass `promtool test rules`, and every metric it
# names is one the daemons export (scraped from the real binaries: a renamed metric would leave an alert that
# never fires).
#   BIN=build/release/apps bash test/package/rules.sh
set -euo pipefail
BIN="${BIN:?set BIN to the folder with steadfast-primary and steadfast-secondary}"
DEPLOY="$(cd "$(dirname "$0")/../../apps/deploy" && pwd)"
fail() { echo "FAIL: $*" >&2; exit 1; }
command -v promtool >/dev/null || fail "promtool is needed (Debian's prometheus package; .ci/setup installs it)"
promtool check rules "$DEPLOY/steadfast.rules.yml" || fail "promtool check rules"
(cd "$DEPLOY" && promtool test rules steadfast.rules.test.yml) || fail "promtool test rules"

WORK="$(mktemp -d /tmp/steadfast-rules.XXXXXX)"
pids=()
trap 'for p in "${pids[@]:-}"; do { kill -9 "$p"; wait "$p"; } 2>/dev/null || true; done; rm -rf "$WORK"' EXIT
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
sp=$(port); pp=$(port)
"$BIN/steadfast-secondary" --listen "127.0.0.1:$sp" --data "$WORK/s" >"$WORK/s.log" 2>&1 & pids+=($!)
"$BIN/steadfast-primary" --secondary "http://127.0.0.1:$sp" --data "$WORK/p" --listen "127.0.0.1:$pp" >"$WORK/p.log" 2>&1 & pids+=($!)
for p in "$sp" "$pp"; do
  for _ in $(seq 100); do curl -fs -o /dev/null "http://127.0.0.1:$p/health" && break; sleep 0.05; done
done
{ curl -fs "http://127.0.0.1:$sp/metrics"; curl -fs "http://127.0.0.1:$pp/metrics"; } >"$WORK/metrics" || fail "scraping the daemons"
# The metric names in the rules' expressions (the storage_ok regex names two).
named=$(grep -E '^\s*expr:' "$DEPLOY/steadfast.rules.yml" | grep -oE 'steadfast_[a-z_]+' | sort -u)
named="$named $(grep -E '^\s*expr:' "$DEPLOY/steadfast.rules.yml" | grep -q 'steadfast_(primary|secondary)_storage_ok' \
  && echo steadfast_primary_storage_ok steadfast_secondary_storage_ok)"
[ -n "$named" ] || fail "no metric names found in the rules"
for m in $named; do
  case "$m" in steadfast_primary_|steadfast_) continue ;; esac
  grep -qE "^# TYPE $m " "$WORK/metrics" || fail "the rules name $m, which neither daemon exports"
done
# The labelled counters the rules read are there from the start at 0 (a
# series that first appears at 1 is invisible to increase()).
for series in 'steadfast_primary_link_errors_total{reason="transport"} 0' \
              'steadfast_primary_link_errors_total{reason="auth"} 0' \
              'steadfast_secondary_rejected_total{reason="gap"} 0' \
              'steadfast_secondary_rejected_total{reason="unauthorized"} 0'; do
  grep -qxF "$series" "$WORK/metrics" || fail "a fresh daemon does not export $series"
done
echo "rules: promtool check and test passed; every metric named is exported"
