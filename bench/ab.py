#!/usr/bin/env python3
"""gpucc binaries side by side on zoo models, in one run on one GPU: the quick A/B of a
change (bench.py is the full benchmark).

For each model and batch: exports the model once (bench.py's seeded weights and inputs,
cached in --work as ts17.onnx), compiles it with each binary (--precision, bf16 by
default), creates each model.so cold, warm and with GPUCC_TUNE=0 (the create times' ratio
warm / untuned is printed), checks its outputs against PyTorch's fp32 (relative error by
norm; TF32 off, as bench.py), then times every model.so
with bench.py's GPU timer (L2 flushed, host overhead hidden), the binaries taking turns for
--rounds rounds; the best round of each is printed. --tc also times torch.compile
(mode="reduce-overhead") once, for the ratios.

usage: ab.py --bins NEW,OLD --models resnet50,googlenet [--batches 1,32] [--tc]
             [--precision bf16] [--rounds 2] [--work DIR] [--out FILE.jsonl] [--deadline SECONDS]
"""
import argparse
import copy
import json
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "models"))
import bench as B  # noqa: E402


class Args:
    """What bench.compile_so reads of bench.py's arguments."""

    def __init__(self, gpucc):
        self.gpucc = gpucc
        self.gpucc_only = False  # a compile of its own, timed cold and warm


def load(so, gin, want):
    """(runner, ModelSo, handle, row) of one compiled model.so, created and checked."""
    import torch
    m = B.ModelSo(so)
    h, cold = m.create(0)
    m.lib.gpucc_model_destroy(h)
    h, warm = m.create(0)
    m.lib.gpucc_model_destroy(h)
    os.environ["GPUCC_TUNE"] = "0"
    try:
        h, untuned = m.create(0)
    finally:
        del os.environ["GPUCC_TUNE"]
    m.lib.gpucc_model_destroy(h)
    h, _ = m.create(0)
    run = B.GpuccRunner(m, h, gin)
    got = [t.clone() for t in run()]
    torch.cuda.synchronize()
    row = {"create_cold_s": cold, "create_warm_s": warm, "create_untuned_s": untuned,
           "rel_err": B.rel_err(got, want), "kernels": m.lib.gpucc_model_kernels(h), "ms": []}
    return run, m, h, row


def one(a, timer, name, batch):
    import torch
    model, inputs = B.build(name, batch)
    work = os.path.join(a.work, "%s-b%d" % (name, batch))
    os.makedirs(work, exist_ok=True)
    B.save_inputs(inputs, work)
    onnx = os.path.join(work, "ts17.onnx")
    B.export_to(model, inputs, onnx, "ts17")
    model = model.cuda()
    gin = {k: v.cuda() for k, v in inputs.items()}
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        want = [t.float().clone() for t in B.as_list(model(*gin.values()))]
    row = {"model": name, "batch": batch, "precision": a.precision, "bins": a.bins,
           "gpu": torch.cuda.get_device_name(0)}
    runs = []
    for i, gpucc in enumerate(a.bins):
        so = os.path.join(work, "ab%d.so" % i)
        r = B.compile_so(Args(gpucc), onnx, so, a.precision, work)
        if "error" in r:
            row["b%d" % i] = {"error": r["error"]}
            runs.append(None)
            continue
        cache = os.path.join(work, "ab-cache%d" % i)
        shutil.rmtree(cache, ignore_errors=True)
        os.makedirs(cache)
        os.environ["GPUCC_CACHE_DIR"] = cache
        run, m, h, info = load(so, gin, want)
        runs.append((run, m, h))
        row["b%d" % i] = info
    for _ in range(a.rounds):
        for i, r in enumerate(runs):
            if r:
                row["b%d" % i]["ms"].append(timer(r[0], 2 + len(r[0].ins) + len(r[0].outs))[0])
    torch.cuda.synchronize()
    for r in runs:
        if r:
            r[1].lib.gpucc_model_destroy(r[2])
    if a.tc:
        dt = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision, torch.float32)
        m = copy.deepcopy(model).to(dt)
        targs = [t.to(dt) if t.dtype.is_floating_point else t for t in gin.values()]
        torch._dynamo.reset()
        with torch.no_grad():
            c = torch.compile(m, mode="reduce-overhead")
            for _ in range(3):
                c(*targs)
            torch.cuda.synchronize()
            row["tc_ms"] = timer(lambda: c(*targs), 8)[0]
        torch._dynamo.reset()
    torch.cuda.empty_cache()
    line = "%s b%d:" % (name, batch)
    for i in range(len(a.bins)):
        r = row["b%d" % i]
        if "error" in r:
            line += " [%d] %s" % (i, r["error"])
            continue
        r["best_ms"] = min(r["ms"])
        line += " [%d] %.3f ms (%s) kernels %d err %.1e warm/untuned create %.2f" % (
            i, r["best_ms"], "/".join("%.3f" % x for x in r["ms"]), r["kernels"], r["rel_err"],
            r["create_warm_s"] / max(r["create_untuned_s"], 1e-9))
        if "tc_ms" in row:
            line += " (/tc %.2f)" % (r["best_ms"] / row["tc_ms"])
    if "tc_ms" in row:
        line += " | torch.compile %.3f ms" % row["tc_ms"]
    print(line, flush=True)
    return row


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("usage: ")[1])
    ap.add_argument("--bins", default="build-gpu/gpucc,build-gpu/gpucc-old")
    ap.add_argument("--models", required=True)
    ap.add_argument("--batches", default="32")
    ap.add_argument("--work", default="/tmp/gpucc-ab")
    ap.add_argument("--tc", action="store_true")
    ap.add_argument("--precision", default="bf16", choices=B.PRECISIONS)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out")
    ap.add_argument("--deadline", type=float, default=0, help="start nothing new after this many seconds")
    a = ap.parse_args()
    a.bins = a.bins.split(",")
    t0 = time.monotonic()
    timer = B.GpuTimer("own")
    for name in a.models.split(","):
        for batch in map(int, a.batches.split(",")):
            if a.deadline and time.monotonic() - t0 > a.deadline:
                print("deadline reached", flush=True)
                return
            row = one(a, timer, name, batch)
            if a.out:
                with open(a.out, "a") as f:
                    f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
