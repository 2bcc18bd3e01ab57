#!/usr/bin/env python3
"""Models with ranged dims (docs/dynamic-shapes.md), each compiled once into a model.so of
shape classes and run on the GPU at sizes across its ranges, class bounds and sizes in
between, against what does not share gpucc's code for ranges:
  - the reference executor on the graph bound at exactly that size (`gpucc run --cpu
    --dim` of the model, or of the .gir with its ranges taken out), but for the PyTorch
    models, whose reference is PyTorch;
  - a model.so compiled for exactly that size (`--dim SYM=SIZE`);
  - onnxruntime (an ONNX model) and PyTorch (a transformers or torchvision model exported
    here with dynamic axes, when torch is installed: the GPU machine has it).
Floats within rtol 1e-4 and atol 1e-5 times the reference's largest magnitude (fp32;
the class's GEMMs and reductions run at other shapes than the exact build's, so their
sums are ordered otherwise); integers exact; shapes exact. A size outside a range must be
refused, naming the input and its range, with nothing written.

Exit 77 (ctest's skip code) with a line saying so when there is no CUDA driver or device.

usage: ranged_models.py --gpucc PATH [--tmp DIR] [--filter REGEX]
"""

import argparse
import os
import re
import shutil
import subprocess
import sys

import numpy as np

from gpu_models import SKIP, cuda_device  # beside this file

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RTOL, ATOL = 1e-4, 1e-5


def run(argv):
    p = subprocess.run(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=1200)
    return p.returncode, p.stdout


class Checker:
    def __init__(self):
        self.failed = 0
        self.passed = 0

    def close(self, what, got, want, scale_atol=True):
        """got against want: shape, then values. Returns whether they agree."""
        if got.shape != want.shape:
            return self.fail(what, "shape %s, expected %s" % (got.shape, want.shape))
        if got.dtype.kind in "iub":
            if not np.array_equal(got, want):
                return self.fail(what, "%d elements differ" % int((got != want).sum()))
            return True
        want = want.astype(np.float64)
        got = got.astype(np.float64)
        atol = ATOL * (max(1.0, float(np.abs(want).max())) if want.size and scale_atol else 1.0)
        if not np.allclose(got, want, rtol=RTOL, atol=atol):
            err = np.abs(got - want)
            i = int(np.argmax(err - RTOL * np.abs(want)))
            return self.fail(what, "element %d is %r, expected %r (max abs error %.3g)"
                             % (i, got.flat[i], want.flat[i], float(err.max())))
        return True

    def fail(self, what, why):
        print("FAILED  %s: %s" % (what, why))
        self.failed += 1
        return False


def gpucc_run(gpucc, target, inputs, out_dir, extra=()):
    """Runs `gpucc run target` on the .npy inputs; {name: array} or the error text."""
    shutil.rmtree(out_dir, ignore_errors=True)
    argv = [gpucc, "run", target, "--output-dir", out_dir] + list(extra)
    for name, path in inputs.items():
        argv += ["--input", "%s=%s" % (name, path)]
    rc, text = run(argv)
    if rc != 0:
        return text
    return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir)
            if f.endswith(".npy")}


def check_model(args, ck, name, model, ranges, sizes, make_inputs, more_refs=None,
                reference=True):
    """model (.gir or .onnx) compiled once with ranges {sym: "lo..hi"}, run at each of sizes
    ({sym: n}); make_inputs(sizes) gives {input: array}; more_refs(inputs) other
    references {label: {output: array}}; reference: the reference executor too (the
    PyTorch models leave it out: PyTorch is their reference, and the executor's time on
    them is most of this test's)."""
    work = os.path.join(args.tmp, name)
    os.makedirs(work, exist_ok=True)
    so = os.path.join(work, "ranged.so")
    dims = []
    for sym, r in ranges.items():
        dims += ["--dim", "%s=%s" % (sym, r)]
    rc, text = run([args.gpucc, model, "-v", "-o", so] + dims)
    if rc != 0:
        ck.fail(name, "the ranged compile failed:\n" + text)
        return
    classes = re.search(r"(\d+) shape classes", text)
    print("        %s: %s shape classes" % (name, classes.group(1) if classes else "?"))
    for at in sizes:
        label = "%s at %s" % (name, ", ".join("%s=%d" % kv for kv in at.items()))
        inputs = make_inputs(at)
        paths = {}
        for k, v in inputs.items():
            paths[k] = os.path.join(work, "in_%s.npy" % k)
            np.save(paths[k], v)
        got = gpucc_run(args.gpucc, so, paths, os.path.join(work, "ranged"))
        if isinstance(got, str):
            ck.fail(label, "the ranged model.so failed:\n" + got)
            continue
        exact_dims = []
        for sym, n in at.items():
            exact_dims += ["--dim", "%s=%d" % (sym, n)]
        exact_src = model
        if model.endswith(".gir"):  # the graph without its ranges, bound by --dim
            exact_src = os.path.join(work, "exact.gir")
            with open(model) as f, open(exact_src, "w") as g:
                g.write(re.sub(r" dims\([^)]*\)", "", f.read()))
        refs = {}
        cpu = gpucc_run(args.gpucc, exact_src, paths, os.path.join(work, "cpu"),
                        ["--cpu"] + exact_dims) if reference else None
        exact_so = os.path.join(work, "exact.so")
        rc, text = run([args.gpucc, exact_src, "-o", exact_so] + exact_dims)
        exact = gpucc_run(args.gpucc, exact_so, paths, os.path.join(work, "exact")) \
            if rc == 0 else text
        for ref_name, ref in (("the reference executor", cpu), ("the exact-size model.so", exact)):
            if ref is None:
                continue
            if isinstance(ref, str):
                ck.fail(label, "%s failed:\n%s" % (ref_name, ref))
            else:
                refs[ref_name] = ref
        if more_refs:
            refs.update(more_refs(inputs))
        ok = True
        for ref_name, ref in refs.items():
            for out, want in ref.items():
                if out not in got:
                    ok = ck.fail(label, "no output %s (outputs: %s)" % (out, sorted(got)))
                    continue
                ok = ck.close("%s: %s against %s" % (label, out, ref_name), got[out], want) and ok
        if ok:
            ck.passed += 1
            print("passed  %s (against %s)" % (label, ", ".join(refs)))
    # a size outside the range: refused, naming the input and its range
    sym, r = next(iter(ranges.items()))
    over = dict(sizes[0])
    over[sym] = int(r.split("..")[-1].split(",")[-1]) + 1
    paths = {}
    for k, v in make_inputs(over).items():
        paths[k] = os.path.join(work, "over_%s.npy" % k)
        np.save(paths[k], v)
    got = gpucc_run(args.gpucc, so, paths, os.path.join(work, "over"))
    if not isinstance(got, str) or "outside its range" not in got or os.path.isdir(
            os.path.join(work, "over")):
        ck.fail(name, "a size outside the range was not refused as it should be: %r" % (got,))
    else:
        ck.passed += 1
        print("passed  %s: %s=%d refused (%s)" % (name, sym, over[sym], got.strip().splitlines()[-1]))


def attention_gir(args, ck):
    model = os.path.join(REPO_ROOT, "tests/lit/driver/ranges-build.gir")

    def inputs(at):
        return {"x": np.random.RandomState(at["S"]).randn(2, at["S"], 8).astype(np.float32)}
    check_model(args, ck, "ranges-build.gir", model, {"S": "1..16"},
                [{"S": s} for s in (1, 3, 5, 8, 9, 16)], inputs)


def onnxruntime_refs(path):
    try:
        import onnxruntime
    except ImportError:
        return None
    sess = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])

    def refs(inputs):
        names = [o.name for o in sess.get_outputs()]
        return {"onnxruntime": dict(zip(names, sess.run(None, inputs)))}
    return refs


def attention_onnx(args, ck):
    path = os.path.join(args.tmp, "attention_mask_dynamic.onnx")
    rc, text = run([sys.executable, "tests/onnx/make_models.py", "attention_mask_dynamic", path])
    if rc:
        ck.fail("attention_mask_dynamic", text)
        return

    def inputs(at):
        r = np.random.RandomState(at["batch"] * 31 + at["seq"])
        mask = (r.rand(at["batch"], at["seq"]) < 0.7).astype(np.int64)
        mask[:, 0] = 1
        return {"x": r.randn(at["batch"], at["seq"], 8).astype(np.float32), "mask": mask}
    sizes = [{"batch": b, "seq": s} for b, s in ((1, 1), (3, 5), (4, 8), (2, 9), (4, 16), (1, 13))]
    check_model(args, ck, "attention_mask_dynamic", path, {"batch": "1..4", "seq": "1..16"},
                sizes, inputs, onnxruntime_refs(path))


def torch_models(args, ck):
    """Small transformers and torchvision models exported with dynamic axes, against
    PyTorch fp32 on the CPU."""
    try:
        import torch
        import transformers
        import torchvision
    except ImportError as e:
        print("skipped the PyTorch models: %s" % e)
        return
    torch.manual_seed(0)

    def export(name, module, example, names, outputs, axes):
        path = os.path.join(args.tmp, name + ".onnx")
        module.eval()
        with torch.no_grad():
            torch.onnx.export(module, example, path, input_names=names, output_names=outputs,
                              dynamic_axes=axes, opset_version=17, dynamo=False)
        return path

    def torch_refs(module, names, outputs):
        def refs(inputs):
            with torch.no_grad():
                got = module(*[torch.from_numpy(inputs[n]) for n in names])
            got = got if isinstance(got, (tuple, list)) else (got,)
            return {"PyTorch": {o: g.numpy() for o, g in zip(outputs, got)}}
        return refs

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            cfg = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2,
                                          num_attention_heads=4, intermediate_size=128,
                                          max_position_embeddings=64)
            self.m = transformers.BertModel(cfg, add_pooling_layer=False)

        def forward(self, ids, mask):
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

    bert = Bert().eval()
    ids = torch.ones(2, 8, dtype=torch.int64)
    path = export("bert", bert, (ids, ids), ["ids", "mask"], ["y"],
                  {"ids": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}, "y": {0: "batch", 1: "seq"}})

    def bert_inputs(at):
        r = np.random.RandomState(at["batch"] * 97 + at["seq"])
        mask = np.ones((at["batch"], at["seq"]), np.int64)
        for b in range(at["batch"]):
            mask[b, r.randint(1, at["seq"] + 1):] = 0
        return {"ids": r.randint(0, 100, (at["batch"], at["seq"])).astype(np.int64), "mask": mask}
    check_model(args, ck, "bert", path, {"batch": "1..4", "seq": "1..64"},
                [{"batch": b, "seq": s} for b, s in ((1, 1), (3, 7), (4, 17), (2, 33), (4, 64), (1, 50))],
                bert_inputs, torch_refs(bert, ["ids", "mask"], ["y"]), reference=False)

    class Gpt2(torch.nn.Module):
        def __init__(self):
            super().__init__()
            cfg = transformers.GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=4,
                                          n_positions=64)
            self.m = transformers.GPT2Model(cfg)

        def forward(self, ids):
            return self.m(input_ids=ids).last_hidden_state

    gpt2 = Gpt2().eval()
    path = export("gpt2", gpt2, (torch.ones(1, 8, dtype=torch.int64),), ["ids"], ["y"],
                  {"ids": {1: "seq"}, "y": {1: "seq"}})

    def gpt2_inputs(at):
        r = np.random.RandomState(at["seq"])
        return {"ids": r.randint(0, 100, (1, at["seq"])).astype(np.int64)}
    check_model(args, ck, "gpt2", path, {"seq": "1..64"},
                [{"seq": s} for s in (1, 7, 16, 17, 40, 64)], gpt2_inputs,
                torch_refs(gpt2, ["ids"], ["y"]), reference=False)

    resnet = torchvision.models.resnet18(num_classes=10).eval()
    path = export("resnet18", resnet, (torch.randn(2, 3, 64, 64),), ["x"], ["y"],
                  {"x": {0: "batch"}, "y": {0: "batch"}})

    def resnet_inputs(at):
        return {"x": np.random.RandomState(at["batch"]).randn(at["batch"], 3, 64, 64).astype(np.float32)}
    check_model(args, ck, "resnet18", path, {"batch": "1..8"},
                [{"batch": b} for b in (1, 3, 4, 5, 8)], resnet_inputs,
                torch_refs(resnet, ["x"], ["y"]), reference=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--tmp", default="/tmp/gpucc_ranged_models")
    ap.add_argument("--filter", default="")
    args = ap.parse_args()
    why = cuda_device()
    if why:
        print("ranged_models: skipped: %s" % why)
        return SKIP
    os.makedirs(args.tmp, exist_ok=True)
    ck = Checker()
    for case in (attention_gir, attention_onnx, torch_models):
        if re.search(args.filter, case.__name__):
            case(args, ck)
    print("ranged_models: %d passed, %d failed" % (ck.passed, ck.failed))
    return 1 if ck.failed else 0


if __name__ == "__main__":
    sys.exit(main())
