#!/usr/bin/env python3
"""ONNX forms the backend suite does not cover, checked against numpy: Einsum's
matmul-like equations (ellipsis, implicit output, outer products, attention's
bhid,bhjd->bhij), the shape subgraph exporters write before a Reshape, which must
fold away at load (the test also checks that no Shape node is left in the IR), and
RMSNormalization (opset 23), which the Debian test data predates.

Usage: test_onnx_numpy.py --gpucc build/gpucc"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:  # scripts/install-deps.sh installs it; say so rather than pass
    print("test_onnx_numpy: SKIPPED: the onnx Python package is not installed")
    sys.exit(77)

EINSUMS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhid,bhjd->bhij", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]),
    ("...ij,jk", [(2, 3, 4), (4, 5)]),
    ("ij,kj", [(3, 4), (5, 4)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,i->", [(5,), (5,)]),
    ("ij,j->i", [(3, 4), (4,)]),
    ("ijk->kji", [(2, 3, 4)]),
    ("ijk->j", [(2, 3, 4)]),
    ("bik,bk->bi", [(2, 3, 4), (2, 4)]),
    ("ij,jk->ki", [(3, 4), (4, 5)]),
    ("abc,cd->abd", [(1, 3, 4), (4, 2)]),
]


def run(gpucc, model, inputs, work, extra=()):
    path = os.path.join(work, "m.onnx")
    onnx.save(model, path)
    argv = [gpucc, "run", path, "--cpu", "--output-dir", os.path.join(work, "out")] + list(extra)
    for name, arr in inputs.items():
        p = os.path.join(work, name + ".npy")
        np.save(p, arr)
        argv += ["--input", "%s=%s" % (name, p)]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        return None, p.stdout.strip()
    return np.load(os.path.join(work, "out", "y.npy")), None


def einsum_model(eq, shapes):
    names = ["a", "b"][:len(shapes)]
    want = np.einsum(eq, *[np.zeros(s) for s in shapes])
    node = helper.make_node("Einsum", names, ["y"], equation=eq)
    g = helper.make_graph(
        [node], "einsum",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, shapes)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, want.shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), names


def rms_norm_model():
    """RMSNormalization (opset 23) over the last two axes: gpucc's rms_norm."""
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=-2, epsilon=1e-3)
    g = helper.make_graph(
        [node], "rms",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 8])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])


def shape_chain_model():
    """y = reshape(x, [shape(x)[0], -1]) the way exporters spell it."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.array(0))),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
        helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    inits = [numpy_helper.from_array(np.array([0], dtype=np.int64), "ax"),
             numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus1")]
    g = helper.make_graph(nodes, "chain",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpucc", required=True)
    a = ap.parse_args()
    rng = np.random.default_rng(7)
    failures = 0
    with tempfile.TemporaryDirectory() as work:
        for eq, shapes in EINSUMS:
            model, names = einsum_model(eq, shapes)
            inputs = {n: rng.standard_normal(s).astype(np.float32) for n, s in zip(names, shapes)}
            want = np.einsum(eq, *[inputs[n].astype(np.float64) for n in names])
            got, err = run(a.gpucc, model, inputs, work)
            if err or got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-5):
                print("FAIL einsum %s: %s" % (eq, err or "got %s, want %s" % (got, want)))
                failures += 1
        # the exporters' shape chain: folded at load, right at run time
        model = shape_chain_model()
        path = os.path.join(work, "chain.onnx")
        onnx.save(model, path)
        p = subprocess.run([a.gpucc, path, "--dim", "N=2", "--emit=ir"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if p.returncode != 0 or "= shape(" in p.stdout or "gather(" in p.stdout or \
                "reshape(%x) {shape = [2, -1]}" not in p.stdout:
            print("FAIL shape chain: the IR still computes the shape, or failed:\n" + p.stdout)
            failures += 1
        x = rng.standard_normal((2, 3, 4)).astype(np.float32)
        got, err = run(a.gpucc, model, {"x": x}, work, ["--dim", "N=2"])
        if err or not np.array_equal(got, np.maximum(x.reshape(2, -1), 0)):
            print("FAIL shape chain run: %s" % (err or got))
            failures += 1
        x = rng.standard_normal((2, 3, 8)).astype(np.float32)
        sc = rng.standard_normal(8).astype(np.float32)
        x64 = x.astype(np.float64)
        want = x64 / np.sqrt((x64 * x64).mean(axis=(1, 2), keepdims=True) + 1e-3) * sc
        got, err = run(a.gpucc, rms_norm_model(), {"x": x, "s": sc}, work)
        if err or not np.allclose(got, want, rtol=1e-5, atol=1e-6):
            print("FAIL RMSNormalization: %s" % (err or "got %s, want %s" % (got, want)))
            failures += 1
    n = len(EINSUMS) + 3
    print("test_onnx_numpy: %d of %d checks passed" % (n - failures, n))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
