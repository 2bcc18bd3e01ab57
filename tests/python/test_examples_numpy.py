#!/usr/bin/env python3
"""The examples against an independent numpy implementation of the same models.

Runs `gpucc run examples/X.gir --cpu` (printed outputs, batch N = 1 by default) and
`gpucc run examples/X.gir --cpu --dim N=... --output-dir DIR` (.npy outputs), and compares
both with numpy code written from the model's description, not from gpucc's executor:
  - constants and default inputs come from a Python copy of the generator documented at
    tensor_fill_random in ir/ir.h (splitmix64); an input not given on the command line
    is random(seed = 1 + its index, scale = 1);
  - like the reference executor, each op computes in float64 and rounds to float32.
Prints one line per check and "N passed, M failed"; exits 1 on any failure.

usage: test_examples_numpy.py --gpucc PATH [--tmp DIR]
"""

import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RTOL, ATOL = 1e-5, 1e-6

# ------------------------------------------------------------------ the generator


def random_f32(shape, seed, scale):
    """tensor_fill_random for f32: splitmix64, u = (z >> 11) * 2^-53 in [0, 1),
    value = (2u - 1) * scale computed in double, then rounded to float32."""
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    mask = (1 << 64) - 1
    # numpy uint64 array arithmetic wraps modulo 2^64, which is what the C code relies on.
    state = (np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
             + np.uint64(seed & mask))
    z = state
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
    return ((2.0 * u - 1.0) * float(scale)).astype(np.float32).reshape(shape)


def random_f32_slow(shape, seed, scale):
    """The same generator element by element with Python ints: checks the vectorized one."""
    mask = (1 << 64) - 1
    state, out = seed & mask, []
    for _ in range(int(np.prod(shape, dtype=np.int64)) if shape else 1):
        state = (state + 0x9E3779B97F4A7C15) & mask
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        z ^= z >> 31
        u = (z >> 11) * 2.0 ** -53
        out.append(np.float32((2 * u - 1) * scale))
    return np.array(out, dtype=np.float32).reshape(shape)


# ------------------------------------------------------------------ ops, as the executor defines them
# Every op takes float32 arrays, computes in float64 and rounds its result to float32.


def f32(a):
    return np.asarray(a, dtype=np.float64).astype(np.float32)


def matmul(a, b):
    return f32(np.matmul(a.astype(np.float64), b.astype(np.float64)))


def add(a, b):
    return f32(a.astype(np.float64) + b.astype(np.float64))


def mul(a, b):
    return f32(a.astype(np.float64) * b.astype(np.float64))


def relu(a):
    return f32(np.maximum(a.astype(np.float64), 0.0))


def softmax(a, axis=-1):
    x = a.astype(np.float64)
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return f32(e / np.sum(e, axis=axis, keepdims=True))


def layer_norm(x, scale, bias, eps=1e-5):
    """ONNX LayerNormalization over the last axis: biased variance."""
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return f32((x - mean) / np.sqrt(var + eps) * scale.astype(np.float64) + bias.astype(np.float64))


_erf = np.vectorize(math.erf, otypes=[np.float64])


def gelu(a):
    """The exact (erf) form: 0.5 x (1 + erf(x / sqrt 2))."""
    x = a.astype(np.float64)
    return f32(0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))))


# ------------------------------------------------------------------ the models, from their description


def mlp_reference(n):
    """examples/mlp.gir on its default input (random, seed 1) of n rows."""
    return mlp_forward(random_f32((n, 64), seed=1, scale=1.0))


def mlp_forward(x):
    """examples/mlp.gir on x (f32[n, 64]): 64 -> 128 -> relu -> 10 -> softmax, and the
    argmax class. tests/serving checks the served model's answers with it."""
    x = np.asarray(x, np.float32)
    w1 = random_f32((64, 128), 101, 0.125)
    b1 = random_f32((128,), 102, 0.1)
    w2 = random_f32((128, 10), 103, 0.5)
    b2 = np.zeros((10,), np.float32)
    h = relu(add(matmul(x, w1), b1))
    logits = add(matmul(h, w2), b2)
    probs = softmax(logits, axis=-1)
    cls = np.argmax(probs, axis=-1).astype(np.int64)
    return {"probs": probs, "class": cls}


def transformer_reference(n):
    """examples/transformer_block.gir: pre-LN block, seq 16, dim 64, 4 heads, causal."""
    seq, dim, heads = 16, 64, 4
    hd = dim // heads
    x = random_f32((n, seq, dim), seed=1, scale=1.0)
    ln1_s, ln1_b = np.ones(dim, np.float32), np.zeros(dim, np.float32)
    ln2_s, ln2_b = np.full(dim, 0.9, np.float32), random_f32((dim,), 21, 0.05)
    wq, bq = random_f32((dim, dim), 11, 0.125), random_f32((dim,), 12, 0.02)
    wk, bk = random_f32((dim, dim), 13, 0.125), random_f32((dim,), 14, 0.02)
    wv, bv = random_f32((dim, dim), 15, 0.125), random_f32((dim,), 16, 0.02)
    wo, bo = random_f32((dim, dim), 17, 0.125), random_f32((dim,), 18, 0.02)
    w1, b1 = random_f32((dim, 4 * dim), 31, 0.125), random_f32((4 * dim,), 32, 0.02)
    w2, b2 = random_f32((4 * dim, dim), 33, 0.0625), random_f32((dim,), 34, 0.02)

    # causal: query i sees keys j <= i
    mask = np.where(np.triu(np.ones((seq, seq), bool), k=1), -np.inf, 0.0).astype(np.float32)

    def split_heads(t):  # [n, seq, dim] -> [n, heads, seq, hd]
        return t.reshape(n, seq, heads, hd).transpose(0, 2, 1, 3)

    h = layer_norm(x, ln1_s, ln1_b)
    q = split_heads(add(matmul(h, wq), bq))
    k = split_heads(add(matmul(h, wk), bk))
    v = split_heads(add(matmul(h, wv), bv))
    scores = add(mul(matmul(q, k.transpose(0, 1, 3, 2)), np.float32(1.0 / math.sqrt(hd))), mask)
    attn = softmax(scores, axis=-1)
    merged = matmul(attn, v).transpose(0, 2, 1, 3).reshape(n, seq, dim)
    x1 = add(x, add(matmul(merged, wo), bo))
    m = gelu(add(matmul(layer_norm(x1, ln2_s, ln2_b), w1), b1))
    y = add(x1, add(matmul(m, w2), b2))
    return {"y": y}


# ------------------------------------------------------------------ reading gpucc's output

HEADER = re.compile(r'^%("(?:[^"\\]|\\.)*"|[A-Za-z0-9_.]+): ([a-z0-9]+)\[([^\]]*)\]\s*$')
NUMBER = re.compile(r"[-+]?(?:inf|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)")
NP_DTYPES = {"f64": np.float64, "f32": np.float32, "f16": np.float16, "i64": np.int64,
             "i32": np.int32, "i16": np.int16, "i8": np.int8, "u8": np.uint8, "bool": np.bool_}


def parse_printed(text):
    """'%name: f32[1, 10]' followed by a numpy-like nested list, per output."""
    outputs, current = {}, None
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            name = m.group(1)
            if name.startswith('"'):
                name = name[1:-1]
            dims = [int(d) for d in m.group(3).split(",")] if m.group(3).strip() else []
            current = [name, m.group(2), dims, []]
            outputs[name] = current
        elif current is not None:
            current[3].append(line)
        elif line.strip():
            raise ValueError(f"output text before the first '%name: type' line: {line!r}")
    result = {}
    for name, dtype, dims, lines in outputs.values():
        body = " ".join(lines)
        depth = max_depth = 0
        for c in body:
            if c == "[":
                depth += 1
                max_depth = max(max_depth, depth)
            elif c == "]":
                depth -= 1
        if depth != 0 or max_depth != len(dims):
            raise ValueError(f"%{name}: brackets nest {max_depth} deep, the type has rank {len(dims)}")
        words = NUMBER.findall(body)
        want = int(np.prod(dims, dtype=np.int64)) if dims else 1
        if len(words) != want:
            raise ValueError(f"%{name}: {len(words)} numbers printed for {dtype}{dims}")
        vals = [float(w) for w in words]
        result[name] = (dtype, np.array(vals, dtype=np.float64).reshape(dims))
    return result


# ------------------------------------------------------------------ the checks


class Checks:
    def __init__(self):
        self.passed = self.failed = 0

    def report(self, name, problem):
        if problem is None:
            self.passed += 1
            print(f"PASS {name}")
        else:
            self.failed += 1
            print(f"FAIL {name}: {problem}")
        sys.stdout.flush()


def compare(name, got, want):
    """None if got matches want (same shape; floats within RTOL/ATOL, ints exactly)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"{name}: shape {list(got.shape)}, want {list(want.shape)}"
    if np.issubdtype(want.dtype, np.floating):
        g, w = got.astype(np.float64), want.astype(np.float64)
        bad = ~np.isclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True)
        if bad.any():
            i = tuple(int(k) for k in np.argwhere(bad)[0])
            return (f"{name}: {int(bad.sum())} of {bad.size} elements differ; first at {list(i)}: "
                    f"got {float(g[i])!r}, want {float(w[i])!r}")
        return None
    if not np.array_equal(got.astype(np.int64), want.astype(np.int64)):
        return f"{name}: got {got.tolist()}, want {want.tolist()}"
    return None


def run_gpucc(gpucc, args):
    r = subprocess.run([gpucc] + args, cwd=REPO_ROOT, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"`gpucc {' '.join(args)}` exited with {r.returncode}:\n"
                           + r.stderr.decode("utf-8", "replace").rstrip())
    return r.stdout.decode("utf-8", "replace")


def check_printed(gpucc, example, reference, types):
    """`gpucc run X --cpu --print-all`: the text on stdout, batch 1."""
    out = parse_printed(run_gpucc(gpucc, ["run", example, "--cpu", "--print-all"]))
    want = reference(1)
    if sorted(out) != sorted(want):
        return f"outputs {sorted(out)}, want {sorted(want)}"
    for name, (dtype, vals) in out.items():
        if dtype != types[name]:
            return f"%{name} printed as {dtype}, want {types[name]}"
        problem = compare("%" + name, vals, want[name])
        if problem:
            return problem
    return None


def check_npy(gpucc, example, reference, types, n, tmp):
    """`gpucc run X --cpu --dim N=n --output-dir DIR`: one .npy per output."""
    out_dir = os.path.join(tmp, os.path.basename(example) + f".N{n}")
    shutil.rmtree(out_dir, ignore_errors=True)
    run_gpucc(gpucc, ["run", example, "--cpu", "--dim", f"N={n}", "--output-dir", out_dir])
    want = reference(n)
    written = sorted(f[:-4] for f in os.listdir(out_dir) if f.endswith(".npy"))
    if written != sorted(want):
        return f"wrote {written}, want {sorted(want)}"
    for name in want:
        got = np.load(os.path.join(out_dir, name + ".npy"))
        if got.dtype != NP_DTYPES[types[name]]:
            return f"{name}.npy has dtype {got.dtype}, want {types[name]}"
        problem = compare(name + ".npy", got, want[name])
        if problem:
            return problem
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--tmp", help="scratch folder (default: a fresh temporary one)")
    args = ap.parse_args()
    gpucc = os.path.abspath(args.gpucc)
    tmp = os.path.abspath(args.tmp) if args.tmp else tempfile.mkdtemp(prefix="gpucc-numpy-")
    os.makedirs(tmp, exist_ok=True)
    checks = Checks()

    fast, slow = random_f32((3, 5), 7, 0.5), random_f32_slow((3, 5), 7, 0.5)
    checks.report("generator: vectorized == element by element",
                  None if np.array_equal(fast, slow) else "the two Python generators disagree")

    examples = [
        ("examples/mlp.gir", mlp_reference, {"probs": "f32", "class": "i64"}, 3),
        ("examples/transformer_block.gir", transformer_reference, {"y": "f32"}, 2),
    ]
    for example, reference, types, n in examples:
        for name, fn in ((f"{example} printed (N=1)", lambda: check_printed(gpucc, example, reference, types)),
                         (f"{example} --output-dir (N={n})",
                          lambda: check_npy(gpucc, example, reference, types, n, tmp))):
            try:
                problem = fn()
            except Exception as e:  # a crash, a bad exit or unreadable output is a failure
                problem = f"{type(e).__name__}: {e}"
            checks.report(name, problem)

    print(f"{checks.passed} passed, {checks.failed} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
