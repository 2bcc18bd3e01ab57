#!/usr/bin/env python3
"""Where a compiled model's time goes, kernel by kernel, on the GPU (Nsight Compute).

Compiles MODEL (an .onnx or .gir) with `gpucc MODEL -o DIR/model.so` and the given flags,
runs one inference under `ncu --metrics gpu__time_duration.sum` (every kernel of the
model's CUDA graph is profiled on its own, so the times are each kernel's alone, without
the overlap or the launch gaps of a real replay), and prints the kernels grouped by name
with their launches, total microseconds and share, the largest first. cuBLASLt's GEMMs
appear under cuBLAS's kernel names. A run before the profiled one times the candidates
(GEMM algorithms, kernel variants) and caches its choices, which the profiled run loads:
the kernels are those the model.so chooses, and its timing at create is not profiled.
Not a benchmark: ncu serializes and flushes caches between kernels; the shares are what
it is good for. bench.py leaves a model's exports
and inputs in its --work folder (default /tmp/gpucc-bench/MODEL-bN/: ts17.onnx and the
other exports, in.NAME.npy) to point this at.

usage: kernel_times.py --gpucc build/gpucc MODEL [--input NAME=FILE.npy ...] [--top N]
                  [--work DIR] [-- gpucc flags such as --precision=bf16]
"""
import argparse
import collections
import csv
import io
import os
import subprocess
import sys
import tempfile

UNITS = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3,
         "s": 1e6, "second": 1e6}


def run(argv, env=None):
    r = subprocess.run(argv, capture_output=True, text=True,
                       env=dict(os.environ, **env) if env else None)
    if r.returncode:
        sys.exit("%s failed (%d):\n%s" % (" ".join(argv[:3]), r.returncode, r.stderr[-4000:]))
    return r.stdout


def kernel_times(csv_text):
    """{kernel name: [launches, microseconds]} from ncu's CSV of gpu__time_duration.sum."""
    start = csv_text.find('"ID"')
    if start < 0:
        sys.exit("ncu printed no metrics:\n" + csv_text[-4000:])
    times = collections.defaultdict(lambda: [0, 0.0])
    for row in csv.DictReader(io.StringIO(csv_text[start:])):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        us = float(row["Metric Value"].replace(",", "")) * UNITS[row["Metric Unit"]]
        t = times[row["Kernel Name"]]
        t[0] += 1
        t[1] += us
    return times


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("usage: ")[1])
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("model")
    ap.add_argument("--input", action="append", default=[])
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--work", default=None)
    args, flags = ap.parse_known_args()
    flags = [f for f in flags if f != "--"]
    work = args.work or tempfile.mkdtemp(prefix="gpucc-profile-")
    so = os.path.join(work, "model.so")
    run([args.gpucc, args.model, "-o", so] + flags)
    given = [a for i in args.input for a in ("--input", i)]
    # A first run without ncu times the candidates (GEMM algorithms, kernel variants) and
    # caches its choices in WORK/cache; the profiled run loads them from there, so that it
    # profiles the model's own launches, the chosen kernels, and not the timing at create.
    env = {"GPUCC_CACHE_DIR": os.path.join(work, "cache")}
    run([args.gpucc, "run", so, "--output-dir", os.path.join(work, "out")] + given, env)
    text = run(["ncu", "--csv", "--metrics", "gpu__time_duration.sum", args.gpucc, "run", so,
                "--output-dir", os.path.join(work, "out")] + given, env)
    times = kernel_times(text)
    total = sum(t[1] for t in times.values())
    launches = sum(t[0] for t in times.values())
    print("%d kernel launches, %.1f us in all (each kernel alone, under ncu)" % (launches, total))
    print("| kernel | launches | us | share |\n|---|---|---|---|")
    for name, (n, us) in sorted(times.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print("| %s | %d | %.1f | %.1f%% |" % (name[:90], n, us, 100 * us / total))


if __name__ == "__main__":
    main()
