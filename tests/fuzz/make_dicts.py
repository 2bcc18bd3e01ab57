#!/usr/bin/env python3
"""Writes libFuzzer dictionaries for the dsl and onnx fuzzers from gpucc's own tables, so
they name every op, attribute and type the sources know today.

usage: make_dicts.py OUTDIR      writes OUTDIR/dsl.dict and OUTDIR/onnx.dict

dsl.dict:  op names and attribute names of ir/ops.def, dtype names of ir/dtypes.def, the
           words the DSL's parser and lowering compare identifiers with, punctuation, and
           load(...) of the files of tests/data.
onnx.dict: the names frontends/onnx compares with (op types, attribute names, domains).
           Protobuf's field keys are single bytes, which libFuzzer's mutations find alone.
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def literals(text):
    """The C string literals of text that are plain names (no spaces or escapes)."""
    return set(re.findall(r'"([A-Za-z_][A-Za-z0-9_.]*)"', text))


def quote(tok):
    out = []
    for b in tok.encode():
        if b in (0x22, 0x5C) or b < 0x20 or b > 0x7E:
            out.append("\\x%02x" % b)
        else:
            out.append(chr(b))
    return '"' + "".join(out) + '"'


def write(path, tokens):
    with open(path, "w", encoding="utf-8") as f:
        for t in sorted(tokens):
            f.write(quote(t) + "\n")


def dsl_tokens():
    ops = read("ir/ops.def")
    toks = set()
    for m in re.finditer(r'^OP\(\s*\w+,\s*"([^"]+)",[^"]*"([^"]*)"\)', ops, re.M):
        toks.add(m.group(1))
        for spec in filter(None, m.group(2).split(";")):
            toks.add(spec.split(":")[0] + " = ")
    toks |= set(re.findall(r'^DT\(\s*\w+,\s*"([^"]+)"', read("ir/dtypes.def"), re.M))
    toks |= literals(read("frontends/dsl/parser.y")) | literals(read("frontends/dsl/dsl.c"))
    toks |= {"graph ", "const ", "return ", "%x", "%\"", "@\"", " = ", "[N, ", "]", "{", "}",
             "(", ")", ", ", " -> ", "inf", "nan", "-1", "1e38", "9223372036854775807"}
    # The files fuzz_dsl's load(...) finds (tests/data), and the keys of the .safetensors.
    toks |= {'load("small.npy")', 'load("ids.npy")', 'load("small.safetensors", "fc.weight")',
             '"fc.bias"'}
    return toks


def onnx_tokens():
    toks = literals(read("frontends/onnx/onnx-ops.c")) | literals(read("frontends/onnx/onnx.c"))
    toks |= {"ai.onnx", "com.microsoft", "external_data", "location", "offset", "length"}
    return toks


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    write(os.path.join(out, "dsl.dict"), dsl_tokens())
    write(os.path.join(out, "onnx.dict"), onnx_tokens())


if __name__ == "__main__":
    main()
