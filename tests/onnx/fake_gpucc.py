#!/usr/bin/env python3
"""A stand-in for gpucc's ONNX command line, to test conformance.py's own logic.

Implements `FAKE MODEL --check-ops` and `FAKE run MODEL --cpu --input NAME=PATH ...
--output-dir DIR` with onnx's Python reference evaluator. Environment:
  FAKE_GPUCC_OPS    comma-separated op types it claims (default: a dozen simple ones;
                    "*": every op)
  FAKE_GPUCC_BREAK  op type: models using it get their first output off by one
  FAKE_GPUCC_CRASH  op type: models using it abort (as an ASan report would)
Not used by ctest; see tests/onnx/README.md.
"""
import os
import sys

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

DEFAULT_OPS = "Abs,Add,Sub,Mul,Div,Relu,Neg,Exp,Sqrt,Sigmoid,Tanh,MatMul,Transpose,Cast"


def ops_of(graph):
    ops = {}
    for node in graph.node:
        ops.setdefault(node.op_type, []).append(node.name or "%s#?" % node.op_type)
    return ops


def escape(name):
    return "".join(c if (c.isascii() and c.isalnum()) or c in "_.-" else
                   "".join("_x%02x" % b for b in c.encode()) for c in name)


def main(argv):
    supported = set(os.environ.get("FAKE_GPUCC_OPS", DEFAULT_OPS).split(","))
    if argv and argv[0] == "run":
        model_path = argv[1]
        args = argv[2:]
        feeds, out_dir, i = {}, None, 0
        while i < len(args):
            if args[i] == "--input":
                name, path = args[i + 1].split("=", 1)
                feeds[name.lstrip("%")] = np.load(path)
                i += 2
            elif args[i] == "--output-dir":
                out_dir = args[i + 1]
                i += 2
            else:
                i += 1
        model = onnx.load(model_path)
        ops = ops_of(model.graph)
        if os.environ.get("FAKE_GPUCC_CRASH") in ops:
            os.abort()
        outs = ReferenceEvaluator(model).run(None, feeds)
        if os.environ.get("FAKE_GPUCC_BREAK") in ops:
            outs[0] = (outs[0] + 1).astype(outs[0].dtype)
        os.makedirs(out_dir, exist_ok=True)
        for v, a in zip(model.graph.output, outs):
            np.save(os.path.join(out_dir, escape(v.name) + ".npy"), np.asarray(a))
        return 0
    if argv == ["--help"]:
        print("usage: fake gpucc FILE --check-ops | run FILE --cpu --input N=P --output-dir D")
        return 0
    model_path = argv[0]
    if "--check-ops" not in argv:
        print("fake gpucc: only --check-ops and run", file=sys.stderr)
        return 2
    model = onnx.load(model_path)
    bad = {op: names for op, names in ops_of(model.graph).items()
           if op not in supported and "*" not in supported}
    for op, names in sorted(bad.items()):
        print("%s: unsupported op '%s': %d node(s), first '%s'"
              % (model_path, op, len(names), names[0]), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
