#!/usr/bin/env python3
"""Every opset from 1 to 24: one model per opset, built with the `onnx` package and checked
with onnx.checker, holds a node for each op form that opset has: the attributes that later
became inputs (Clip, Pad, Slice, Squeeze, Split, Reduce*, Upsample, TopK, Dropout...), the
changed defaults (Softmax's axis and its 2-D coercion, Concat's axis, Selu's alpha), the
legacy broadcasting of opsets before 7 (`broadcast` and `axis`), `consumed_inputs`,
`is_test`, Reshape-1's shape attribute, Tile-1, Cast-1's type names, OneHot-9's negative
indices, and the ops' forms at opsets 22 to 24. gpucc runs each model on its reference
executor (`gpucc run --cpu`) and every output is compared with onnx.reference's
ReferenceEvaluator, or with numpy where the reference evaluator does not implement the old
version's meaning (it applies Softmax-13's, ignores legacy broadcasting...).

Usage: test_opsets.py --gpucc build/gpucc [--opset N]... [-v]"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
except ImportError:  # scripts/install-deps.sh installs it; say so rather than pass
    print("test_opsets: SKIPPED: the onnx Python package is not installed")
    sys.exit(77)

OPSETS = range(1, 25)
F32 = np.float32
RTOL, ATOL = 1e-5, 1e-6  # tight enough to tell Selu-1's defaults from Selu-6's


class Model:
    """One opset's model under construction. Each case adds nodes whose value names start
    with its own prefix; outputs carry a numpy expectation, or None for the reference
    evaluator's."""

    def __init__(self, opset, rng):
        self.opset = opset
        self.rng = rng
        self.nodes, self.inputs, self.inits, self.outputs = [], [], [], []
        self.feeds, self.expect = {}, {}
        self.prefix = ""
        self.count = 0

    def name(self, hint):
        self.count += 1
        return "%s_%s%d" % (self.prefix, hint, self.count)

    def input(self, x):
        n = self.name("in")
        self.inputs.append(helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(x.dtype), x.shape))
        self.feeds[n] = x
        return n

    def const(self, x):
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(x), n))
        return n

    def node(self, op, inputs, nout=1, **attrs):
        outs = [self.name("y") for _ in range(nout)]
        self.nodes.append(helper.make_node(op, inputs, outs, **attrs))
        return outs[0] if nout == 1 else outs

    def output(self, name, dtype=F32, expect=None):
        self.outputs.append(helper.make_tensor_value_info(
            name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), None))
        self.expect[name] = expect

    def randn(self, *shape):
        return self.rng.standard_normal(shape).astype(F32)


# ---------------------------------------------------------------------------- the cases
# Each case(m) adds its nodes for m.opset, or nothing where its op does not exist.

def unary(m):
    x = m.randn(2, 3)
    ops = ["Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Floor", "Ceil", "Softplus",
           "Softsign", "LeakyRelu", "Elu", "HardSigmoid"]
    ops += ["Sin", "Cos", "Tan", "Atan"] if m.opset >= 7 else []
    ops += ["Sinh", "Cosh", "Asinh", "Erf", "Sign"] if m.opset >= 9 else []
    ops += ["Round"] if m.opset >= 11 else []
    ops += ["Celu"] if m.opset >= 12 else []
    ops += ["HardSwish"] if m.opset >= 14 else []
    ops += ["Mish"] if m.opset >= 18 else []
    ops += ["Gelu"] if m.opset >= 20 else []
    xi = m.input(x)
    for op in ops:
        # consumed_inputs: a legacy hint of version 1 that changes nothing
        extra = {"consumed_inputs": [0]} if m.opset < 6 and op in (
            "Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Floor", "Ceil", "LeakyRelu",
            "Elu", "HardSigmoid") else {}
        m.output(m.node(op, [xi], **extra))
    pos = m.input(np.abs(x) + F32(0.5))
    for op in ["Sqrt", "Log", "Reciprocal"]:
        m.output(m.node(op, [pos]))
    if m.opset >= 7:
        small = m.input((x / 4).astype(F32))
        for op in ["Asin", "Acos"] + (["Atanh"] if m.opset >= 9 else []):
            m.output(m.node(op, [small]))
    if m.opset >= 9:
        m.output(m.node("IsNaN", [xi]), np.bool_)
    if m.opset >= 10:
        m.output(m.node("IsInf", [xi]), np.bool_)


def selu(m):
    x = m.randn(2, 5)
    y = m.node("Selu", [m.input(x)])
    # Selu-1's defaults are 1.6732 and 1.0507, Selu-6's 1.67326... and 1.05070...
    a, g = (1.6732, 1.0507) if m.opset < 6 else (1.67326319217681884765625,
                                                 1.05070102214813232421875)
    want = np.where(x > 0, g * x, g * (a * np.exp(x) - a)).astype(F32)
    m.output(y, expect=want)


def binary(m):
    a, b = m.randn(2, 3, 4), m.randn(2, 3, 4)
    ai, bi = m.input(a), m.input(b)
    for op in ["Add", "Sub", "Mul", "Div"]:
        m.output(m.node(op, [ai, bi]))
    for op in ["Equal", "Less", "Greater"]:
        # Less and Greater compare floats only before 9, Equal ints and bools before 11
        dt = F32 if op != "Equal" and m.opset < 9 else np.int64
        ia, ib = m.input(np.array([1, 2, 3], dt)), m.input(np.array([1, 3, 2], dt))
        m.output(m.node(op, [ia, ib]), np.bool_)
    p, q = m.input(np.array([True, True, False, False])), m.input(
        np.array([True, False, True, False]))
    for op in ["And", "Or", "Xor"]:
        m.output(m.node(op, [p, q]), np.bool_)
    if m.opset >= 12:
        for op in ["LessOrEqual", "GreaterOrEqual"]:
            m.output(m.node(op, [ai, bi]), np.bool_)
    m.output(m.node("Pow", [m.input(np.abs(a) + F32(0.5)), m.input(m.randn(2, 3, 4))]))
    if m.opset >= 10:
        m.output(m.node("Mod", [ai, m.input(np.full((2, 3, 4), 0.75, F32))], fmod=1))
    if m.opset >= 9:
        m.output(m.node("Where", [m.input(a > 0), ai, bi]))
    if m.opset >= 18:
        ia, ib = m.input(np.array([5, 6, 7], np.int32)), m.input(np.array([3, 3, 1], np.int32))
        for op in ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]:
            m.output(m.node(op, [ia, ib]), np.int32)


def legacy_broadcast(m):
    """Opsets before 7: broadcast=1 puts B onto A by suffix, or from `axis` on."""
    a = m.randn(2, 3, 4)
    ai = m.input(a)
    b_axis, b_suffix = m.randn(3), m.randn(4)
    if m.opset >= 7:  # numpy's rule: a 1-D B is the last dim
        for op, f in [("Add", np.add), ("Mul", np.multiply)]:
            m.output(m.node(op, [ai, m.input(b_suffix)]), expect=f(a, b_suffix))
        return
    fs = [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", np.divide)]
    for op, f in fs:
        m.output(m.node(op, [ai, m.input(b_axis)], broadcast=1, axis=1),
                 expect=f(a, b_axis.reshape(3, 1)))
        m.output(m.node(op, [ai, m.input(b_suffix)], broadcast=1),
                 expect=f(a, b_suffix))
    m.output(m.node("Add", [ai, m.input(np.array([2.5], F32))], broadcast=1, axis=0),
             expect=a + F32(2.5))
    pa = m.input(np.abs(a) + F32(0.5))
    m.output(m.node("Pow", [pa, m.input(b_axis)], broadcast=1, axis=1),
             expect=np.power(np.abs(a) + F32(0.5), b_axis.reshape(3, 1)))
    c = np.array([0.0, 0.5, -0.5], F32)
    m.output(m.node("Greater", [ai, m.input(c)], broadcast=1, axis=1), np.bool_,
             expect=a > c.reshape(3, 1))
    t, u = np.array([[True, False], [False, True]]), np.array([True, False])
    m.output(m.node("And", [m.input(t), m.input(u)], broadcast=1, axis=0), np.bool_,
             expect=t & u.reshape(2, 1))


def prelu(m):
    x = m.randn(2, 3, 4)
    if m.opset < 7:  # one slope per channel (dim 1)
        s = np.array([0.1, 0.2, 0.3], F32)
        want = np.where(x > 0, x, x * s.reshape(3, 1))
    else:  # numpy's rule
        s = np.array([0.1, 0.2, 0.3, 0.4], F32)
        want = np.where(x > 0, x, x * s)
    m.output(m.node("PRelu", [m.input(x), m.const(s)]), expect=want)


def variadic(m):
    xs = [m.randn(2, 3) for _ in range(3)]
    names = [m.input(x) for x in xs]
    for op, f in [("Max", np.maximum), ("Min", np.minimum), ("Sum", np.add)]:
        m.output(m.node(op, names), expect=f(f(xs[0], xs[1]), xs[2]))
    m.output(m.node("Mean", names), expect=(xs[0] + xs[1] + xs[2]) / 3)
    if m.opset >= 8:  # multidirectional broadcasting
        r = m.randn(3)
        m.output(m.node("Max", [names[0], m.input(r)]), expect=np.maximum(xs[0], r))


def clip(m):
    x = np.array([-2, -0.25, 0.25, 2, np.inf, -np.inf], F32)
    xi = m.input(x)
    if m.opset < 11:
        # Clip-1 has no default bounds; Clip-6 defaults to float's limits
        hi = np.inf if m.opset < 6 else np.finfo(F32).max
        m.output(m.node("Clip", [xi], min=-0.5), expect=np.clip(x, F32(-0.5), hi))
        m.output(m.node("Clip", [xi], min=-0.5, max=0.5), expect=np.clip(x, -0.5, 0.5))
    else:
        m.output(m.node("Clip", [xi, m.const(np.array(-0.5, F32)), m.const(np.array(0.5, F32))]))
        m.output(m.node("Clip", [xi, "", m.const(np.array(0.5, F32))]))


def softmax(m):
    x = m.randn(2, 3, 4)
    xi = m.input(x)
    for op in ["Softmax", "LogSoftmax", "Hardmax"]:
        for axis in [None, 2, 0]:
            y = m.node(op, [xi], **({} if axis is None else {"axis": axis}))
            want = None  # from 13: along one axis (default -1), as the reference evaluator
            if m.opset < 13:  # flattened to 2-D at axis (default 1), normalized per row
                a = 1 if axis is None else axis
                flat = x.reshape(int(np.prod(x.shape[:a])), -1).astype(np.float64)
                if op == "Hardmax":
                    want = np.zeros_like(flat)
                    want[np.arange(flat.shape[0]), flat.argmax(axis=1)] = 1
                else:
                    e = np.exp(flat - flat.max(axis=1, keepdims=True))
                    want = e / e.sum(axis=1, keepdims=True)
                    want = np.log(want) if op == "LogSoftmax" else want
                want = want.reshape(x.shape).astype(F32)
            m.output(y, expect=want)


def shapes(m):
    x = m.randn(2, 3, 4)
    xi = m.input(x)
    # Reshape: the shape is an attribute in version 1, an input from 5
    if m.opset < 5:
        y = m.node("Reshape", [xi], shape=[4, 0, -1], consumed_inputs=[0])
    else:
        y = m.node("Reshape", [xi, m.const(np.array([4, 0, -1], np.int64))])
    m.output(y, expect=x.reshape(4, 3, 2))
    # Squeeze and Unsqueeze: attributes before 13
    one = m.input(m.randn(2, 1, 3))
    if m.opset < 13:
        m.output(m.node("Squeeze", [one], axes=[1]))
        m.output(m.node("Unsqueeze", [xi], axes=[0, 4]))
    else:
        m.output(m.node("Squeeze", [one, m.const(np.array([1], np.int64))]))
        m.output(m.node("Unsqueeze", [xi, m.const(np.array([0, 4], np.int64))]))
    m.output(m.node("Squeeze", [one]))
    if m.opset >= 11:  # negative axes
        m.output(m.node("Squeeze", [one] + ([m.const(np.array([-2], np.int64))]
                                            if m.opset >= 13 else []),
                        **({"axes": [-2]} if m.opset < 13 else {})))
    # Concat: axis 1 unless given before version 4, required after
    z = m.input(m.randn(2, 2, 4))
    if m.opset < 4:
        m.output(m.node("Concat", [xi, z]), expect=np.concatenate([x, m.feeds[z]], axis=1))
    m.output(m.node("Concat", [xi, z], axis=1))
    m.output(m.node("Transpose", [xi], perm=[2, 0, 1]))
    m.output(m.node("Transpose", [xi]))
    m.output(m.node("Flatten", [xi], axis=2))
    if m.opset >= 11:
        m.output(m.node("Flatten", [xi], axis=-1))
    if m.opset >= 8:
        m.output(m.node("Expand", [m.input(m.randn(3, 1)), m.const(np.array([2, 3, 4],
                                                                             np.int64))]))
    m.output(m.node("Shape", [xi]), np.int64)
    m.output(m.node("Size", [xi]), np.int64)
    if m.opset >= 15:
        m.output(m.node("Shape", [xi], start=1, end=-1), np.int64)
    m.output(m.node("Identity", [xi]))


def slice_split(m):
    x = m.randn(4, 6)
    xi = m.input(x)
    if m.opset < 10:  # Slice-1: attributes, no steps
        m.output(m.node("Slice", [xi], starts=[1, -4], ends=[3, 100], axes=[0, 1]))
    else:
        c = lambda v: m.const(np.array(v, np.int64))
        m.output(m.node("Slice", [xi, c([3, -1]), c([0, 0]), c([0, 1]), c([-1, -2])]))
        m.output(m.node("Slice", [xi, c([1]), c([3])]))
    # Split: sizes from input 1 or the attribute in version 1, the attribute in 2 and 11,
    # input 1 from 13; num_outputs (the last part smaller) from 18
    if m.opset == 1:  # an input of the data's type
        ys = m.node("Split", [xi, m.const(np.array([2, 4], F32))], nout=2, axis=1)
    elif m.opset < 13:
        ys = m.node("Split", [xi], nout=2, axis=1, split=[2, 4])
    else:
        ys = m.node("Split", [xi, m.const(np.array([2, 4], np.int64))], nout=2, axis=1)
    m.output(ys[0], expect=x[:, :2])
    m.output(ys[1], expect=x[:, 2:])
    # equal parts, as many as outputs (from 18, num_outputs says how many)
    ys = m.node("Split", [xi], nout=3, axis=1, **({"num_outputs": 3} if m.opset >= 18 else {}))
    for i, y in enumerate(ys):
        m.output(y, expect=x[:, 2 * i:2 * i + 2])
    if m.opset >= 18:
        ys = m.node("Split", [m.input(m.randn(7, 2))], nout=3, num_outputs=3)
        for y in ys:
            m.output(y)


def pad(m):
    x = m.randn(2, 3)
    xi = m.input(x)
    pads = [0, 1, 1, 2]
    for mode in ["constant", "reflect", "edge"]:
        if m.opset == 1:
            y = m.node("Pad", [xi], mode=mode, paddings=pads, value=1.5)
        elif m.opset < 11:
            y = m.node("Pad", [xi], mode=mode, pads=pads, value=1.5)
        else:
            y = m.node("Pad", [xi, m.const(np.array(pads, np.int64)),
                               m.const(np.array(1.5, F32))], mode=mode)
        width = ((0, 1), (1, 2))
        want = np.pad(x, width, mode=mode, **({"constant_values": 1.5}
                                               if mode == "constant" else {}))
        m.output(y, expect=want)
    if m.opset >= 18:
        y = m.node("Pad", [xi, m.const(np.array([2, 1], np.int64)), "",
                           m.const(np.array([-1], np.int64))])
        m.output(y, expect=np.pad(x, ((0, 0), (2, 1))))


def reduce(m):
    x = m.randn(2, 3, 4)
    xi = m.input(x)
    ops = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
           "ReduceL2", "ReduceSumSquare", "ReduceLogSumExp"]
    for op in ops:
        as_input = m.opset >= (13 if op == "ReduceSum" else 18)
        for keep in [0, 1]:
            if as_input:
                y = m.node(op, [xi, m.const(np.array([2, 0], np.int64))], keepdims=keep)
            else:
                y = m.node(op, [xi], axes=[2, 0], keepdims=keep)
            m.output(y)
        m.output(m.node(op, [xi], keepdims=0))  # every axis
    pos = m.input(np.abs(x) + F32(0.5))
    as_input = m.opset >= 18
    m.output(m.node("ReduceLogSum", [pos] + ([m.const(np.array([1], np.int64))]
                                             if as_input else []),
                    **({} if as_input else {"axes": [1]})))
    for op in ["ArgMax", "ArgMin"]:
        m.output(m.node(op, [xi], axis=1), np.int64)
        if m.opset >= 12:
            ties = m.input(np.array([[1, 3, 3], [2, 2, 1]], F32))
            m.output(m.node(op, [ties], axis=1, keepdims=0, select_last_index=1), np.int64)


def topk(m):
    x = m.randn(3, 5)
    xi = m.input(x)
    if m.opset < 10:
        v, i = m.node("TopK", [xi], nout=2, k=2)
    else:
        v, i = m.node("TopK", [xi, m.const(np.array([2], np.int64))], nout=2)
    order = np.argsort(-x, axis=1, kind="stable")[:, :2]
    m.output(v, expect=np.take_along_axis(x, order, axis=1))
    m.output(i, np.int64, expect=order)
    if m.opset >= 11:
        v, i = m.node("TopK", [xi, m.const(np.array([3], np.int64))], nout=2, largest=0, axis=0)
        m.output(v)
        m.output(i, np.int64)


def tile(m):
    x = m.randn(2, 3)
    xi = m.input(x)
    if m.opset < 6:  # Tile-1: `tiles` copies along `axis`, both of the data's type
        y = m.node("Tile", [xi, m.const(np.array(3, F32)), m.const(np.array(1, F32))])
        m.output(y, expect=np.tile(x, (1, 3)))
    else:
        y = m.node("Tile", [xi, m.const(np.array([2, 3], np.int64))])
        m.output(y, expect=np.tile(x, (2, 3)))


def cast(m):
    x = np.array([-1.7, 0, 2.5, 300], F32)
    xi = m.input(x)
    for dt, name in [(np.int32, "INT32"), (np.float64, "DOUBLE"), (np.bool_, "BOOL")]:
        to = name if m.opset < 6 else helper.np_dtype_to_tensor_dtype(np.dtype(dt))
        m.output(m.node("Cast", [xi], to=to), dt, expect=x.astype(dt))
    if m.opset >= 15:
        m.output(m.node("CastLike", [xi, m.input(np.array([1], np.int64))]), np.int64,
                 expect=x.astype(np.int64))


def dropout(m):
    x = m.randn(2, 3)
    xi = m.input(x)
    if m.opset < 7:  # is_test=1: inference
        y, mask = m.node("Dropout", [xi], nout=2, is_test=1, ratio=0.3)
    elif m.opset < 12:
        y, mask = m.node("Dropout", [xi], nout=2, ratio=0.3)
    else:
        y, mask = m.node("Dropout", [xi, m.const(np.array(0.3, F32)),
                                     m.const(np.array(False))], nout=2)
    m.output(y, expect=x)
    # the mask: of the input's type before version 10, bool after
    dt = F32 if m.opset < 10 else np.bool_
    m.output(mask, dt, expect=np.ones(x.shape, dt))


def batchnorm(m):
    x = m.randn(2, 3, 4, 4)
    s, b = m.randn(3), m.randn(3)
    mean, var = m.randn(3), np.abs(m.randn(3)) + F32(0.5)
    ins = [m.input(x)] + [m.const(v) for v in (s, b, mean, var)]
    attrs = {"epsilon": 1e-3}
    if m.opset < 6:
        attrs.update(consumed_inputs=[0, 0, 0, 1, 1], is_test=1)
    elif m.opset < 7:
        attrs.update(is_test=1)
    elif m.opset >= 14:
        attrs.update(training_mode=0)
    r = lambda v: v.reshape(1, 3, 1, 1)
    want = (x - r(mean)) / np.sqrt(r(var) + F32(1e-3)) * r(s) + r(b)
    m.output(m.node("BatchNormalization", ins, **attrs), expect=want.astype(F32))
    inst = [m.input(x), m.const(s), m.const(b)]
    extra = {"consumed_inputs": [0, 0, 0]} if m.opset < 6 else {}
    m.output(m.node("InstanceNormalization", inst, epsilon=1e-3, **extra))
    # the reference evaluator's LRN sums over the wrong dim (the batch's range)
    m.output(m.node("LRN", [ins[0]], size=3), expect=lrn(x, 3))
    m.output(m.node("LpNormalization", [ins[0]], axis=1))
    if m.opset >= 9:
        m.output(m.node("MeanVarianceNormalization", [ins[0]]))
    if m.opset >= 17:
        m.output(m.node("LayerNormalization", [ins[0], m.const(m.randn(4))], axis=-1))


def conv_pool(m):
    x = m.randn(1, 2, 5, 5)
    xi = m.input(x)
    w = m.const(m.randn(4, 2, 3, 3))
    m.output(m.node("Conv", [xi, w, m.const(m.randn(4))], pads=[1, 1, 0, 0], strides=[2, 1]))
    m.output(m.node("Conv", [xi, w], dilations=[2, 2]))
    m.output(m.node("ConvTranspose", [xi, m.const(m.randn(2, 3, 3, 3))], strides=[2, 2],
                    pads=[1, 0, 1, 0], output_padding=[1, 0]))
    m.output(m.node("MaxPool", [xi], kernel_shape=[2, 2], pads=[1, 1, 0, 0], strides=[2, 2]))
    # AveragePool-1 leaves the pads out of the count (the reference evaluator does not)
    m.output(m.node("AveragePool", [xi], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             expect=avg_pool_3x3(x, False))
    if m.opset >= 7:
        m.output(m.node("AveragePool", [xi], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                        count_include_pad=1), expect=avg_pool_3x3(x, True))
    if m.opset >= 10:
        m.output(m.node("MaxPool", [xi], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1))
    if m.opset >= 19:
        m.output(m.node("AveragePool", [xi], kernel_shape=[2, 2], dilations=[2, 2]))
    m.output(m.node("GlobalAveragePool", [xi]))
    m.output(m.node("GlobalMaxPool", [xi]))
    m.output(m.node("MatMul", [m.input(m.randn(3, 4)), m.input(m.randn(4, 2))]))
    d = m.input(m.randn(1, 8, 2, 3))
    m.output(m.node("DepthToSpace", [d], blocksize=2))
    if m.opset >= 11:
        m.output(m.node("DepthToSpace", [d], blocksize=2, mode="CRD"))
    m.output(m.node("SpaceToDepth", [m.input(m.randn(1, 2, 4, 6))], blocksize=2))


def gemm(m):
    a, b, c = m.randn(3, 4), m.randn(5, 4), m.randn(5)
    ai, bi = m.input(a), m.input(b)
    extra = {"broadcast": 1} if m.opset < 7 else {}  # before 7, C of [N] must ask for it
    y = m.node("Gemm", [ai, bi, m.const(c)], transB=1, alpha=0.5, beta=2.0, **extra)
    m.output(y, expect=(0.5 * a @ b.T + 2 * c).astype(F32))
    if m.opset >= 11:  # C optional
        m.output(m.node("Gemm", [ai, bi], transB=1), expect=a @ b.T)


def resize(m):
    x = m.randn(1, 2, 2, 3)
    xi = m.input(x)
    want = x.repeat(2, axis=2).repeat(3, axis=3)
    scales = np.array([1, 1, 2, 3], F32)
    if 7 <= m.opset < 9:
        m.output(m.node("Upsample", [xi], scales=scales.tolist(), mode="nearest"), expect=want)
    elif m.opset == 9:
        m.output(m.node("Upsample", [xi, m.const(scales)], mode="nearest"), expect=want)
    elif m.opset == 10:
        m.output(m.node("Resize", [xi, m.const(scales)], mode="nearest"), expect=want)
    elif m.opset >= 11:
        roi = m.const(np.array([], F32))
        m.output(m.node("Resize", [xi, roi, m.const(scales)], mode="nearest"), expect=want)
        m.output(m.node("Resize", [xi, roi, m.const(scales)], mode="linear"))
        if m.opset >= 13:
            m.output(m.node("Resize", [xi, "", "", m.const(np.array([1, 2, 3, 5], np.int64))],
                            mode="linear"))
        if m.opset >= 18:
            m.output(m.node("Resize", [xi, "", m.const(np.array([2, 3], F32))], axes=[2, 3],
                            mode="cubic"))
        if m.opset >= 19:
            m.output(m.node("Resize", [xi, "", m.const(np.array([1, 1, 1.5, 2], F32))],
                            mode="linear", coordinate_transformation_mode="half_pixel_symmetric"))


def gather_scatter(m):
    x = m.randn(4, 3)
    xi = m.input(x)
    idx = np.array([[0, 3], [1, 2]], np.int64)
    m.output(m.node("Gather", [xi, m.input(idx)], axis=0))
    if m.opset >= 11:
        m.output(m.node("Gather", [xi, m.input(-idx - 1)], axis=0))
        e = np.array([[0, 2, 1], [3, 0, 0]], np.int64)
        m.output(m.node("GatherElements", [xi, m.input(e)], axis=0))
        m.output(m.node("ScatterElements", [xi, m.input(e), m.input(m.randn(2, 3))], axis=0))
        m.output(m.node("GatherND", [xi, m.input(np.array([[1, 2], [3, 0]], np.int64))]))
    if 9 <= m.opset < 11:  # the reference evaluator has no Scatter
        e, u = np.array([[0, 2, 1], [3, 0, 0]], np.int64), m.randn(2, 3)
        want = x.copy()
        for i, j in np.ndindex(e.shape):
            want[e[i, j], j] = u[i, j]
        m.output(m.node("Scatter", [xi, m.input(e), m.input(u)], axis=0), expect=want)
    if m.opset >= 16:
        e = np.array([[0, 2, 1], [0, 0, 0]], np.int64)
        m.output(m.node("ScatterElements", [xi, m.input(e), m.input(m.randn(2, 3))], axis=0,
                        reduction="add"))


def onehot(m):
    if m.opset < 9:
        return
    idx = np.array([0, -1, 2, 5, -3], np.int64)
    vals = np.array([0, 1], F32)
    y = m.node("OneHot", [m.input(idx), m.const(np.array(3, np.int64)), m.const(vals)])
    if m.opset < 11:  # negative indices are out of range: all off
        want = (idx[:, None] == np.arange(3)).astype(F32)
    else:  # negative indices count from the end
        want = ((idx[:, None] + 3 * (idx[:, None] < 0)) == np.arange(3)).astype(F32)
    m.output(y, expect=want)


def values(m):
    t = numpy_helper.from_array(np.array([[1, 2], [3, 4]], F32))
    m.output(m.node("Constant", [], value=t))
    if m.opset >= 12:
        m.output(m.node("Constant", [], value_floats=[1.5, 2.5]))
        m.output(m.node("Constant", [], value_int=7), np.int64)
    if m.opset >= 9:
        m.output(m.node("ConstantOfShape", [m.const(np.array([2, 3], np.int64))],
                        value=numpy_helper.from_array(np.array([1.25], F32))))
        m.output(m.node("EyeLike", [m.input(m.randn(3, 4))], k=1))
    if m.opset >= 11:
        m.output(m.node("Range", [m.const(np.array(1, np.int64)), m.const(np.array(9, np.int64)),
                                  m.const(np.array(3, np.int64))]), np.int64)
        m.output(m.node("CumSum", [m.input(m.randn(2, 3)), m.const(np.array(1, np.int64))]))
    if m.opset >= 14:
        m.output(m.node("Trilu", [m.input(m.randn(3, 3))], upper=0))
    if m.opset >= 17:
        m.output(m.node("HannWindow", [m.const(np.array(5, np.int64))]))


def lrn(x, size, alpha=1e-4, beta=0.75, bias=1.0):
    sq = np.zeros(x.shape, np.float64)
    for c in range(x.shape[1]):
        lo, hi = max(0, c - (size - 1) // 2), min(x.shape[1], c + size // 2 + 1)
        sq[:, c] = (x[:, lo:hi].astype(np.float64) ** 2).sum(axis=1)
    return (x / (bias + alpha / size * sq) ** beta).astype(F32)


def avg_pool_3x3(x, count_pads):
    """A 3x3 average pool of stride 1 and padding 1 over NCHW x."""
    n, c, h, w = x.shape
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=np.nan)
    win = np.stack([padded[:, :, i:i + h, j:j + w] for i in range(3) for j in range(3)])
    mean = np.nan_to_num(win).sum(axis=0) / 9 if count_pads else np.nanmean(win, axis=0)
    return mean.astype(F32)


CASES = [unary, selu, binary, legacy_broadcast, prelu, variadic, clip, softmax, shapes,
         slice_split, pad, reduce, topk, tile, cast, dropout, batchnorm, conv_pool, gemm,
         resize, gather_scatter, onehot, values]


def build(opset, seed):
    """The opset's model, checked, and each output's expected value."""
    m = Model(opset, np.random.default_rng(seed))
    for case in CASES:
        m.prefix = case.__name__
        case(m)
    ops = [helper.make_opsetid("", opset)]

    try:
        ir = helper.find_min_ir_version_for(ops)
    except ValueError:  # onnx's table skips opsets 2 to 4, which came with IR version 3
        ir = 3
    inputs = list(m.inputs)
    if ir < 4:  # IR version 3 lists the initializers among the graph's inputs
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, t.dims) for t in m.inits]

    def model_of(nodes, outputs):
        g = helper.make_graph(nodes, "opset%d" % opset, inputs, outputs, m.inits)
        return helper.make_model(g, opset_imports=ops, ir_version=ir)

    expect = dict(m.expect)
    need = [o for o in m.outputs if expect[o.name] is None]
    if need:  # the reference evaluator runs only the nodes these outputs need, and
        # without consumed_inputs, a hint it does not know that changes nothing
        want, nodes = {o.name for o in need}, []
        for n in reversed(m.nodes):
            if want & set(n.output):
                c = onnx.NodeProto()
                c.CopyFrom(n)
                keep = [a for a in c.attribute if a.name != "consumed_inputs"]
                del c.attribute[:]
                c.attribute.extend(keep)
                nodes.insert(0, c)
                want |= set(n.input)
        ref = ReferenceEvaluator(model_of(nodes, need))
        expect.update(zip([o.name for o in need], ref.run(None, m.feeds)))
    for o in m.outputs:  # old ops have no shape inference: the checker wants shapes
        want = np.asarray(expect[o.name])
        if want.dtype == np.float64 and o.type.tensor_type.elem_type == TensorProto.FLOAT:
            want = want.astype(F32)
        expect[o.name] = want
        o.CopyFrom(helper.make_tensor_value_info(o.name, o.type.tensor_type.elem_type,
                                                 want.shape))
    model = model_of(m.nodes, m.outputs)
    # not full_check: ONNX's own shape inference fails on MeanVarianceNormalization-13's
    # function body
    onnx.checker.check_model(model)
    return m, model, expect


def compare(got, want):
    """None when got matches want, else why not."""
    if got.dtype != want.dtype:
        return "dtype %s, expected %s" % (got.dtype, want.dtype)
    if got.shape != want.shape:
        return "shape %s, expected %s" % (list(got.shape), list(want.shape))
    if want.dtype.kind == "f":
        ok = np.isclose(got.astype(np.float64), want.astype(np.float64), rtol=RTOL, atol=ATOL,
                        equal_nan=True)
    else:
        ok = got == want
    if ok.all():
        return None
    at = tuple(int(i) for i in np.argwhere(~ok)[0])
    return "%d of %d differ; first at %s: got %s, expected %s" % (
        int((~ok).sum()), ok.size, list(at), got[at], want[at])


def run_opset(gpucc, opset, work, verbose):
    """The number of failed outputs (or 1 when the model does not run)."""
    m, model, expect = build(opset, 100 + opset)
    path = os.path.join(work, "opset%d.onnx" % opset)
    onnx.save(model, path)
    argv = [gpucc, "run", path, "--cpu", "--output-dir", os.path.join(work, "out%d" % opset)]
    for name, x in m.feeds.items():
        p = os.path.join(work, "%s.npy" % name)
        np.save(p, x)
        argv += ["--input", "%s=%s" % (name, p)]
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        print("FAIL opset %d: gpucc run: exit %d: %s" % (opset, p.returncode, p.stdout.strip()))
        return 1
    failed = 0
    for o in m.outputs:
        got = np.load(os.path.join(work, "out%d" % opset, o.name + ".npy"))
        why = compare(got, expect[o.name])
        if why:
            print("FAIL opset %d: %s (%s): %s" % (opset, o.name, oracle_name(m, o.name), why))
            failed += 1
    if verbose:
        print("opset %2d: %d nodes, %d outputs, %d compared with numpy" % (
            opset, len(m.nodes), len(m.outputs),
            sum(m.expect[o.name] is not None for o in m.outputs)))
    return failed


def oracle_name(m, name):
    return "numpy" if m.expect[name] is not None else "onnx.reference"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--opset", type=int, action="append", help="only this opset")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    opsets = a.opset or list(OPSETS)
    failed = 0
    with tempfile.TemporaryDirectory() as work:
        for opset in opsets:
            failed += run_opset(a.gpucc, opset, work, a.verbose)
    print("test_opsets: opsets %d to %d, %d failures" % (min(opsets), max(opsets), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
