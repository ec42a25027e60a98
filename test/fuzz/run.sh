#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for
# SECONDS (default 60) from the committed seed corpus. Exits non-zero on a crash.
#   bash test/fuzz/run.sh 20
#   bash test/fuzz/run.sh 20 build/asan   # a tree already configured with
#                                         # STEADFAST_FUZZ=ON and clang (CI's)
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-60}"
tree="${2:-build/fuzz}"
bash .ci/setup --fuzz
if [ -z "${2:-}" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$tree" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSTEADFAST_FUZZ=ON \
    -DSTEADFAST_BUILD_TESTS=OFF -DSTEADFAST_BUILD_APPS=OFF "-DSTEADFAST_SANITIZE=address,undefined" >/dev/null
fi
cmake --build "$tree" -j "$(nproc)" --target fuzz_envelope fuzz_request
# The targets run side by side (each is one process on one core).
run_target() {  # run_target NAME: exit status of the fuzzer
  local target=$1 work="$tree/corpus-$1" artifacts="$tree/artifacts-$1/"
  mkdir -p "$work" "$artifacts"
  ./$tree/test/fuzz/fuzz_$target "$work" "test/fuzz/corpus/$target" -artifact_prefix="$artifacts" \
    -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -max_len=70000 -print_final_stats=1 \
    > "$tree/fuzz_$target.log" 2>&1
}
targets=(envelope request)
pids=()
for target in "${targets[@]}"; do
  echo "== fuzz_$target for ${seconds}s"
  run_target "$target" & pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  target=${targets[$i]}
  rc=0; wait "${pids[$i]}" || rc=$?
  echo "== fuzz_$target:"
  grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "$tree/fuzz_$target.log" || true
  if [ "$rc" -ne 0 ]; then
    echo "fuzz_$target FAILED (exit $rc); the input is in $tree/artifacts-$target/:"
    grep -E "ERROR|SUMMARY|Test unit written|==[0-9]+==" "$tree/fuzz_$target.log" | head -20
    status=1
  fi
done
exit $status
