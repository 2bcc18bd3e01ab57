#!/usr/bin/env python3
"""The exporters' spellings of one model compile to the same kernels (issue 24, point 6).

tests/models/spellings/ holds small models exported many ways (export_spellings.py: the
TorchScript exporter at opsets 11, 13 and 17, each with and without constant folding,
and the dynamo exporter), named <model>-<export>.onnx. For each export this runs
`gpucc F.onnx -v` (the default pipeline) and reads the kernels the graph launches after
the last pass from its report ("kernels A -> B"); `--no-fuse` runs the pipeline without
fusion, whose counts are printed beside. An export fails when its count is more than
10% above the fewest of its model's exports (the issue's bound). Whether each export
computes what PyTorch did is test_models.py's part (ctest runs it on the same folder).

Prints one line per export, then "N passed, M failed"; exits 1 on any failure.

usage: test_spellings.py --gpucc PATH [--data DIR] [--slack 0.1]
"""
import argparse
import collections
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LINE = re.compile(r"^(\w+): \d+ changes, .*kernels (\d+) -> (\d+)")


def kernels(gpucc, path, extra=()):
    """(kernels before the passes, after them), or (None, why)."""
    p = subprocess.run([gpucc, path, "-v"] + list(extra), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, timeout=300)
    text = p.stderr.decode("utf-8", "replace")
    if p.returncode != 0:
        return None, "gpucc exited %d: %s" % (p.returncode, text.strip()[-300:])
    counts = [(int(m.group(2)), int(m.group(3))) for m in map(LINE.match, text.splitlines()) if m]
    if not counts:
        return None, "no 'kernels A -> B' line in gpucc -v's report"
    return (counts[0][0], counts[-1][1]), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--data", default=os.path.join(HERE, "spellings"))
    ap.add_argument("--slack", type=float, default=0.1)
    a = ap.parse_args()
    models = collections.OrderedDict()
    for f in sorted(os.listdir(a.data)):
        if f.endswith(".onnx"):
            models.setdefault(f[:-5].rsplit("-", 1)[0], []).append(f)
    passed = failed = 0
    for model, files in models.items():
        rows = []
        for f in files:
            path = os.path.join(a.data, f)
            fused, why = kernels(a.gpucc, path)
            unfused, why2 = kernels(a.gpucc, path, ["--no-fuse"])
            rows.append((f[:-5], fused, unfused, why or why2))
        best = min((r[1][1] for r in rows if r[1]), default=None)
        for name, fused, unfused, why in rows:
            if why:
                print("%s: FAILED: %s" % (name, why))
                failed += 1
                continue
            ok = fused[1] <= best * (1 + a.slack)
            print("%s: %s: %d kernels (fewest of %s: %d; %d before the passes, %d unfused)"
                  % (name, "passed" if ok else "FAILED", fused[1], model, best, fused[0],
                     unfused[1]))
            passed += ok
            failed += not ok
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
