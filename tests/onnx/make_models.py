#!/usr/bin/env python3
"""Writes small ONNX models for gpucc's FileCheck tests, with the standard library only.

It encodes the few protobuf messages it needs by hand (field numbers of onnx.proto), so
the tests need neither the `onnx` package nor protoc.

usage: make_models.py NAME OUT.onnx [N]  NAME: one of the models below (--list); N: the
                                        size of the ones built to any size (default 1000)
"""

import struct
import sys


def varint(n):
    n &= (1 << 64) - 1  # negative int64s are ten-byte varints
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


def f_int(field, v):
    return key(field, 0) + varint(v)


def f_bytes(field, b):
    if isinstance(b, str):
        b = b.encode()
    return key(field, 2) + varint(len(b)) + b


def f_float(field, v):
    return key(field, 5) + struct.pack("<f", v)


def f_packed_ints(field, vs):
    return f_bytes(field, b"".join(varint(v) for v in vs))


FLOAT, INT64, BOOL, DOUBLE = 1, 7, 9, 11


def tensor(name, dims, dtype, values=None, raw=None, external=None):
    """external: {"location": ..., "offset": ..., "length": ...} (the data lives there)."""
    b = f_packed_ints(1, dims) + f_int(2, dtype) + f_bytes(8, name)
    if external is not None:
        b += b"".join(f_bytes(13, f_bytes(1, k) + f_bytes(2, str(v))) for k, v in external.items())
        b += f_int(14, 1)  # data_location = EXTERNAL
    elif raw is not None:
        b += f_bytes(9, raw)
    elif dtype == FLOAT:
        b += f_bytes(4, struct.pack("<%df" % len(values), *values))
    elif dtype == INT64:
        b += f_packed_ints(7, values)
    return b


def attr_int(name, v):
    return f_bytes(1, name) + f_int(20, 2) + f_int(3, v)


def attr_float(name, v):
    return f_bytes(1, name) + f_int(20, 1) + f_float(2, v)


def attr_ints(name, vs):
    return f_bytes(1, name) + f_int(20, 7) + b"".join(f_int(8, v) for v in vs)


def attr_string(name, s):
    return f_bytes(1, name) + f_int(20, 3) + f_bytes(4, s)


def attr_tensor(name, t):
    return f_bytes(1, name) + f_int(20, 4) + f_bytes(5, t)


def node(op, inputs, outputs, name="", attrs=(), domain=None):
    b = b"".join(f_bytes(1, i) for i in inputs) + b"".join(f_bytes(2, o) for o in outputs)
    if name:
        b += f_bytes(3, name)
    b += f_bytes(4, op)
    b += b"".join(f_bytes(5, a) for a in attrs)
    if domain is not None:
        b += f_bytes(7, domain)
    return b


def value_info(name, dtype, dims):
    d = b"".join(f_bytes(1, f_bytes(2, x) if isinstance(x, str) else f_int(1, x)) for x in dims)
    tensor_type = f_int(1, dtype) + f_bytes(2, d)
    return f_bytes(1, name) + f_bytes(2, f_bytes(1, tensor_type))


def model(nodes, inputs, outputs, inits=(), opset=17, name="g"):
    g = b"".join(f_bytes(1, n) for n in nodes) + f_bytes(2, name)
    g += b"".join(f_bytes(5, t) for t in inits)
    g += b"".join(f_bytes(11, v) for v in inputs) + b"".join(f_bytes(12, v) for v in outputs)
    opset_id = f_bytes(1, "") + f_int(2, opset)
    return f_int(1, 8) + f_bytes(2, "make_models.py") + f_bytes(7, g) + f_bytes(8, opset_id)


def floats(*v):
    return struct.pack("<%df" % len(v), *v)


def deep_nesting(depth=100000):
    """An If whose then_branch holds an If whose then_branch holds ... `depth` graphs deep
    (about 3 MB): a reader that unpacked subgraphs recursively would run out of stack.
    Built from the inside out with each level's length known, in linear time."""
    inner_len, prefixes = 0, []
    for _ in range(depth):
        attr_head = f_bytes(1, "then_branch") + f_int(20, 5)  # type GRAPH
        attr_len = len(attr_head) + len(key(6, 2)) + len(varint(inner_len)) + inner_len
        node_head = f_bytes(4, "If") + key(5, 2) + varint(attr_len)
        node_len = len(node_head) + attr_len
        graph_head = key(1, 2) + varint(node_len)
        prefixes.append(graph_head + node_head + attr_head + key(6, 2) + varint(inner_len))
        inner_len = len(graph_head) + node_len
    g = b"".join(reversed(prefixes))
    opset_id = f_bytes(1, "") + f_int(2, 17)
    return f_int(1, 8) + f_bytes(7, g) + f_bytes(8, opset_id)


def add_weight(w_init):
    """y = x + w for an input x of f32[2], w given by the initializer w_init."""
    return model([node("Add", ["x", "w"], ["y"], "add")],
                 [value_info("x", FLOAT, [2])], [value_info("y", FLOAT, [2])], [w_init])


def external_repeat(copies=64):
    """`copies` initializers, each the whole of one 1 MiB external file, summed: a model of
    a few KiB that would have the loader allocate 64 MiB (or any multiple) from one file."""
    inits = [tensor("w%d" % i, [1 << 18], FLOAT, external={"location": "ext_repeat.bin"})
             for i in range(copies)]
    return model([node("Sum", ["w%d" % i for i in range(copies)], ["y"], "sum")],
                 [], [value_info("y", FLOAT, [1 << 18])], inits)


# Models built to any size n, for the tests that time how gpucc scales (tests/scaling.py)
# and the tests of what codegen does past a kernel's operand limits.


def chain(n):
    """n pointwise nodes in a chain: one fuse group."""
    ops, nodes, prev = ["Relu", "Neg", "Tanh", "Abs"], [], "x"
    for i in range(n):
        out = "v%d" % i if i + 1 < n else "y"
        nodes.append(node(ops[i % 4], [prev], [out], "n%d" % i))
        prev = out
    return model(nodes, [value_info("x", FLOAT, [4, 16])], [value_info("y", FLOAT, [4, 16])])


def reverse_constants(n):
    """A chain of n adds of constants, written last node first, then one add of the
    graph's input: every node but the last is known at load."""
    nodes, prev = [], "c0"
    for i in range(n):
        nodes.append(node("Add", [prev, "one"], ["c%d" % (i + 1)], "n%d" % i))
        prev = "c%d" % (i + 1)
    nodes.append(node("Add", ["x", prev], ["y"], "last"))
    return model(list(reversed(nodes)), [value_info("x", FLOAT, [4])],
                 [value_info("y", FLOAT, [4])],
                 [tensor("c0", [4], FLOAT, [0, 1, 2, 3]), tensor("one", [4], FLOAT, [1, 1, 1, 1])])


def sum_inputs(n):
    """One Sum of n graph inputs: n - 1 adds, n - 2 of them temporaries."""
    ins = ["x%d" % i for i in range(n)]
    return model([node("Sum", ins, ["y"], "sum")], [value_info(x, FLOAT, [2, 4]) for x in ins],
                 [value_info("y", FLOAT, [2, 4])])


def concat_inputs(n):
    """One Concat of n graph inputs of 1 to 3 rows each."""
    ins = ["x%d" % i for i in range(n)]
    rows = [1 + i % 3 for i in range(n)]
    return model([node("Concat", ins, ["y"], "cat", [attr_int("axis", 0)])],
                 [value_info(x, FLOAT, [r, 4]) for x, r in zip(ins, rows)],
                 [value_info("y", FLOAT, [sum(rows), 4])])


def split_parts(n):
    """One Split of x into n rows, each read by a Relu whose output the graph returns."""
    nodes = [node("Split", ["x"], ["p%d" % i for i in range(n)], "split", [attr_int("axis", 0)])]
    nodes += [node("Relu", ["p%d" % i], ["y%d" % i], "r%d" % i) for i in range(n)]
    return model(nodes, [value_info("x", FLOAT, [n, 16])],
                 [value_info("y%d" % i, FLOAT, [1, 16]) for i in range(n)])


def unknown_ops(n):
    """A chain of n nodes of n different ops gpucc does not know: n lines of --check-ops."""
    nodes, prev = [], "x"
    for i in range(n):
        out = "v%d" % i if i + 1 < n else "y"
        nodes.append(node("Unknown%d" % i, [prev], [out], "n%d" % i))
        prev = out
    return model(nodes, [value_info("x", FLOAT, [4])], [value_info("y", FLOAT, [4])])


def listed_initializers(n):
    """n initializers, each also listed as a graph input (as exporters of IR version 3
    wrote them), beside one real input x and a Relu of it."""
    ws = ["w%d" % i for i in range(n)]
    return model([node("Relu", ["x"], ["y"], "relu")],
                 [value_info("x", FLOAT, [4])] + [value_info(w, FLOAT, [1]) for w in ws],
                 [value_info("y", FLOAT, [4])], [tensor(w, [1], FLOAT, [0.5]) for w in ws])


SIZED = {"chain": chain, "reverse_constants": reverse_constants, "sum_inputs": sum_inputs,
         "concat_inputs": concat_inputs, "split_parts": split_parts,
         "unknown_ops": unknown_ops, "listed_initializers": listed_initializers}

def attention_dynamic(masked=False):
    """An attention over x [batch, seq, 8] as exporters write it with dynamic axes: the
    head split's shape from Shape/Gather/Concat, two heads of 4, the scores' softmax over
    the keys, the merge back by the same shape, and the mean over the sequence.

    masked: the keys also masked by mask [batch, seq] (1 keeps a key) the way
    transformers' mask functions export: the mask flattened and gathered at flat indices
    b * seq + s that Range nodes compute from its shape, then the minimum float where it
    is 0, added to the scores."""
    def const(name, vs, dims=None):
        dims = [len(vs)] if dims is None else dims
        dtype = FLOAT if isinstance(vs[0], float) else INT64
        return node("Constant", [], [name], "", [f_bytes(1, "value") + f_int(20, 4) +
                                                 f_bytes(5, tensor("", dims, dtype, vs))])
    w = [((i * 7 + j * 3) % 11 - 5) / 8.0 for i in range(8) for j in range(8)]
    mask = []
    if masked:
        mask = [
            node("Shape", ["mask"], ["mshape"], "mshape"),
            const("zero", [0], []), const("one", [1], []), const("axis1", [1]),
            const("flat", [-1]), const("axes12", [1, 2]),
            const("keep", [0.0], []), const("drop", [-3.4028234663852886e38], []),
            node("Gather", ["mshape", "zero"], ["mb"], "mb", [attr_int("axis", 0)]),
            node("Gather", ["mshape", "one"], ["ms"], "ms", [attr_int("axis", 0)]),
            node("Range", ["zero", "mb", "one"], ["bpos"], "bpos"),
            node("Range", ["zero", "ms", "one"], ["kpos"], "kpos"),
            node("Unsqueeze", ["bpos", "axis1"], ["bcol"], "bcol"),
            node("Mul", ["bcol", "ms"], ["brow"], "brow"),
            node("Add", ["brow", "kpos"], ["index"], "index"),
            node("Reshape", ["mask", "flat"], ["mflat"], "mflat"),
            node("Gather", ["mflat", "index"], ["mk"], "mk", [attr_int("axis", 0)]),
            node("Unsqueeze", ["mk", "axes12"], ["mk4"], "mk4"),
            node("Cast", ["mk4"], ["mkb"], "mkb", [attr_int("to", BOOL)]),
            node("Where", ["mkb", "keep", "drop"], ["madd"], "madd"),
            node("Add", ["scores0", "madd"], ["scores"], "masked")]
    return model(
        [node("MatMul", ["x", "w"], ["p"], "proj"),
         node("Shape", ["x"], ["shape"], "shape"),
         const("i0", [0]), const("i1", [1]), const("heads", [2, 4]), const("hidden", [8]),
         node("Gather", ["shape", "i0"], ["b"], "b", [attr_int("axis", 0)]),
         node("Gather", ["shape", "i1"], ["s"], "s", [attr_int("axis", 0)]),
         node("Concat", ["b", "s", "heads"], ["split"], "split", [attr_int("axis", 0)]),
         node("Reshape", ["p", "split"], ["h"], "heads"),
         node("Transpose", ["h"], ["q"], "q", [attr_ints("perm", [0, 2, 1, 3])]),
         node("Transpose", ["h"], ["k"], "k", [attr_ints("perm", [0, 2, 3, 1])]),
         node("MatMul", ["q", "k"], ["scores0" if masked else "scores"], "scores")] + mask +
        [node("Softmax", ["scores"], ["a"], "softmax", [attr_int("axis", -1)]),
         node("MatMul", ["a", "q"], ["o"], "pv"),
         node("Transpose", ["o"], ["ot"], "merge", [attr_ints("perm", [0, 2, 1, 3])]),
         node("Concat", ["b", "s", "hidden"], ["back"], "back", [attr_int("axis", 0)]),
         node("Reshape", ["ot", "back"], ["y"], "y"),
         node("ReduceMean", ["y"], ["m"], "mean", [attr_ints("axes", [1]), attr_int("keepdims", 0)])],
        [value_info("x", FLOAT, ["batch", "seq", 8])] +
        ([value_info("mask", INT64, ["batch", "seq"])] if masked else []),
        [value_info("y", FLOAT, ["batch", "seq", 8]), value_info("m", FLOAT, ["batch", 8])],
        [tensor("w", [8, 8], FLOAT, w)])


MODELS = {
    "deep_nesting": deep_nesting,
    "attention_dynamic": attention_dynamic,
    "attention_mask_dynamic": lambda: attention_dynamic(masked=True),
    # x [batch, seq] divided by its sequence length, taken from its shape: the loader folds
    # the length into a constant, which a run of another size must not use.
    "shape_arithmetic": lambda: model(
        [node("Shape", ["x"], ["shape"]),
         node("Constant", [], ["one"], "", [f_bytes(1, "value") + f_int(20, 4) +
                                            f_bytes(5, tensor("", [1], INT64, [1]))]),
         node("Gather", ["shape", "one"], ["len"], "", [attr_int("axis", 0)]),
         node("Cast", ["len"], ["lenf"], "", [attr_int("to", FLOAT)]),
         node("Div", ["x", "lenf"], ["y"])],
        [value_info("x", FLOAT, ["batch", "seq"])], [value_info("y", FLOAT, ["batch", "seq"])]),
    # y = relu(x @ w + b) with a symbolic batch dim; w in raw_data, b in float_data.
    "mlp": lambda: model(
        [node("MatMul", ["x", "w"], ["h"], "fc"), node("Add", ["h", "b"], ["hb"], "bias"),
         node("Relu", ["hb"], ["y"])],
        [value_info("x", FLOAT, ["batch", 2])], [value_info("y", FLOAT, ["batch", 3])],
        [tensor("w", [2, 3], FLOAT, raw=floats(1, 2, 3, 4, 5, 6)),
         tensor("b", [3], FLOAT, [0.5, -100, 0])]),
    # y = x @ w and i = x cast to int64 (truncated): a float output that --precision
    # lowers (the matmul's operands) and an exact one.
    "matmul_cast": lambda: model(
        [node("MatMul", ["x", "w"], ["y"], "fc"),
         node("Cast", ["x"], ["i"], "trunc", [attr_int("to", INT64)])],
        [value_info("x", FLOAT, ["batch", 3])],
        [value_info("y", FLOAT, ["batch", 2]), value_info("i", INT64, ["batch", 3])],
        [tensor("w", [3, 2], FLOAT, [0.1, 0.2, 0.3, 0.4, 0.5, 0.6])]),
    # Gemm with transB and alpha, then a pre-13 Softmax over axis 1 of a 3-D tensor.
    "gemm_softmax": lambda: model(
        [node("Gemm", ["a", "bt", "c"], ["g"], "gemm",
              [attr_int("transB", 1), attr_float("alpha", 0.5)]),
         node("Constant", [], ["shape"], "", [f_bytes(1, "value") + f_int(20, 4) +
                                              f_bytes(5, tensor("", [3], INT64, [2, 2, 1]))]),
         node("Reshape", ["g", "shape"], ["r"]),
         node("Softmax", ["r"], ["y"], "sm", [attr_int("axis", 1)])],
        [value_info("a", FLOAT, [2, 3])], [value_info("y", FLOAT, [2, 2, 1])],
        [tensor("bt", [2, 3], FLOAT, [1, 0, 0, 0, 1, 0]), tensor("c", [2], FLOAT, [1, -1])],
        opset=11),
    # Nodes in reverse order, and a name the text form has to quote.
    "unsorted": lambda: model(
        [node("Neg", ["t"], ["onnx::Neg_2"], "second"), node("Abs", ["x"], ["t"], "first")],
        [value_info("x", FLOAT, [4])], [value_info("onnx::Neg_2", FLOAT, [4])]),
    # Ops gpucc does not support, for --check-ops.
    "unsupported": lambda: model(
        [node("Unique", ["x"], ["c1"], "uniq1"), node("Unique", ["c1"], ["c2"], "uniq2"),
         node("MaxPool", ["c2"], ["am"], "mp", [attr_int("storage_order", 1)]),
         node("Relu", ["am"], ["r"]), node("Foo", ["r"], ["y"], "custom", domain="com.example")],
        [value_info("x", FLOAT, [1, 1, 4, 4])], [value_info("y", FLOAT, [])],
        [tensor("w", [1, 1, 1, 1], FLOAT, [1])]),
    "unknown_op": lambda: model(
        [node("Relu", ["x"], ["r"]), node("Frobnicate", ["r"], ["y"], "frob")],
        [value_info("x", FLOAT, [2])], [value_info("y", FLOAT, [2])]),
    # External data: a valid model (y = x + w, w = [1, 2] in ext_ok.bin beside it), and
    # hostile ones. The test writes the data files (or FIFOs) beside the model.
    "external_ok": lambda: add_weight(tensor("w", [2], FLOAT, external={"location": "ext_ok.bin"})),
    # dims of 2^46 bytes whose data file holds 8: refused before anything is allocated.
    "external_huge_dims": lambda: add_weight(
        tensor("w", [1 << 22, 1 << 22], FLOAT, external={"location": "ext_ok.bin"})),
    # 10 GB stated twice over (dims and length) for a file of 8 bytes.
    "external_huge_length": lambda: add_weight(
        tensor("w", [2500000000], FLOAT,
               external={"location": "ext_ok.bin", "length": 10000000000})),
    "external_fifo": lambda: add_weight(tensor("w", [2], FLOAT, external={"location": "ext_fifo.bin"})),
    "external_dir": lambda: add_weight(tensor("w", [2], FLOAT, external={"location": "ext_dir"})),
    "external_repeat": external_repeat,
    # An initializer named "x\0evil": to a reader of C strings it is "x", a default value
    # for graph input x, so y = x + 1 would silently ignore the input.
    "name_nul": lambda: model(
        [node("Add", ["x", "one"], ["y"], "add")],
        [value_info("x", FLOAT, [2])], [value_info("y", FLOAT, [2])],
        [tensor("x\0evil", [2], FLOAT, [5, 5]), tensor("one", [2], FLOAT, [1, 1])]),
    # A node output named "y\0" beside a node output named "y".
    "name_nul_output": lambda: model(
        [node("Relu", ["x"], ["y"], "first"), node("Neg", ["x"], ["y\0"], "second")],
        [value_info("x", FLOAT, [2])], [value_info("y", FLOAT, [2])]),
    "dup_input": lambda: model(
        [node("Relu", ["x"], ["y"], "r")],
        [value_info("x", FLOAT, [2]), value_info("x", FLOAT, [3])], [value_info("y", FLOAT, [2])]),
    # A HannWindow of 2^24 f32 (64 MiB) made at load: a weight like any other.
    "hann_window": lambda: model(
        [node("HannWindow", ["n"], ["y"], "hann")], [], [value_info("y", FLOAT, [1 << 24])],
        [tensor("n", [], INT64, [1 << 24])]),
    # An output whose name is 1 MiB long: more than a model.so's 4096 bytes.
    "long_name": lambda: model(
        [node("Relu", ["x"], ["n" * (1 << 20)], "r")],
        [value_info("x", FLOAT, [2])], [value_info("n" * (1 << 20), FLOAT, [2])]),
    # A MatMul of 2^31 + 8 rows: more than cuBLASLt's 2^31 - 1.
    "huge_matmul": lambda: model(
        [node("MatMul", ["x", "w"], ["y"], "mm")],
        [value_info("x", FLOAT, [(1 << 31) + 8, 2])], [value_info("y", FLOAT, [(1 << 31) + 8, 2])],
        [tensor("w", [2, 2], FLOAT, [1, 2, 3, 4])]),
    # inner dims 3 and 2: a shape error from inference, quoted inside the node's message.
    "matmul_mismatch": lambda: model(
        [node("MatMul", ["x", "w"], ["y"], "mm")],
        [value_info("x", FLOAT, [2, 3])], [value_info("y", FLOAT, [2, 2])],
        [tensor("w", [2, 2], FLOAT, [1, 2, 3, 4])]),
    "cycle": lambda: model(
        [node("Relu", ["x", "b"], ["a"], "n0"), node("Relu", ["a"], ["b"], "n1"),
         node("Relu", ["b"], ["y"], "n2")],
        [value_info("x", FLOAT, [2])], [value_info("y", FLOAT, [2])]),
}


# ---------------------------------------------------------------- sizes
# Hostile sizes for tests/lit/onnx/sizes.gir: each is one node ("n") whose attributes,
# constant inputs or input shape make a size wrap, divide by zero, or ask for more memory
# than any GPU has. gpucc must refuse each with one message naming the node.

I64_MAX = (1 << 63) - 1


def one_node(op, ins, attrs=(), inputs=((FLOAT, [1, 1, 4, 4]),), inits=(), opset=17,
             nout=1):
    """A model of one node n: graph inputs x0, x1, ... of the given (dtype, dims), then
    initializers, outputs y0, y1, ..."""
    names = ["x%d" % i for i in range(len(inputs))]
    outs = ["y%d" % i for i in range(nout)]
    return model([node(op, ins, outs, "n", attrs)],
                 [value_info(nm, dt, dims) for nm, (dt, dims) in zip(names, inputs)],
                 [value_info(o, FLOAT, []) for o in outs], inits, opset)


def conv(attrs, w_dims=(1, 1, 3, 3)):
    n = 1
    for d in w_dims:
        n *= d
    return one_node("Conv", ["x0", "w"], attrs,
                    inits=[tensor("w", list(w_dims), FLOAT, [0.5] * n)])


def i64s(name, vs):
    return tensor(name, [len(vs)], INT64, vs)


SIZE_MODELS = {
    # auto_pad works out pads from the stride: a stride of 0 must not be divided by.
    "conv_same_stride0": lambda: conv([attr_string("auto_pad", "SAME_UPPER"),
                                       attr_ints("strides", [0, 0])]),
    "conv_valid_stride0": lambda: conv([attr_string("auto_pad", "VALID"),
                                        attr_ints("strides", [0, 0])]),
    "avgpool_same_stride0": lambda: one_node(
        "AveragePool", ["x0"], [attr_string("auto_pad", "SAME_LOWER"),
                                attr_ints("kernel_shape", [2, 2]), attr_ints("strides", [0, 0])]),
    "avgpool_valid_stride0": lambda: one_node(
        "AveragePool", ["x0"], [attr_string("auto_pad", "VALID"),
                                attr_ints("kernel_shape", [2, 2]), attr_ints("strides", [0, 0])]),
    # (in + stride - 1), (kernel - 1) * dilation and in * stride overflow int64
    "conv_same_huge_stride": lambda: conv([attr_string("auto_pad", "SAME_UPPER"),
                                           attr_ints("strides", [I64_MAX, 1])]),
    "conv_same_huge_dilation": lambda: conv([attr_string("auto_pad", "SAME_LOWER"),
                                             attr_ints("dilations", [1 << 62, 1])]),
    "maxpool_same_huge_kernel": lambda: one_node(
        "MaxPool", ["x0"], [attr_string("auto_pad", "SAME_UPPER"),
                            attr_ints("kernel_shape", [I64_MAX, 1])]),
    "conv_transpose_same_huge_stride": lambda: one_node(
        "ConvTranspose", ["x0", "w"], [attr_string("auto_pad", "SAME_UPPER"),
                                       attr_ints("strides", [1 << 62, 1])],
        inits=[tensor("w", [1, 1, 3, 3], FLOAT, [0.5] * 9)]),
    # valid auto_pad and output_shape arithmetic, for the pads it gives
    "conv_same_stride2": lambda: conv([attr_string("auto_pad", "SAME_UPPER"),
                                       attr_ints("strides", [2, 1])]),
    "conv_transpose_same": lambda: one_node(
        "ConvTranspose", ["x0", "w"], [attr_string("auto_pad", "SAME_LOWER"),
                                       attr_ints("strides", [2, 3])],
        inits=[tensor("w", [1, 1, 3, 3], FLOAT, [0.5] * 9)]),
    "conv_transpose_output_shape_negative": lambda: one_node(
        "ConvTranspose", ["x0", "w"], [attr_ints("output_shape", [-5, 4])],
        inits=[tensor("w", [1, 1, 3, 3], FLOAT, [0.5] * 9)]),
    # EyeLike: i + k wraps; rows x cols x element size wraps (f32 and f64)
    "eyelike_k_max": lambda: one_node("EyeLike", ["x0"], [attr_int("k", I64_MAX)],
                                      inputs=[(FLOAT, [3, 3])]),
    "eyelike_k_min": lambda: one_node("EyeLike", ["x0"], [attr_int("k", -I64_MAX - 1)],
                                      inputs=[(FLOAT, [3, 3])]),
    "eyelike_k1": lambda: one_node("EyeLike", ["x0"], [attr_int("k", 1)],
                                   inputs=[(FLOAT, [3, 4])]),
    "eyelike_k_neg2": lambda: one_node("EyeLike", ["x0"], [attr_int("k", -2)],
                                       inputs=[(FLOAT, [4, 3])]),
    "eyelike_wrap_f32": lambda: one_node("EyeLike", ["x0"], inputs=[(FLOAT, [1 << 31, 1 << 31])]),
    "eyelike_wrap_f64": lambda: one_node("EyeLike", ["x0"], [attr_int("dtype", DOUBLE)],
                                         inputs=[(FLOAT, [1 << 30, 1 << 31])]),
    # the input fits (2^48 bools), the f64 identity of its shape does not
    "eyelike_dtype_wrap": lambda: one_node("EyeLike", ["x0"], [attr_int("dtype", DOUBLE)],
                                           inputs=[(BOOL, [1 << 24, 1 << 24])]),
    # a 1 TB identity: no wrap, but more than --max-weight-bytes
    "eyelike_big": lambda: one_node("EyeLike", ["x0"], inputs=[(FLOAT, [1 << 20, 1 << 18])]),
    # ConstantOfShape and Expand to shapes whose bytes wrap
    "constant_of_shape_wrap_f32": lambda: one_node(
        "ConstantOfShape", ["s"], inputs=[], inits=[i64s("s", [1 << 31, 1 << 31])]),
    "constant_of_shape_wrap_f64": lambda: one_node(
        "ConstantOfShape", ["s"],
        [attr_tensor("value", tensor("", [1], DOUBLE, raw=struct.pack("<d", 2)))],
        inputs=[], inits=[i64s("s", [1 << 30, 1 << 31])]),
    "constant_of_shape_negative": lambda: one_node(
        "ConstantOfShape", ["s"], inputs=[], inits=[i64s("s", [2, -3])]),
    "expand_wrap": lambda: one_node(
        "Expand", ["x0", "s"], inputs=[(DOUBLE, [1])], inits=[i64s("s", [1 << 30, 1 << 31])]),
    # Reshape with allowzero: no elements, but a dim no loop may count to
    "reshape_allowzero_huge": lambda: one_node(
        "Reshape", ["x0", "s"], [attr_int("allowzero", 1)], inputs=[(FLOAT, [0, 4])],
        inits=[i64s("s", [0, I64_MAX])]),
    # inputs whose element count wraps: Size multiplied the dims unchecked
    "size_wrap": lambda: one_node("Size", ["x0"], inputs=[(FLOAT, [1 << 32, 1 << 32])]),
    "input_huge": lambda: one_node("Relu", ["x0"], inputs=[(FLOAT, [I64_MAX, 2])]),
    # empty strings: a protobuf string of length 0 has no data pointer
    "gridsample_empty_mode": lambda: one_node(
        "GridSample", ["x0", "x1"], [attr_string("padding_mode", "")],
        inputs=[(FLOAT, [1, 1, 4, 4]), (FLOAT, [1, 2, 2, 2])], opset=16),
    # Einsum with an empty equation
    "einsum_empty": lambda: one_node("Einsum", ["x0"], [attr_string("equation", "")],
                                     inputs=[(FLOAT, [2])], opset=12),
    # Resize: floor(in x scale) does not fit an int64
    "resize_huge_scale": lambda: one_node(
        "Resize", ["x0", "", "sc"], inputs=[(FLOAT, [1, 1, 2, 2])],
        inits=[tensor("sc", [4], FLOAT, [1, 1, 1e30, 1e30])]),
    "resize_inf_scale": lambda: one_node(
        "Resize", ["x0", "", "sc"], inputs=[(FLOAT, [1, 1, 2, 2])],
        inits=[tensor("sc", [4], FLOAT, [1, 1, float("inf"), 1])]),
    # a convolution of two constant 65536-vectors with 65535 pads each side: 2^33
    # multiply-adds if folded at load, a small node otherwise
    "fold_costly_conv": lambda: model(
        [node("Conv", ["c", "w"], ["y0"], "n", [attr_ints("pads", [65535, 65535])])], [],
        [value_info("y0", FLOAT, [1, 1, 131071])],
        [tensor("c", [1, 1, 65536], FLOAT, raw=struct.pack("<f", 0.5) * 65536),
         tensor("w", [1, 1, 65536], FLOAT, raw=struct.pack("<f", 0.25) * 65536)]),
}
MODELS.update(SIZE_MODELS)


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "--list":
        print("\n".join(sorted(list(MODELS) + list(SIZED))))
        return 0
    args = sys.argv[1:]
    sized = len(args) in (2, 3) and args[0] in SIZED and (len(args) == 2 or args[2].isdigit())
    if not sized and (len(args) != 2 or args[0] not in MODELS):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    data = SIZED[args[0]](int(args[2]) if len(args) == 3 else 1000) if sized else MODELS[args[0]]()
    with open(args[1], "wb") as f:
        f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
