#!/usr/bin/env bash
# compute-sanitizer (memcheck, racecheck, initcheck and synccheck) over the GPU tests: the
# runtime test, and every test model and example compiled to a model.so and run once. Uses
# the gpucc of build-gpu/ (BUILD_DIR): run scripts/test-gpu.sh first. Exits 1 when a tool
# reports an error; prints one line per model and tool.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-gpu}
tools=${TOOLS:-memcheck racecheck initcheck synccheck}
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
[ -x "$cs" ] || { echo "sanitize-gpu: no compute-sanitizer"; exit 1; }
work=$(mktemp -d /tmp/gpucc-sanitize-XXXXXX)
failed=0
check() { # name, then the command
  local name=$1 tool
  shift
  for tool in $tools; do
    if "$cs" --tool "$tool" --error-exitcode 99 $api "$@" >"$work/log" 2>&1; then
      echo "clean   $tool $name"
    else
      echo "FAILED  $tool $name"; tail -n 30 "$work/log"; failed=1
    fi
  done
}
# test_runtime makes CUDA calls fail on purpose (a cubin for another GPU, a kernel the
# module lacks, an arena larger than the GPU): those API errors are the test, not a bug.
# Not under initcheck, whose own device allocations upset the test's check that a failed
# create gives all its memory back.
api="--report-api-errors no"
all_tools=$tools
tools=${tools//initcheck/}
check test_runtime "$build/tests/test_runtime" "$build/libgpucc_model.so"
tools=$all_tools
api=
for f in tests/models/data/*.onnx examples/*.gir; do
  name=$(basename "$f")
  so="$work/$name.so"
  dims=()
  case $f in *.gir) dims=(--dim N=2) ;; esac
  if ! "$build/gpucc" "$f" "${dims[@]}" -o "$so" 2>"$work/log"; then
    echo "FAILED  compile $name"; cat "$work/log"; failed=1; continue
  fi
  check "$name" "$build/gpucc" run "$so" --output-dir "$work/out"
done
rm -rf "$work"
exit $failed
