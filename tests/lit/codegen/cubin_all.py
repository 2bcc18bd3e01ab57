#!/usr/bin/env python3
"""Every generated kernel compiles: NVRTC over every graph of the repository.

For each .gir file under examples/ and tests/ that roundtrip.py treats as a valid graph
(not tests/lit/errors/, not a test that expects gpucc to fail), run
`gpucc F --emit=cubin -o T` (default pipeline, then codegen, then NVRTC for sm_90).
Symbolic dims are bound to 2 (`--dim N=2`), one by one, as codegen names them. A graph
with an op or dtype that has no GPU kernel yet is skipped, and listed; any other failure
fails the test. The examples must all compile. Then the same for the real models of
tests/models/data/*.onnx: every one whose ops all have kernels compiles to a cubin, and
compiles again with each lowered --precision (tf32, bf16, fp16, and fp8 calibrated on the
model's recorded inputs).
Prints one line per file and a summary.

usage: cubin_all.py --gpucc PATH [--tmp DIR] [--shard K/N]

ctest runs it in shards (codegen_cubin/K, `--shard K/N`: every Nth file from the Kth, with
all of a model's precisions), so the cores share the work.
"""

import argparse
import glob
import os
import re
import subprocess
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests"))
from roundtrip import expects_failure, find_graphs  # noqa: E402

UNSUPPORTED = re.compile(r"has no GPU kernel yet|has no GPU support yet")
UNBOUND = re.compile(r"bind (\S+) with --dim")


def compile_graph(gpucc, path, out, extra=()):
    """(status, message): 'ok', 'skip' or 'fail'."""
    dims = []
    for _ in range(16):
        args = [gpucc, path, "--emit=cubin", "-o", out] + [f"--dim={d}=2" for d in dims] + \
            list(extra)
        r = subprocess.run(args, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=600)
        err = r.stderr.decode("utf-8", "replace").strip()
        if r.returncode == 0:
            if not os.path.isfile(out) or os.path.getsize(out) == 0:
                return "fail", "exit 0 but no cubin"
            return "ok", ""
        m = UNBOUND.search(err)
        if m and m.group(1) not in dims:
            dims.append(m.group(1))
            continue
        if UNSUPPORTED.search(err):
            return "skip", err.splitlines()[0]
        return "fail", err
    return "fail", "too many symbolic dims"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--tmp", default="/tmp/gpucc-cubin-all")
    ap.add_argument("--shard", default="1/1", help="K/N: only every Nth file from the Kth")
    args = ap.parse_args()
    k, n = (int(x) for x in args.shard.split("/"))
    if not 1 <= k <= n:
        ap.error(f"--shard {args.shard}: K must be in 1..N")
    os.makedirs(args.tmp, exist_ok=True)
    counts = {"ok": 0, "skip": 0, "fail": 0}
    models = sorted(glob.glob(os.path.join(REPO_ROOT, "tests", "models", "data", "*.onnx")))
    models = [os.path.relpath(m, REPO_ROOT) for m in models]
    graphs = [g for g in find_graphs() if not expects_failure(g)]
    mine = set((graphs + models)[k - 1::n])
    graphs = [g for g in graphs if g in mine]
    models = [m for m in models if m in mine]
    todo = [(p, ()) for p in graphs + models]
    todo += [(m, ("--precision=" + p,)) for m in models for p in ("tf32", "bf16", "fp16")]
    for m in models:  # fp8, calibrated on the recorded inputs (data/<model>.in.<name>.npy)
        model = os.path.basename(m)[:-5].rsplit("-", 1)[0]
        calib = sorted(glob.glob(os.path.join(os.path.dirname(m), model + ".in.*.npy")))
        todo.append((m, ("--precision=fp8",) + tuple(
            f"--calibrate={os.path.basename(c)[len(model) + 4:-4]}={c}" for c in calib)))
    supported = set()
    for i, (path, extra) in enumerate(todo):
        status, msg = compile_graph(args.gpucc, path, os.path.join(args.tmp, f"{i}.cubin"),
                                    extra)
        if status == "fail" or (status == "skip" and path.startswith("examples" + os.sep)):
            status = "fail"
        if status == "skip" and path in supported:  # f32 compiles: so must the lowering
            status = "fail"
        if status == "ok" and not extra:
            supported.add(path)
        counts[status] += 1
        print(f"{status.upper():4} {path}{' ' + extra[0] if extra else ''}"
              f"{': ' + msg if msg else ''}")
    print(f"{counts['ok']} compiled, {counts['skip']} skipped (no GPU kernel yet), "
          f"{counts['fail']} failed")
    return 1 if counts["fail"] or counts["ok"] == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
