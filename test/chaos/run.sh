#!/usr/bin/env bash
# The chaos campaign (test/chaos/README.md): the pair under random kills, 503s,
# dropped connections and storage failures; every acknowledged message must be
# applied exactly once, in order, byte for byte.
#   bash test/chaos/run.sh BIN_DIR [--seed N] [--duration S] [other chaos.py options]
# BIN_DIR may also come from the environment as BIN (as for the pair tests).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if [ $# -ge 1 ] && [ "${1#-}" = "$1" ]; then bin="$1"; shift; else bin="${BIN:-}"; fi
[ -n "$bin" ] || { echo "usage: bash test/chaos/run.sh BIN_DIR [--seed N] [--duration S] [--streams N] [--publishers N]" >&2; exit 2; }
command -v python3 >/dev/null || { echo "chaos: python3 is needed" >&2; exit 2; }
command -v prlimit >/dev/null || echo "chaos: prlimit (util-linux) not found: no storage-failure windows" >&2
exec python3 -u "$here/chaos.py" --bin "$bin" "$@"
