#!/usr/bin/env python3
"""Whether gpucc compiles two model files to the same program, up to names.

Two exports of one model (opset 17 and 11, folded and unfolded BatchNormalization) name
their values and number their nodes differently, so gpucc's output differs in comments,
kernel names and the plan's value names even when it launches the same kernels on the same
buffers. This compiles each file with `--emit=cuda` and `--emit=plan` (no GPU needed) and
compares the two texts after removing what only names: comments, IR value names (%x),
node numbers and kernel names (renumbered in order of appearance). What is left is the
kernels' code, their launch order and grids, the GEMM steps, every buffer's size and arena
offset. Equal: the two files run the same program, and so take the same GPU time.

usage: same_program.py --gpucc BIN A.onnx B.onnx [--precision bf16] [--lines 6]
Exit status 0 when both texts are the same, 1 when not (the first differing lines printed).
"""
import argparse
import difflib
import re
import subprocess
import sys


def normalized(text):
    """text without what only names values, nodes and kernels."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"%\"[^\"]*\"|%[^\s:,()\[\]]+", "%V", text)
    ids = {}
    text = re.sub(r"\bk\d+_[A-Za-z0-9_]*", lambda m: ids.setdefault(m.group(0), "K%d" % len(ids)), text)
    text = re.sub(r"node \d+", "node N", text)
    # the plan's group lines list their nodes by number: "anchor 125 conv", "transposed 33
    # transpose" (a number before a word other than "bytes", which is a size)
    text = re.sub(r"(anchor|prologue|epilogue|scores|softmax|output|through|transposed|nodes|,) "
                  r"\d+(?= (?!bytes)[a-z_]+)", r"\1 N", text)
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def emit(gpucc, model, what, precision):
    p = subprocess.run([gpucc, model, "--emit=" + what, "--precision=" + precision],
                       capture_output=True, text=True)
    if p.returncode:
        sys.exit("same_program.py: gpucc %s --emit=%s failed: %s" % (model, what, p.stderr.strip()))
    return normalized(p.stdout)


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("usage: ")[1])
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--lines", type=int, default=6, help="differing lines to print")
    a = ap.parse_args()
    same = True
    for what in ("cuda", "plan"):
        x, y = (emit(a.gpucc, m, what, a.precision) for m in (a.a, a.b))
        if x == y:
            print("%s: same (%d lines)" % (what, len(x)))
            continue
        same = False
        d = [l for l in difflib.unified_diff(x, y, lineterm="", n=0)
             if l[:1] in "+-" and l[:3] not in ("+++", "---")]
        print("%s: %d lines differ" % (what, len(d)))
        for l in d[:a.lines]:
            print("  " + l[:200])
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
