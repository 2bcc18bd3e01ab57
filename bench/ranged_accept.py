#!/usr/bin/env python3
"""Issue 25's acceptance on one GPU, one model and precision per call: a full-size model
exported with dynamic axes is compiled once into a model.so of shape classes, and at
each size of a sweep its outputs and time are compared with PyTorch and with a model.so
compiled for exactly that size (docs/dynamic-shapes.md, docs/perf.md).

Models (random weights, seeded; transformers and torchvision as installed):
  bert    BERT-base (12 layers, hidden 768), ids and attention mask [batch, seq], the last
          hidden state; --dim batch=1..64 --dim seq=1..512
  gpt2    GPT-2 small (12 layers), ids [1, seq], the last hidden state; --dim seq=1..1024
  resnet50  torchvision ResNet-50, x [batch, 3, 224, 224], logits; --dim batch=1..128

For each size, in one process, each model.so called through its C API with ctypes on
torch's current stream (the ranged one through gpucc_model_run_dims on inputs of that
size, the exact one through gpucc_model_run):
  - err_torch: ||ranged - PyTorch fp32|| / ||PyTorch fp32|| (PyTorch on the GPU, TF32
    off), against docs/precision.md's bound for the precision (tests/precision.py);
    the exact model.so's beside it;
  - err_exact: ||ranged - exact|| / ||exact||: the classes compute what the exact build
    does, up to the order of sums;
  - GPU ms of each (bench.py's GpuTimer: the L2 flushed before each call, the host's
    overhead hidden) and their ratio; synchronized call ms of each (bench.py's call_ms)
    and their ratio. The ranged call includes the inputs' padding copies, the size
    writes and, for a batch, every chunk's graph.
Also: the ranged compile's wall time and classes, gpucc_model_create's time, and the
device memory the ranged model takes (the driver's free memory before and after create)
beside its weights' bytes and an exact build's.

Writes one JSON line per size to --out and prints a table last.

usage: ranged_accept.py --gpucc PATH --model bert|gpt2|resnet50 --out FILE.jsonl
                        [--precision fp32|bf16] [--sizes 1x1,3x7,...] [--work DIR]
                        [--jobs N] [--iters N] [--no-time]
"""

import argparse
import concurrent.futures
import ctypes
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402  (ModelSo, GpuTimer, call_ms)
from precision import REL_BY_NORM  # noqa: E402  (bench put tests/ on the path)

# name: (symbols and ranges, default sweep)
MODELS = {
    "bert": ({"batch": "1..64", "seq": "1..512"},
             [(b, s) for b in (1, 3, 17, 64) for s in (1, 7, 128, 129, 300, 512)]),
    "gpt2": ({"seq": "1..1024"}, [(s,) for s in (1, 7, 128, 129, 300, 512, 700, 1024)]),
    "resnet50": ({"batch": "1..128"}, [(b,) for b in (1, 3, 17, 64, 100, 128)]),
}


def log(msg):
    print(msg, flush=True)


def gpucc(args, argv):
    t0 = time.perf_counter()
    p = subprocess.run([args.gpucc] + argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=1800)
    if p.returncode:
        raise RuntimeError("gpucc %s failed:\n%s" % (" ".join(argv), p.stdout[-4000:]))
    return p.stdout, time.perf_counter() - t0


def build_model(name):
    """(torch module, input names, output names, dynamic axes, example inputs)."""
    import torch
    torch.manual_seed(0)
    if name == "resnet50":
        import torchvision
        m = torchvision.models.resnet50().eval()
        return m, ["x"], ["y"], {"x": {0: "batch"}, "y": {0: "batch"}}, (torch.randn(2, 3, 224, 224),)
    import transformers

    class Hidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, ids, mask=None):
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

    if name == "bert":
        m = Hidden(transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False))
        ids = torch.ones(2, 8, dtype=torch.int64)
        axes = {n: {0: "batch", 1: "seq"} for n in ("ids", "mask", "y")}
        return m.eval(), ["ids", "mask"], ["y"], axes, (ids, ids)
    m = Hidden(transformers.GPT2Model(transformers.GPT2Config()))
    return (m.eval(), ["ids"], ["y"], {"ids": {1: "seq"}, "y": {1: "seq"}},
            (torch.ones(1, 8, dtype=torch.int64),))


def inputs_at(name, at, seed):
    """Fresh random inputs of one size, as torch tensors on the GPU."""
    import torch
    g = torch.Generator().manual_seed(seed)
    if name == "resnet50":
        return {"x": torch.randn(at[0], 3, 224, 224, generator=g).cuda()}
    if name == "gpt2":
        return {"ids": torch.randint(0, 50257, (1, at[0]), generator=g).cuda()}
    b, s = at
    mask = torch.ones(b, s, dtype=torch.int64)
    for i in range(b):  # each row's real length, the rest masked out, as a padded batch is
        mask[i, int(torch.randint(1, s + 1, (1,), generator=g)):] = 0
    return {"ids": torch.randint(0, 30522, (b, s), generator=g).cuda(), "mask": mask.cuda()}


class Ranged:
    """The ranged model.so, created once: call(inputs) runs gpucc_model_run_dims on
    torch's current stream into outputs of the inputs' sizes."""

    def __init__(self, so, m, names):
        self.so, self.m, self.names = so, m, names
        L, P = so.lib, ctypes.c_void_p
        I64P = ctypes.POINTER(ctypes.c_int64)
        L.gpucc_model_run_dims.argtypes = [P, ctypes.POINTER(P), ctypes.POINTER(I64P),
                                           ctypes.POINTER(P), ctypes.POINTER(I64P), P]
        L.gpucc_model_output_dims_for.argtypes = [P, ctypes.POINTER(I64P), ctypes.POINTER(I64P)]
        self.outputs = so.tensors(m, "output")

    def prepare(self, inputs):
        """A callable running the model at these inputs' sizes, and its outputs."""
        import torch
        L, P = self.so.lib, ctypes.c_void_p
        I64P = ctypes.POINTER(ctypes.c_int64)
        ins = [inputs[n].contiguous() for n in self.names]
        idims = [(ctypes.c_int64 * 8)(*t.shape) for t in ins]
        idp = (I64P * len(ins))(*[ctypes.cast(d, I64P) for d in idims])
        odims = [(ctypes.c_int64 * 8)() for _ in self.outputs]
        odp = (I64P * len(odims))(*[ctypes.cast(d, I64P) for d in odims])
        if L.gpucc_model_output_dims_for(self.m, idp, odp):
            self.so.fail("gpucc_model_output_dims_for")
        outs = [torch.empty(tuple(odims[j][k] for k in range(len(shape))),
                            dtype=getattr(torch, dtype), device="cuda")
                for j, (_, dtype, shape) in enumerate(self.outputs)]
        ip = (P * len(ins))(*[t.data_ptr() for t in ins])
        op = (P * len(outs))(*[t.data_ptr() for t in outs])

        def call():
            stream = torch.cuda.current_stream().cuda_stream
            if L.gpucc_model_run_dims(self.m, ip, idp, op, odp, stream):
                self.so.fail("gpucc_model_run_dims")
            return outs
        call.keep = (ins, idims, odims, ip, op, idp, odp)
        return call, outs


def rel(got, want):
    got, want = got.double(), want.double()
    return float((got - want).norm() / max(float(want.norm()), 1e-30))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--model", required=True, choices=sorted(MODELS))
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default="")
    ap.add_argument("--work", default="/tmp/ranged_accept")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--no-time", action="store_true", help="the checks only")
    args = ap.parse_args()
    args.gpucc = os.path.abspath(args.gpucc)
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ranges, sizes = MODELS[args.model]
    syms = list(ranges)
    if args.sizes:
        sizes = [tuple(int(x) for x in s.split("x")) for s in args.sizes.split(",")]
    work = os.path.join(args.work, "%s-%s" % (args.model, args.precision))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    os.environ["GPUCC_CACHE_DIR"] = os.path.join(work, "cache")

    module, names, outputs, axes, example = build_model(args.model)
    onnx_path = os.path.join(work, "model.onnx")
    t0 = time.perf_counter()
    with torch.no_grad():
        torch.onnx.export(module, example, onnx_path, input_names=names, output_names=outputs,
                          dynamic_axes=axes, opset_version=17, dynamo=False)
    log("exported %s in %.1f s" % (args.model, time.perf_counter() - t0))
    dims = sum((["--dim", "%s=%s" % (k, v)] for k, v in ranges.items()), [])
    prec = ["--precision", args.precision]
    ranged_so = os.path.join(work, "ranged.so")
    report, compile_s = gpucc(args, [onnx_path, "-o", ranged_so, "-v"] + dims + prec)
    nclasses = report.count(": class ")
    log("ranged: %d classes compiled in %.1f s" % (nclasses, compile_s))

    # the exact builds, in parallel (each NVRTC compile is one thread)
    def exact(at):
        so = os.path.join(work, "exact-%s.so" % "x".join(map(str, at)))
        fixed = sum((["--dim", "%s=%d" % (k, v)] for k, v in zip(syms, at)), [])
        _, s = gpucc(args, [onnx_path, "-o", so] + fixed + prec)
        return so, s
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        exacts = dict(zip(sizes, pool.map(exact, sizes)))
    log("exact builds: %d in %.1f s" % (len(sizes), time.perf_counter() - t0))

    module = module.cuda()
    timer = bench.GpuTimer("own")
    torch.cuda.synchronize()
    free0, _ = torch.cuda.mem_get_info()
    so = bench.ModelSo(ranged_so)
    m, create_s = so.create(0)
    torch.cuda.synchronize()
    free1, _ = torch.cuda.mem_get_info()
    ranged = Ranged(so, m, names)
    log("ranged create %.1f s; device memory %.1f MiB for a model.so of %.1f MiB" % (
        create_s, (free0 - free1) / 2**20, os.path.getsize(ranged_so) / 2**20))

    bound = REL_BY_NORM[args.precision]
    rows = []
    with open(args.out, "a") as out:
        for k, at in enumerate(sizes):
            inputs = inputs_at(args.model, at, 1000 + k)
            with torch.no_grad():
                want = module(*[inputs[n] for n in names]).float()
            call, got = ranged.prepare(inputs)
            got = [t.float() for t in call()]
            torch.cuda.synchronize()
            eso = bench.ModelSo(exacts[at][0])
            free2, _ = torch.cuda.mem_get_info()
            em, _ = eso.create(0)
            free3, _ = torch.cuda.mem_get_info()
            runner = bench.GpuccRunner(eso, em, inputs)
            ex = runner()[0].float().clone()
            row = {"model": args.model, "precision": args.precision,
                   "size": dict(zip(syms, at)), "gpu": torch.cuda.get_device_name(0),
                   "date": time.strftime("%Y-%m-%d"),
                   "err_torch": rel(got[0], want), "err_torch_exact": rel(ex, want),
                   "err_exact": rel(got[0], ex), "bound": bound,
                   "shape_ok": tuple(got[0].shape) == tuple(want.shape)}
            row["ok"] = bool(row["shape_ok"] and row["err_torch"] <= bound
                             and row["err_exact"] <= bound)
            launches = max(1, eso.lib.gpucc_model_kernels(em))
            nan = float("nan")
            # a chunked run launches a graph per chunk: twice the exact build's kernels
            # bounds it
            row["gpu_ms"] = nan if args.no_time else timer(call, 2 * launches)[0]
            row["gpu_ms_exact"] = nan if args.no_time else timer(runner, launches)[0]
            row["call_ms"] = nan if args.no_time else bench.call_ms(call, args.iters)
            row["call_ms_exact"] = nan if args.no_time else bench.call_ms(runner, args.iters)
            row["gpu_ratio"] = row["gpu_ms"] / row["gpu_ms_exact"]
            row["call_ratio"] = row["call_ms"] / row["call_ms_exact"]
            row["exact_device_mib"] = (free2 - free3) / 2**20
            row["exact_compile_s"] = exacts[at][1]
            row.update({"ranged_compile_s": compile_s, "classes": nclasses,
                        "ranged_create_s": create_s,
                        "ranged_device_mib": (free0 - free1) / 2**20})
            eso.lib.gpucc_model_destroy(em)
            del runner
            out.write(json.dumps(row) + "\n")
            out.flush()
            rows.append(row)
            log("%-10s err %.1e (exact %.1e, ranged vs exact %.1e) %s  gpu %.3f/%.3f ms = %.2fx"
                "  call %.3f/%.3f ms = %.2fx" % (
                    "x".join(map(str, at)), row["err_torch"], row["err_torch_exact"],
                    row["err_exact"], "ok" if row["ok"] else "FAIL", row["gpu_ms"],
                    row["gpu_ms_exact"], row["gpu_ratio"], row["call_ms"],
                    row["call_ms_exact"], row["call_ratio"]))
    so.lib.gpucc_model_destroy(m)
    failed = [r for r in rows if not r["ok"]]
    log("%s %s: %d sizes, %d failed; %d classes, compile %.0f s" % (
        args.model, args.precision, len(rows), len(failed), nclasses, compile_s))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
