#!/usr/bin/env bash
# cmake --install of a built tree into a scratch prefix, then examples/jit.c built out of
# tree against it both ways a user would: find_package(gpucc) (tests/install/
# CMakeLists.txt) and pkg-config. Each jit runs examples/mlp.gir through the installed
# libgpucc: on a GPU it must run; without one it must fail with the runtime's message
# about the missing driver or device, which only the library's code prints.
#   test_install.sh BUILD_DIR SOURCE_DIR TMP_DIR [CFLAGS]
# CFLAGS: what the programs need to link a libgpucc built with sanitizers.
set -euo pipefail
build=$1 src=$2 tmp=$3 cflags=${4:-}
rm -rf "$tmp" && mkdir -p "$tmp"
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log"
for f in bin/gpucc include/gpucc/runtime.h include/gpucc/compiler/gpucc.h \
         include/gpucc/ir/ir.h include/gpucc/ir/ops.def include/gpucc/frontends/frontends.h; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed"; exit 1; }
done
libdir=$(dirname "$(find "$prefix" -name 'libgpucc.so' | head -1)")
[ -n "$libdir" ] && [ -f "$libdir/pkgconfig/gpucc.pc" ] && [ -f "$libdir/cmake/gpucc/gpuccConfig.cmake" ] ||
  { echo "FAIL: libgpucc.so, gpucc.pc or gpuccConfig.cmake missing"; find "$prefix"; exit 1; }

cmake -S "$src/tests/install" -B "$tmp/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
      -DGPUCC_EXAMPLES="$src/examples" -DCMAKE_C_FLAGS="$cflags" > "$tmp/consumer.log" 2>&1 ||
  { cat "$tmp/consumer.log"; echo "FAIL: find_package(gpucc)"; exit 1; }
cmake --build "$tmp/consumer" > "$tmp/consumer-build.log" 2>&1 ||
  { cat "$tmp/consumer-build.log"; echo "FAIL: building against gpucc::gpucc"; exit 1; }

export PKG_CONFIG_PATH=$libdir/pkgconfig
pkg-config --exists gpucc || { echo "FAIL: pkg-config finds no gpucc"; exit 1; }
# shellcheck disable=SC2086 # cflags and pkg-config's output are lists of flags
cc -std=c11 $cflags "$src/examples/jit.c" $(pkg-config --cflags --libs gpucc) -o "$tmp/jit-pc" ||
  { echo "FAIL: building with pkg-config"; exit 1; }

for jit in "$tmp/consumer/jit" "$tmp/jit-pc"; do
  set +e
  LD_LIBRARY_PATH=$libdir LD_BIND_NOW=1 "$jit" "$src/examples/mlp.gir" > "$tmp/out" 2> "$tmp/err"
  rc=$?
  set -e
  if [ $rc -eq 0 ]; then
    grep -q . "$tmp/out" || { echo "FAIL: $jit printed no output"; exit 1; }
    echo "ok: $jit ran examples/mlp.gir on the GPU"
  elif grep -qiE "driver|no CUDA|device" "$tmp/err"; then
    echo "ok: $jit ran the installed library; skipped running the model: no GPU ($(head -c 120 "$tmp/err"))"
  else
    cat "$tmp/err"; echo "FAIL: $jit exited $rc"; exit 1
  fi
done
"$tmp/consumer/run_model" > "$tmp/out" 2>&1 || true
grep -q usage "$tmp/out" || { cat "$tmp/out"; echo "FAIL: run_model built against gpucc::runtime"; exit 1; }
echo "PASS"
