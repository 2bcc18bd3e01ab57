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


FLOAT, INT64, BOOL = 1, 7, 9


def tensor(name, dims, dtype, values=None, raw=None):
    b = f_packed_ints(1, dims) + f_int(2, dtype) + f_bytes(8, name)
    if raw is not None:
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


def unknown_ops(n):
    """A chain of n nodes of n different ops gpucc does not know: n lines of --check-ops."""
    nodes, prev = [], "x"
    for i in range(n):
        out = "v%d" % i if i + 1 < n else "y"
        nodes.append(node("Unknown%d" % i, [prev], [out], "n%d" % i))
        prev = out
    return model(nodes, [value_info("x", FLOAT, [4])], [value_info("y", FLOAT, [4])])


SIZED = {"chain": chain, "reverse_constants": reverse_constants, "sum_inputs": sum_inputs,
         "concat_inputs": concat_inputs, "unknown_ops": unknown_ops}

MODELS = {
    "deep_nesting": deep_nesting,
    # y = relu(x @ w + b) with a symbolic batch dim; w in raw_data, b in float_data.
    "mlp": lambda: model(
        [node("MatMul", ["x", "w"], ["h"], "fc"), node("Add", ["h", "b"], ["hb"], "bias"),
         node("Relu", ["hb"], ["y"])],
        [value_info("x", FLOAT, ["batch", 2])], [value_info("y", FLOAT, ["batch", 3])],
        [tensor("w", [2, 3], FLOAT, raw=floats(1, 2, 3, 4, 5, 6)),
         tensor("b", [3], FLOAT, [0.5, -100, 0])]),
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
    "cycle": lambda: model(
        [node("Relu", ["x", "b"], ["a"], "n0"), node("Relu", ["a"], ["b"], "n1"),
         node("Relu", ["b"], ["y"], "n2")],
        [value_info("x", FLOAT, [2])], [value_info("y", FLOAT, [2])]),
}


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
