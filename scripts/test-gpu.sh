#!/usr/bin/env bash
# The GPU tests (ctest label "gpu"), on a machine with an NVIDIA GPU: the runtime, a real
# model.so, every test graph and model, and every supported ONNX node test, each compiled
# to a model.so, run, and compared with the reference executor. Configures build-gpu/
# (BUILD_DIR to change it; no sanitizers: compute-sanitizer is the GPU's checker) unless
# NO_BUILD=1, then runs ctest -L gpu. Without a GPU every test says it was skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-gpu}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
if [ "${NO_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DGPUCC_WERROR=ON
  cmake --build "$build" -j "$jobs"
fi
rm -rf "$build/summaries"
status=0
ctest --test-dir "$build" -L gpu --output-on-failure || status=$?
for f in "$build"/summaries/gpu_*.txt; do
  [ -f "$f" ] && { echo; echo "== $(basename "$f" .txt)"; tail -n 40 "$f"; }
done
exit $status
