#!/usr/bin/env bash
# Runs the libFuzzer harnesses of tests/fuzz (tests/fuzz/README.md) for a bounded time each.
#
#   scripts/fuzz.sh          configure build-fuzz/ with clang, build only the harnesses, then
#                            run each for FUZZ_SECONDS on one core, seeded from the committed
#                            corpus, the regression inputs and the repository's test data
#   scripts/fuzz.sh merge    minimize what the runs found, with the committed corpus, back
#                            into tests/fuzz/corpus/<harness>/ (libFuzzer's -merge=1)
#
# Environment: FUZZ_SECONDS (default 20) per harness; FUZZERS, the harnesses to run (default
# all: dsl onnx npy safetensors plan trailer tensorpb); FUZZ_TIMEOUT (default 20), the
# seconds one input may take before it counts as a hang; FUZZ_BUILD_DIR (default
# build-fuzz); FUZZ_CC (default clang); JOBS (default: the number of cores), the build's
# parallelism and how many harnesses run at once; FUZZ_NO_BUILD=1 runs the harnesses
# already built there (on a machine without clang, say, where the build folder was
# copied). Each run's new inputs stay in FUZZ_BUILD_DIR/fuzz/corpus/<harness>/, so later
# runs start from them.
#
# A crash, leak, hang, out-of-memory or broken harness check fails the script, naming the
# input libFuzzer saved under FUZZ_BUILD_DIR/fuzz/crashes/<harness>/; the README says how to
# minimize it and keep it as a regression input.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-run}
case "$mode" in
  run | merge) ;;
  *) echo "usage: scripts/fuzz.sh [merge]" >&2; exit 2 ;;
esac
build=${FUZZ_BUILD_DIR:-build-fuzz}
seconds=${FUZZ_SECONDS:-20}
timeout=${FUZZ_TIMEOUT:-20}
harnesses=${FUZZERS:-dsl onnx npy safetensors plan trailer tensorpb}
jobs=${JOBS:-$(nproc 2>/dev/null || echo 2)}
cc=${FUZZ_CC:-clang}
work=$build/fuzz

# -O1: a little less to build than -O2, and nearly as fast to run; Debug, because
# RelWithDebInfo's NDEBUG would turn the asserts off.
if [ "${FUZZ_NO_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$build" -DCMAKE_C_COMPILER="$cc" -DGPUCC_FUZZ=ON -DGPUCC_WERROR=ON \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG="-O1 -gline-tables-only" >/dev/null
  cmake --build "$build" --target fuzzers -j "$jobs"
fi
bin=$build/tests/fuzz

# Seeds from the repository's test data, made afresh each run (so they follow the formats).
rm -rf "$work/seeds"
mkdir -p "$work/seeds"/{dsl,onnx,npy,safetensors,tensorpb} "$work/crashes"
while IFS= read -r f; do
  cp "$f" "$work/seeds/dsl/$(echo "$f" | tr / _)"
done < <(find tests examples -name '*.gir' -type f)
# tests/onnx's hand-made models, but the few of more than 64 KiB (deep_nesting, 3 MB, only
# tests the depth limit), as for libonnx-testdata below.
for m in $(python3 tests/onnx/make_models.py --list); do
  [ "$m" = deep_nesting ] && continue
  python3 tests/onnx/make_models.py "$m" "$work/seeds/onnx/$m.onnx"
  [ "$(stat -c %s "$work/seeds/onnx/$m.onnx")" -le 65536 ] || rm "$work/seeds/onnx/$m.onnx"
done
# The models of ONNX's own tests (libonnx-testdata, which scripts/install-deps.sh
# installs for the conformance test), but the few of more than 64 KiB.
onnx_data=/usr/share/libonnx-testdata/data
if [ -d "$onnx_data" ]; then
  while IFS= read -r f; do
    rel=${f#"$onnx_data"/}
    cp "$f" "$work/seeds/onnx/$(dirname "$rel" | tr / _).onnx"
  done < <(find "$onnx_data" -name model.onnx -size -65537c)
  # and their inputs and outputs (TensorProto files) of 4 KiB at most
  while IFS= read -r f; do
    rel=${f#"$onnx_data"/}
    cp "$f" "$work/seeds/tensorpb/$(echo "$rel" | tr / _)"
  done < <(find "$onnx_data" -name '*.pb' -size -4097c)
else
  echo "fuzz: no $onnx_data (scripts/install-deps.sh installs it): the onnx fuzzer" \
       "starts from the committed corpus and tests/onnx's models only, the tensorpb" \
       "fuzzer from its committed corpus"
fi
find tests -name '*.npy' -size -8193c -exec cp {} "$work/seeds/npy/" \;
cp tests/data/*.safetensors "$work/seeds/safetensors/"
"$bin/fuzz_seeds" "$work/seeds"
python3 tests/fuzz/make_dicts.py "$work"

# The committed corpus and regressions of harness h, as folders that exist.
inputs() {
  local d
  for d in "tests/fuzz/corpus/$1" "tests/fuzz/regressions/$1"; do
    [ -d "$d" ] && echo "$d"
  done
  return 0
}

# libFuzzer's options for harness h: inputs of at most 64 KiB for the two parsers of
# models, with their dictionaries.
options() {
  case "$1" in
    dsl | onnx) echo "-max_len=65536 -dict=$work/$1.dict" ;;
  esac
}

# merge: the committed corpus keeps only what the seeds above do not reach already (they
# are there at every run), from inputs of at most 8 KiB, counting edges but not how often
# each is taken (-use_counters=0): a small corpus that reaches everything the runs did.
# Inputs that crash are left out (and saved under crashes/<harness>/).
if [ "$mode" = merge ]; then
  for h in $harnesses; do
    tmp=$(mktemp -d "$work/merge-$h.XXXXXX")
    mkdir "$tmp/out" "$tmp/in"
    for f in "$work/seeds/$h"/*; do cp "$f" "$tmp/out/seed-$(basename "$f")"; done
    find "tests/fuzz/corpus/$h" "$work/corpus/$h" -type f -size -8193c \
      -exec cp {} "$tmp/in/" \; 2>/dev/null || true
    mkdir -p "$work/crashes/$h"
    # TMPDIR: the merge's control file goes there rather than to /tmp.
    # shellcheck disable=SC2046
    TMPDIR=$tmp "$bin/fuzz_$h" -merge=1 -use_counters=0 $(options "$h") "$tmp/out" "$tmp/in" \
      -artifact_prefix="$work/crashes/$h/" >"$work/merge-$h.log" 2>&1 || {
      echo "fuzz: merge of $h failed; see $work/merge-$h.log" >&2
      exit 1
    }
    rm -f "$tmp/out"/seed-*
    rm -rf "tests/fuzz/corpus/$h"
    mkdir -p "tests/fuzz/corpus/$h"
    cp "$tmp/out"/* "tests/fuzz/corpus/$h/" 2>/dev/null || true
    rm -rf "$tmp"
    echo "fuzz: $h: $(find "tests/fuzz/corpus/$h" -type f | wc -l) inputs," \
         "$(cat "tests/fuzz/corpus/$h"/* 2>/dev/null | wc -c) bytes in tests/fuzz/corpus/$h"
  done
  exit 0
fi

# UBSan's reports with the stack that led there.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
# One harness on one core; its verdict goes to $work/$h.status.
fuzz_one() {
  local h=$1 log=$work/$1.log start rss=2048
  start=$(date +%s)
  mkdir -p "$work/corpus/$h" "$work/crashes/$h"
  # shellcheck disable=SC2046
  if "$bin/fuzz_$h" "$work/corpus/$h" $(inputs "$h") "$work/seeds/$h" $(options "$h") \
       -max_total_time="$seconds" -timeout="$timeout" -rss_limit_mb="$rss" \
       -artifact_prefix="$work/crashes/$h/" -print_final_stats=1 >"$log" 2>&1; then
    echo "ok $(($(date +%s) - start))" >"$work/$h.status"
  else
    echo "failed $(($(date +%s) - start))" >"$work/$h.status"
  fi
}

# The harnesses, JOBS at a time (each is one process on one core).
running=0
for h in $harnesses; do
  rm -f "$work/$h.status"
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$h" &
  running=$((running + 1))
done
wait

failed=()
for h in $harnesses; do
  log=$work/$h.log
  read -r verdict secs <"$work/$h.status" || verdict=failed
  if [ "$verdict" = ok ]; then
    stats=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 | sed 's/^#[0-9]*[[:space:]]*DONE *//')
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz: $h: $runs runs in $secs s: $stats"
  else
    echo "fuzz: $h FAILED; the end of $log:" >&2
    tail -n 40 "$log" >&2
    failed+=("$h")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}; the inputs are in $work/crashes/<harness>/" \
       "(tests/fuzz/README.md says what to do with them)" >&2
  exit 1
fi
