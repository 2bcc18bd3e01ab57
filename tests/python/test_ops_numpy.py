#!/usr/bin/env python3
"""Every op of ir/ops.def through `gpucc run --cpu`, against numpy.

For each op: a small .gir graph in a temp folder, its inputs saved as .npy, run with
`$GPUCC run FILE --cpu --input NAME=PATH --output-dir DIR`, and each output compared with
numpy (computed in float64, then cast to the output type): rtol 1e-6 / atol 1e-6 for
floats, exact for integers and bool. The op list is parsed from ops.def, so an op added
there without a case here fails. Prints one line per op and "N passed, M failed".

usage: test_ops_numpy.py [GPUCC]      (or the GPUCC environment variable)
"""
import math
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RNG = np.random.default_rng(0)

DTYPES = {np.float64: "f64", np.float32: "f32", np.float16: "f16", np.int64: "i64",
          np.int32: "i32", np.int16: "i16", np.int8: "i8", np.uint8: "u8", np.bool_: "bool"}


def ops_in_table():
    text = open(os.path.join(ROOT, "ir", "ops.def")).read()
    return re.findall(r'^OP\(\s*\w+\s*,\s*"(\w+)"', text, re.M)


def gir_type(a):
    return "%s[%s]" % (DTYPES[a.dtype.type], ", ".join(str(d) for d in a.shape))


def rand(*shape, dtype=np.float32, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, size=shape).astype(dtype)


def f64(a):
    return np.asarray(a, dtype=np.float64)


erf = np.vectorize(math.erf, otypes=[np.float64])


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def int_div(a, b):
    """Truncating integer division, 0 where b is 0 (the executor's definition), exact
    through Python ints."""
    a, b = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    q = [0 if y == 0 else abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
         for x, y in zip(a.ravel().tolist(), b.ravel().tolist())]
    return np.array(q, dtype=np.int64).reshape(a.shape)


def layer_norm(x, scale, bias, axis, eps):
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * scale + bias


def onnx_slice(x, starts, ends, axes, steps):
    idx = [slice(None)] * x.ndim
    for s, e, a, k in zip(starts, ends, axes, steps):
        idx[a] = slice(s, e, k)
    return x[tuple(idx)]


class Case:
    """One graph: a call of `op` on inputs (a dict name -> array), with attrs text.
    ref(*float64 inputs) gives the outputs; out_dtypes their numpy dtypes."""

    def __init__(self, op, inputs, ref, attrs="", out_dtypes=None, nout=1, name=None):
        self.op, self.inputs, self.ref, self.attrs = op, inputs, ref, attrs
        self.nout = nout
        self.out_dtypes = out_dtypes
        self.name = name or op


def unary(op, ref, x=None, attrs="", out=None):
    x = rand(2, 3) if x is None else x
    return Case(op, {"x": x}, ref, attrs, [out or x.dtype.type])


def binary(op, ref, a=None, b=None, out=None):
    a = rand(2, 3) if a is None else a
    b = rand(3) if b is None else b
    return Case(op, {"a": a, "b": b}, ref, "", [out or a.dtype.type])


def cases():
    pos = rand(2, 3, lo=0.1, hi=4.0)
    ints = np.array([[-7, 5, 0], [9, -3, 2]], dtype=np.int32)
    bools = np.array([[True, False, True], [False, False, True]])
    bools_b = np.array([False, True, True])
    halves = np.array([[0.5, 1.5, 2.5], [-0.5, -1.5, 3.7]], dtype=np.float32)
    x234 = rand(2, 3, 4)
    c = {
        "identity": [unary("identity", lambda x: x)],
        "neg": [unary("neg", lambda x: -x), unary("neg", lambda x: -x, x=ints)],
        "abs": [unary("abs", np.abs), unary("abs", np.abs, x=ints)],
        "sign": [unary("sign", np.sign), unary("sign", np.sign, x=ints)],
        "exp": [unary("exp", np.exp)],
        "log": [unary("log", np.log, x=pos)],
        "sqrt": [unary("sqrt", np.sqrt, x=pos)],
        "rsqrt": [unary("rsqrt", lambda x: 1 / np.sqrt(x), x=pos)],
        "reciprocal": [unary("reciprocal", lambda x: 1 / x, x=pos)],
        "floor": [unary("floor", np.floor)],
        "ceil": [unary("ceil", np.ceil)],
        "round": [unary("round", np.round, x=halves)],
        "sin": [unary("sin", np.sin)],
        "cos": [unary("cos", np.cos)],
        "tanh": [unary("tanh", np.tanh)],
        "erf": [unary("erf", erf)],
        "sigmoid": [unary("sigmoid", sigmoid)],
        "relu": [unary("relu", lambda x: np.maximum(x, 0)),
                 unary("relu", lambda x: np.maximum(x, 0), x=ints)],
        "gelu": [unary("gelu", lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2)))),
                 unary("gelu", lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) *
                                                              (x + 0.044715 * x ** 3))),
                       attrs='{approximate = "tanh"}')],
        "silu": [unary("silu", lambda x: x * sigmoid(x))],
        "softplus": [unary("softplus", lambda x: np.logaddexp(0, x),
                           x=np.array([[-30, -1, 0], [1, 30, 100]], dtype=np.float32))],
        "leaky_relu": [unary("leaky_relu", lambda x: np.where(x < 0, 0.1 * x, x),
                             attrs="{alpha = 0.1}")],
        "elu": [unary("elu", lambda x: np.where(x < 0, 0.5 * (np.exp(x) - 1), x),
                      attrs="{alpha = 0.5}")],
        "hard_sigmoid": [unary("hard_sigmoid", lambda x: np.clip(0.2 * x + 0.5, 0, 1),
                               x=rand(2, 3, lo=-4, hi=4))],
        "hard_swish": [unary("hard_swish", lambda x: x * np.clip(x / 6 + 0.5, 0, 1),
                             x=rand(2, 3, lo=-5, hi=5))],
        "clip": [unary("clip", lambda x: np.clip(x, -0.5, 1.0),
                       attrs="{min = -0.5, max = 1.0}"),
                 unary("clip", lambda x: np.clip(x, -2, 3), x=ints,
                       attrs="{min = -2.5, max = 3.0}")],
        "not": [unary("not", np.logical_not, x=bools)],
        "cast": [unary("cast", lambda x: np.trunc(x), attrs='{to = "i32"}', out=np.int32,
                       x=rand(2, 3, lo=-9, hi=9)),
                 unary("cast", lambda x: x, x=ints, attrs='{to = "f32"}', out=np.float32),
                 unary("cast", lambda x: x != 0, attrs='{to = "bool"}', out=np.bool_,
                       x=np.array([[0, -0.0, 0.25], [1, -3, 0]], dtype=np.float32))],
        "add": [binary("add", np.add),
                binary("add", np.add, a=ints, b=np.array([1, 2, 3], dtype=np.int32))],
        "sub": [binary("sub", np.subtract)],
        "mul": [binary("mul", np.multiply)],
        "div": [binary("div", np.divide, b=rand(3, lo=0.5, hi=2)),
                binary("div", int_div, a=ints, b=np.array([2, -2, 0], dtype=np.int32))],
        "pow": [binary("pow", np.power, a=pos, b=rand(3))],
        "max": [binary("max", np.maximum)],
        "min": [binary("min", np.minimum),
                binary("min", np.minimum, a=ints, b=np.array([0, 1, 2], dtype=np.int32))],
        "equal": [binary("equal", np.equal, a=ints, b=np.array([-7, 3, 2], dtype=np.int32),
                         out=np.bool_)],
        "less": [binary("less", np.less, out=np.bool_)],
        "less_equal": [binary("less_equal", np.less_equal, a=ints,
                              b=np.array([-7, 3, 2], dtype=np.int32), out=np.bool_)],
        "greater": [binary("greater", np.greater, out=np.bool_)],
        "greater_equal": [binary("greater_equal", np.greater_equal, a=ints,
                                 b=np.array([-7, 3, 2], dtype=np.int32), out=np.bool_)],
        "and": [binary("and", np.logical_and, a=bools, b=bools_b)],
        "or": [binary("or", np.logical_or, a=bools, b=bools_b)],
        "xor": [binary("xor", np.logical_xor, a=bools, b=bools_b)],
        "where": [Case("where", {"c": bools, "a": rand(2, 3), "b": rand(3)},
                       lambda c, a, b: np.where(c != 0, a, b), out_dtypes=[np.float32])],
        "matmul": [Case("matmul", {"a": x234, "b": rand(4, 5)}, np.matmul,
                        out_dtypes=[np.float32]),
                   Case("matmul", {"a": rand(4), "b": rand(2, 4, 3)}, np.matmul,
                        out_dtypes=[np.float32]),
                   Case("matmul", {"a": rand(2, 1, 3, 4), "b": rand(3, 4, 2)}, np.matmul,
                        out_dtypes=[np.float32])],
        "reduce_sum": [unary("reduce_sum", lambda x: x.sum(axis=1), x=x234,
                             attrs="{axes = [1], keepdims = 0}"),
                       unary("reduce_sum", lambda x: x.sum(keepdims=True), x=ints)],
        "reduce_mean": [unary("reduce_mean", lambda x: x.mean(axis=(0, 2), keepdims=True),
                              x=x234, attrs="{axes = [0, -1]}")],
        "reduce_max": [unary("reduce_max", lambda x: x.max(axis=2), x=x234,
                             attrs="{axes = [2], keepdims = 0}")],
        "reduce_min": [unary("reduce_min", lambda x: x.min(keepdims=True), x=x234)],
        "reduce_prod": [unary("reduce_prod", lambda x: x.prod(axis=0), x=x234,
                              attrs="{axes = [0], keepdims = 0}")],
        "argmax": [unary("argmax", lambda x: x.argmax(axis=1), x=x234,
                         attrs="{axis = 1, keepdims = 0}", out=np.int64),
                   unary("argmax", lambda x: x.argmax(axis=0)[None], out=np.int64,
                         x=np.array([[1, 5, 2], [1, 5, 7]], dtype=np.int32))],
        "softmax": [unary("softmax", lambda x: np.exp(x - x.max(axis=2, keepdims=True)) /
                          np.exp(x - x.max(axis=2, keepdims=True)).sum(axis=2, keepdims=True),
                          x=x234 * 10)],
        "log_softmax": [unary("log_softmax", lambda x: x - x.max(axis=1, keepdims=True) -
                              np.log(np.exp(x - x.max(axis=1, keepdims=True))
                                     .sum(axis=1, keepdims=True)),
                              x=x234 * 10, attrs="{axis = 1}")],
        "layer_norm": [Case("layer_norm", {"x": x234, "s": rand(4), "b": rand(4)},
                            lambda x, s, b: layer_norm(x, s, b, 2, 1e-5),
                            out_dtypes=[np.float32]),
                       Case("layer_norm", {"x": x234, "s": rand(3, 4)},
                            lambda x, s: layer_norm(x, s, 0, 1, 1e-3),
                            attrs="{axis = 1, epsilon = 0.001}", out_dtypes=[np.float32])],
        "reshape": [unary("reshape", lambda x: x.reshape(2, 12), x=x234,
                          attrs="{shape = [0, -1]}")],
        "transpose": [unary("transpose", lambda x: x.transpose(1, 2, 0), x=x234,
                            attrs="{perm = [1, 2, 0]}"),
                      unary("transpose", lambda x: x.T, x=x234)],
        "squeeze": [unary("squeeze", lambda x: x.reshape(2, 3), x=rand(2, 1, 3),
                          attrs="{axes = [1]}")],
        "unsqueeze": [unary("unsqueeze", lambda x: x[None, :, :, None], x=ints,
                            attrs="{axes = [0, 3]}")],
        "flatten": [unary("flatten", lambda x: x.reshape(6, 4), x=x234,
                          attrs="{axis = 2}")],
        "expand": [unary("expand", lambda x: np.broadcast_to(x, (2, 2, 3)), x=rand(2, 1, 3),
                         attrs="{shape = [2, 2, 3]}")],
        "concat": [Case("concat", {"a": x234, "b": rand(2, 1, 4), "c": rand(2, 2, 4)},
                        lambda a, b, c: np.concatenate([a, b, c], axis=1),
                        attrs="{axis = 1}", out_dtypes=[np.float32])],
        "slice": [unary("slice", lambda x: onnx_slice(x, [-1, 1], [-100, 100], [2, 0],
                                                      [-2, 1]),
                        x=x234,
                        attrs="{starts = [-1, 1], ends = [-100, 100], axes = [2, 0], "
                              "steps = [-2, 1]}"),
                  unary("slice", lambda x: x[:, 1:3], x=ints,
                        attrs="{starts = [1], ends = [3], axes = [1]}")],
        "split": [Case("split", {"x": x234}, lambda x: (x[:, :, :1], x[:, :, 1:]),
                       attrs="{axis = 2, split = [1, 3]}", out_dtypes=[np.float32] * 2,
                       nout=2)],
        "gather": [Case("gather", {"x": x234, "i": np.array([[2, -1], [0, 1]], dtype=np.int64)},
                        lambda x, i: np.take(x, i.astype(np.int64), axis=1),
                        attrs="{axis = 1}", out_dtypes=[np.float32]),
                   Case("gather", {"x": ints, "i": np.array([-2, 1, 1], dtype=np.int32)},
                        lambda x, i: np.take(x, i.astype(np.int64), axis=0),
                        out_dtypes=[np.int32])],
    }
    return c


def run_case(gpucc, case, tmp, k):
    folder = os.path.join(tmp, "%s_%d" % (case.name, k))
    os.makedirs(folder)
    params = ", ".join("%%%s: %s" % (n, gir_type(a)) for n, a in case.inputs.items())
    outs = ["y%d" % i for i in range(case.nout)]
    args = ", ".join("%" + n for n in case.inputs)
    lhs = ", ".join("%" + o for o in outs)
    text = "graph t(%s) {\n  %s = %s(%s)%s\n  return %s\n}\n" % (
        params, lhs, case.op, args, " " + case.attrs if case.attrs else "", lhs)
    gir = os.path.join(folder, "t.gir")
    with open(gir, "w") as f:
        f.write(text)
    cmd = [gpucc, "run", gir, "--cpu", "--output-dir", os.path.join(folder, "out")]
    for n, a in case.inputs.items():
        path = os.path.join(folder, n + ".npy")
        np.save(path, a)
        cmd += ["--input", "%s=%s" % (n, path)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        return "gpucc exited %d: %s\n%s" % (p.returncode, p.stderr.strip(), text)
    want = case.ref(*[f64(a) for a in case.inputs.values()])
    if case.nout == 1:
        want = (want,)
    for o, w, dt in zip(outs, want, case.out_dtypes):
        w = np.asarray(w)
        w = (w != 0) if dt is np.bool_ else w.astype(dt)
        got = np.load(os.path.join(folder, "out", o + ".npy"))
        if got.dtype != w.dtype or got.shape != w.shape:
            return "%%%s: got %s%s, expected %s%s\n%s" % (o, got.dtype, list(got.shape),
                                                         w.dtype, list(w.shape), text)
        if np.issubdtype(w.dtype, np.floating):
            ok = np.allclose(got.astype(np.float64), w.astype(np.float64), rtol=1e-6,
                             atol=1e-6, equal_nan=True)
        else:
            ok = np.array_equal(got, w)
        if not ok:
            return "%%%s differs:\ngot\n%s\nexpected\n%s\n%s" % (o, got, w, text)
    return None


def main():
    gpucc = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("GPUCC")
    if not gpucc:
        print("usage: test_ops_numpy.py GPUCC (or set GPUCC)", file=sys.stderr)
        return 2
    table = cases()
    passed = failed = 0
    with tempfile.TemporaryDirectory(prefix="gpucc_ops_") as tmp:
        for op in ops_in_table():
            errors = []
            if op not in table:
                errors.append("no test case for this op")
            for k, case in enumerate(table.get(op, [])):
                try:
                    err = run_case(gpucc, case, tmp, k)
                except Exception as e:  # a crash in one case must not hide the others
                    err = "%s: %s" % (type(e).__name__, e)
                if err:
                    errors.append("case %d: %s" % (k, err))
            if errors:
                failed += 1
                print("FAIL %s" % op)
                for e in errors:
                    print("  " + e.replace("\n", "\n  "))
            else:
                passed += 1
                print("ok   %s (%d case%s)" % (op, len(table[op]),
                                               "" if len(table[op]) == 1 else "s"))
        for op in sorted(set(table) - set(ops_in_table())):
            failed += 1
            print("FAIL %s: tested here but not in ops.def" % op)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
