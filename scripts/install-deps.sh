#!/usr/bin/env bash
# Installs what gpucc needs to build and test on a fresh Debian/Ubuntu machine (one with
# the CUDA toolkit, which this script leaves alone): cmake, make, gcc, flex, bison,
# FileCheck and not (llvm-N-tools), python3 with numpy and pytest, protobuf-c for the ONNX
# frontend, for the ONNX conformance test Debian's libonnx-testdata and python3's
# onnx package, for the serving test ray[serve] (pip, into a python3 that is not the
# system's), and for the fuzzers (scripts/fuzz.sh) clang with its libFuzzer and
# sanitizer runtimes (libclang-rt-N-dev). Installs only what is missing, so running it
# again is a no-op; uses sudo only when not root.
set -euo pipefail

missing=()
need_pkg() { missing+=("$1"); }
have() { command -v "$1" >/dev/null 2>&1; }

have cmake || need_pkg cmake
have make || need_pkg make
have gcc || need_pkg gcc
have flex || need_pkg flex
have bison || need_pkg bison
have python3 || need_pkg python3
if ! have python3 || ! python3 -c 'import numpy' >/dev/null 2>&1; then
  need_pkg python3-numpy
fi
have protoc-c || need_pkg protobuf-c-compiler
have pkg-config || need_pkg pkg-config
[ -f /usr/include/openssl/evp.h ] || need_pkg libssl-dev
[ -f /usr/include/protobuf-c/protobuf-c.h ] || need_pkg libprotobuf-c-dev
[ -d /usr/share/libonnx-testdata/data ] || need_pkg libonnx-testdata

# clang for the fuzzers. Debian's clang links -fsanitize=fuzzer only with the runtimes of
# its version, libclang-rt-N-dev, which it merely recommends (and older releases ship
# inside libclang-common-N-dev): whether a fuzzer links is the test.
have clang || need_pkg clang
fuzzer_links() {
  have clang || return 1
  local dir rc
  dir=$(mktemp -d) || return 1
  printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) {\n'\
'  (void)d; (void)n; return 0;\n}\n' |
    clang -x c - -fsanitize=fuzzer,address,undefined -o "$dir/f" >/dev/null 2>&1
  rc=$?
  rm -rf "$dir"
  return $rc
}
# The libclang-rt-N-dev of the installed clang, when the release has it.
clang_rt_pkg() {
  local n
  n=$(clang --version 2>/dev/null | sed -n 's/.*clang version \([0-9][0-9]*\).*/\1/p' | head -n 1)
  [ -n "$n" ] && apt-cache show "libclang-rt-$n-dev" >/dev/null 2>&1 && echo "libclang-rt-$n-dev"
  return 0
}
want_clang_rt=0
if have clang && ! fuzzer_links; then
  want_clang_rt=1
fi

# Python modules the tests need (onnx; pytest for python/tests): Debian's python3-MODULE
# serves the system python3 (whose pip refuses to install: PEP 668); any other python3
# (pyenv, a venv) gets them from PyPI after apt (python_pip_modules).
pip_modules=()
system_python3() { python3 -c 'import sys; sys.exit(sys.prefix != "/usr")' >/dev/null 2>&1; }
need_python_module() { # MODULE: its import name and its package's name alike
  if ! have python3; then
    need_pkg "python3-$1"
  elif ! python3 -c "import $1" >/dev/null 2>&1; then
    if system_python3; then
      need_pkg "python3-$1"
    else
      pip_modules+=("$1")
    fi
  fi
}
need_python_module onnx
need_python_module pytest

# FileCheck and not: any LLVM version will do (tests/CMakeLists.txt looks in PATH and
# in every /usr/lib/llvm-*/bin).
have_llvm_tools() {
  if have FileCheck && have not; then return 0; fi
  local d
  for d in /usr/lib/llvm-*/bin; do
    [ -x "$d/FileCheck" ] && [ -x "$d/not" ] && return 0
  done
  return 1
}
want_llvm_tools=0
have_llvm_tools || want_llvm_tools=1

# A python3 that is not the system's (pyenv, a venv) does not see python3-numpy: give it
# numpy from PyPI.
python_numpy() {
  python3 -c 'import numpy' >/dev/null 2>&1 && return 0
  echo "install-deps: $(command -v python3) cannot import numpy; installing it with pip"
  python3 -m pip install -q numpy || {
    echo "install-deps: could not install numpy for $(command -v python3)" >&2
    exit 1
  }
}

python_pip_modules() {
  local m
  for m in ${pip_modules[@]+"${pip_modules[@]}"}; do
    echo "install-deps: $(command -v python3) cannot import $m; installing it with pip"
    python3 -m pip install -q "$m" || {
      echo "install-deps: could not install $m for $(command -v python3)" >&2
      exit 1
    }
  done
}

# Optional modules: onnxruntime, the second oracle of tests/models (issue 3), and Ray
# Serve, the serving engine of examples/serving and the ctest "serving" (30 s and 500 MB
# with its dependencies). Debian has neither, and pip may not install into the system
# python3 (PEP 668): there, as where pip has no wheel for this python3, the test says
# what it skips.
python_optional() { # IMPORT-NAME PACKAGE WHAT-IS-SKIPPED
  python3 -c "import $1" >/dev/null 2>&1 && return 0
  if system_python3; then
    echo "install-deps: note: not installing $2 into the system python3; $3"
    return 0
  fi
  echo "install-deps: $(command -v python3) cannot import $1; installing $2 with pip"
  python3 -m pip install -q "$2" || echo "install-deps: note: pip could not install $2 here; $3"
}
python_optional_modules() {
  python_optional onnxruntime onnxruntime "tests/models will skip that oracle"
  python_optional ray.serve 'ray[serve]' "the serving test will be skipped"
}

# After clang is installed: its runtimes, if a fuzzer does not link yet.
clang_rt() {
  fuzzer_links && return 0
  local pkg
  pkg=$(clang_rt_pkg)
  if [ -z "$pkg" ]; then
    echo "install-deps: clang cannot link a libFuzzer harness, and there is no" \
         "libclang-rt-N-dev for it here" >&2
    exit 1
  fi
  echo "install-deps: installing $pkg (libFuzzer for clang)"
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends "$pkg"
}

if [ ${#missing[@]} -eq 0 ] && [ $want_llvm_tools -eq 0 ] && [ $want_clang_rt -eq 0 ]; then
  python_pip_modules
  python_optional_modules
  echo "install-deps: everything gpucc needs is installed"
  exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif have sudo; then
  SUDO=(sudo)
else
  echo "install-deps: not root and no sudo; please install: ${missing[*]} llvm-N-tools" >&2
  exit 1
fi
if ! have apt-get; then
  echo "install-deps: no apt-get here; please install: ${missing[*]} llvm-N-tools" >&2
  exit 1
fi

export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q

if [ $want_llvm_tools -eq 1 ]; then
  # llvm-14-tools where the release has it, else the newest llvm-N-tools it has.
  if apt-cache show llvm-14-tools >/dev/null 2>&1; then
    missing+=(llvm-14-tools)
  else
    pkg=$(apt-cache search --names-only '^llvm-[0-9]+-tools$' | awk '{print $1}' | sort -V | tail -n 1)
    if [ -z "$pkg" ]; then
      echo "install-deps: no llvm-N-tools package found (FileCheck and not are needed)" >&2
      exit 1
    fi
    missing+=("$pkg")
  fi
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
clang_rt

python_numpy
python_pip_modules
python_optional_modules
echo "install-deps: done"
