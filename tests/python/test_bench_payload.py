#!/usr/bin/env python3
"""bench/bench.py reads a model.so's payload through a ctypes copy of runtime.h's
GpuccTrailer. When the trailer grew (version 2: the build info), the stale copy let the
runtime write past it into Python's heap, and the benchmark crashed inside torch. This
holds the copy to the runtime on a real model.so, with no GPU: the plan, the weights and
the build info it finds must be what `gpucc inspect --json` reports.

usage: test_bench_payload.py --gpucc build/gpucc --tmp DIR
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import bench  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--tmp", required=True)
    args = ap.parse_args()
    os.makedirs(args.tmp, exist_ok=True)
    so = os.path.join(args.tmp, "mlp.so")
    subprocess.run([args.gpucc, os.path.join(ROOT, "examples", "mlp.gir"), "--dim", "N=3",
                    "-o", so, "-q"], check=True)
    info = json.loads(subprocess.run([args.gpucc, "inspect", so, "--json"], check=True,
                                     capture_output=True, text=True).stdout)
    plan, weights, text = bench.ModelSo(so).payload()
    failures = []
    if weights.size != info["weights_bytes"]:
        failures.append("weights: %d bytes, inspect says %d" % (weights.size,
                                                                info["weights_bytes"]))
    if not plan.size or bytes(plan[:4]) == b"\x7fELF":
        failures.append("plan: %d bytes starting %r" % (plan.size, bytes(plan[:4])))
    want = "gpucc: %s\ncommand: %s\n" % (info["gpucc"], info["command"])
    if not text.startswith(want):
        failures.append("build info: %r, want it to begin %r" % (text[:80], want))
    for f in failures:
        print("test_bench_payload: " + f)
    if failures:
        return 1
    print("test_bench_payload: plan %d bytes, weights %d bytes, build info as inspect reads it"
          % (plan.size, weights.size))
    return 0


if __name__ == "__main__":
    sys.exit(main())
