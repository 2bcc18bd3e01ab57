#!/usr/bin/env python3
"""How gpucc's time grows with the graph (standard library only).

Each case compiles a graph of n nodes and one of RATIO x n nodes with the same command,
and fails when the big one takes more than BOUND times the CPU time of the small one:
linear work gives about RATIO (less, since starting gpucc costs the same for both),
quadratic work RATIO^2. CPU time (user + system, of gpucc alone) rather than the clock,
and the least of a few runs, so that a busy machine does not fail the test; a run that
takes far too long is stopped and fails it.

The cases are the graphs that once took minutes or hours to compile: a long pointwise
chain (fusion, cloning masks, codegen's fuse groups, the verifier), a chain of casts
left unfused (codegen's kernels, the memory plan's placement in every order), a split
whose parts are all live at once (the memory plan), a chain of constants written in
reverse order (the ONNX loader's constant marking), a Sum of many inputs (the ONNX
loader's temporary names, and many fuse groups), an ONNX Split into many parts, a
model of many unknown ops (--check-ops' report, and `gpucc inspect`'s count of each op),
and a model listing many initializers as inputs (`gpucc inspect`'s inputs). The big
chain (100,000 nodes), Sum (20,000 inputs) and ONNX Split (5,000 parts) are sizes gpucc
must compile in seconds; this test times gpucc up to the plan, not NVRTC, whose time
grows with the code it compiles (fuse keeps each kernel under 256 nodes, so that stays
linear too).

usage: scaling.py --gpucc PATH --tmp DIR [CASE...]
       scaling.py --write NAME N OUT.gir       writes one of the .gir graphs below (GIR),
                                               for other tests
"""

import argparse
import os
import resource
import subprocess
import sys
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "onnx"))
import make_models  # noqa: E402

RATIO, BOUND, RUNS = 20, 100, 3


def gir_chain(n):
    """n pointwise nodes in a chain."""
    ops, lines, prev = ["relu", "neg", "tanh", "abs"], [], "x"
    for i in range(n):
        lines.append("  %%v%d = %s(%%%s)" % (i, ops[i % 4], prev))
        prev = "v%d" % i
    return "graph chain(%%x: f32[4, 16]) {\n%s\n  return %%%s\n}\n" % ("\n".join(lines), prev)


def gir_casts(n):
    """n casts in a chain, f32 to f16 and back, of 15 elements: unfused, no kernel can
    write over its input, and the arena cannot reach its lower bound (its offsets are
    multiples of 256 bytes), so the memory plan tries every order it has."""
    lines, prev = [], "x"
    for i in range(n):
        lines.append('  %%v%d = cast(%%%s) {to = "%s"}' % (i, prev, "f16" if i % 2 == 0 else "f32"))
        prev = "v%d" % i
    return "graph casts(%%x: f32[3, 5]) {\n%s\n  return %%%s\n}\n" % ("\n".join(lines), prev)


def gir_split(n, relu=True):
    """A split into n parts, each read by a relu whose output the graph returns: the parts
    are intermediates, all live from the split on (relu False: the graph returns them)."""
    parts = ", ".join("%%p%d" % i for i in range(n))
    lines = ["  %s = split(%%x) {axis = 0, split = [%s]}" % (parts, ", ".join(["1"] * n))]
    if relu:
        lines += ["  %%r%d = relu(%%p%d)" % (i, i) for i in range(n)]
    rets = ", ".join("%%%s%d" % ("r" if relu else "p", i) for i in range(n))
    return "graph split(%%x: f32[%d, 16]) {\n%s\n  return %s\n}\n" % (n, "\n".join(lines), rets)


def gir_concat_group(n):
    """A fuse group written by hand: a concat of n inputs, then a relu: one kernel that
    takes every input."""
    ins = ", ".join(["%x"] * n)
    return ("graph group(%%x: f32[1, 4]) {\n  %%c = concat(%s) {axis = 0, fuse = 1}\n"
            "  %%y = relu(%%c) {fuse = 1, kind = \"concat\"}\n  return %%y\n}\n" % ins)


def gir_huge_outputs(n):
    """n outputs of 2^48 bytes each (the most one value may have): more than the memory
    plan's 64-bit sums can hold, past 65,536 of them."""
    lines = ["  %%y%d = bitwise_not(%%x)" % i for i in range(n)]
    rets = ", ".join("%%y%d" % i for i in range(n))
    return "graph g(%%x: u8[%d]) {\n%s\n  return %s\n}\n" % (1 << 48, "\n".join(lines), rets)


GIR = {"chain": gir_chain, "huge_outputs": gir_huge_outputs, "casts": gir_casts,
       "split": gir_split, "split_outputs": lambda n: gir_split(n, relu=False),
       "concat_group": gir_concat_group}

# name: (builder, file extension, gpucc arguments, small n, gpucc's exit status)
CASES = {
    "chain": (gir_chain, "gir", ["--emit=plan"], 5000, 0),
    "casts_unfused": (gir_casts, "gir", ["--no-fuse", "--emit=plan"], 1000, 0),
    "split": (gir_split, "gir", ["--emit=plan"], 200, 0),
    "reverse_constants": (make_models.reverse_constants, "onnx", ["--passes=", "--emit=ir"],
                          1000, 0),
    "sum": (make_models.sum_inputs, "onnx", ["--emit=plan"], 1000, 0),
    "split_onnx": (make_models.split_parts, "onnx", ["--emit=plan"], 250, 0),
    "check_ops": (make_models.unknown_ops, "onnx", ["--check-ops"], 5000, 1),
    "inspect_ops": (make_models.unknown_ops, "onnx", ["inspect", "{model}"], 5000, 0),
    "inspect_inputs": (make_models.listed_initializers, "onnx", ["inspect", "{model}"], 5000, 0),
}


def cpu_time(cmd, status, timeout):
    """gpucc's CPU seconds for cmd, which must exit with `status`; None past `timeout`
    seconds of wall time (killed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return None
    if p.returncode != status:
        raise SystemExit("scaling.py: %s failed:\n%s" % (" ".join(cmd), err.decode(errors="replace")))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_case(name, gpucc, tmp):
    build, ext, args, n, status = CASES[name]
    cmds = []
    for size in (n, RATIO * n):
        path = os.path.join(tmp, "%s-%d.%s" % (name, size, ext))
        data = build(size)
        with open(path, "wb" if isinstance(data, bytes) else "w") as f:
            f.write(data)
        # the model's place in the arguments ({model}; first when not given), and an
        # output file for what --emit writes
        argv = [a.replace("{model}", path) for a in args] if "{model}" in args else [path] + args
        out = (["-o", os.path.join(tmp, "%s-%d.out" % (name, size))]
               if any(a.startswith("--emit") for a in args) else [])
        cmds.append([gpucc] + argv + out)
    small = min(cpu_time(cmds[0], status, 600) for _ in range(RUNS))
    small = max(small, 0.01)  # a clock tick, so that the bound is never zero
    limit = BOUND * small
    big = None
    for _ in range(RUNS):  # the first that keeps within the bound will do
        t0 = time.monotonic()
        # The bound is on CPU time; the wall-clock stop only ends a run far past it, so
        # a machine whose cores are shared several ways over (ctest -j on two cores,
        # beside other work) does not stop a run that keeps within the bound.
        t = cpu_time(cmds[1], status, max(60.0, 10 * limit))
        if t is None:
            print("FAIL %-18s n=%d: %.3fs, n=%d: stopped after %.0fs (bound %.1fs)" %
                  (name, n, small, RATIO * n, time.monotonic() - t0, limit))
            return False
        big = t if big is None else min(big, t)
        if big <= limit:
            break
    ok = big <= limit
    print("%s %-18s n=%d: %.3fs, n=%d: %.3fs, ratio %.1f (bound %d, linear %d)" %
          ("ok  " if ok else "FAIL", name, n, small, RATIO * n, big, big / small, BOUND, RATIO))
    return ok


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--write":
        _, _, name, size, out = sys.argv
        with open(out, "w") as f:
            f.write(GIR[name](int(size)))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--tmp", required=True, help="scratch folder for the graphs and outputs")
    ap.add_argument("cases", nargs="*", help="cases to run (default: all): %s" % ", ".join(CASES))
    args = ap.parse_args()
    os.makedirs(args.tmp, exist_ok=True)
    for name in args.cases:
        if name not in CASES:
            ap.error("unknown case '%s'" % name)
    failed = [c for c in args.cases or CASES if not run_case(c, os.path.abspath(args.gpucc), args.tmp)]
    if failed:
        print("scaling.py: superlinear: %s" % ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
