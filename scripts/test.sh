#!/usr/bin/env bash
# The whole test suite under AddressSanitizer and UndefinedBehaviorSanitizer, warnings
# as errors: configures build-asan/ (BUILD_DIR to change it), builds, runs ctest; then
# the fuzzers for FUZZ_SECONDS each (scripts/fuzz.sh, in build-fuzz/; FUZZ_SECONDS=0
# leaves them out). JOBS sets the parallelism (default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-asan}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
cmake -S . -B "$build" -DGPUCC_SANITIZE=ON -DGPUCC_WERROR=ON
cmake --build "$build" -j "$jobs"
rm -rf "$build/summaries"
ctest --test-dir "$build" --output-on-failure -j "$jobs"
# What the ONNX conformance and real-model tests measured (ctest shows only failures).
for f in "$build"/summaries/*.txt; do
  [ -f "$f" ] && { echo; echo "== $(basename "$f" .txt)"; cat "$f"; }
done
if [ "${FUZZ_SECONDS:-20}" != 0 ]; then
  echo
  JOBS=$jobs scripts/fuzz.sh
fi
