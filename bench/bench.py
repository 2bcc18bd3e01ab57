#!/usr/bin/env python3
"""gpucc against PyTorch eager and torch.compile, on the GPU, in one run.

For each model (ResNet-50, MobileNetV2, ViT-B/16 at 224x224; BERT-base and GPT-2 small at
sequence 128; random weights from tests/models/export.py's fixed seeds), each batch and
each precision (--precisions, fp32 and bf16 by default):
  1. PyTorch eager: fp32 with TF32 off (gpucc's fp32 uses no TF32 either), tf32 with it
     on, bf16/fp16 with the module's weights and float inputs converted to that type;
  2. torch.compile(mode="reduce-overhead") of the same module;
  3. the module exported once with torch.onnx.export (TorchScript exporter, opset 17),
     compiled with `gpucc model.onnx -o model.so --precision=P`, run once with the same
     input (its first output checked against PyTorch's fp32 output: relative error by
     norm), then timed with `gpucc run model.so --iters N`;
  4. the same with `--no-fuse` added: gpucc before fusion, one kernel or GEMM per node.
fp8 is gpucc's bf16 with e4m3 linear layers, calibrated on other inputs of the same kind
(fresh random images; the same token ids): PyTorch runs bf16 beside it, having no fp8
inference for these modules of its own.
Every latency is the median over N runs, each between two CUDA events and waited for
(the way gpucc_model_time times a replay of the model's CUDA graph), after warm-up runs.
Kernels per inference: gpucc's are the kernel nodes of the model's CUDA graph (`gpucc run`
prints them: its own kernels and every kernel cuBLASLt launches, a split-K reduction or a
separate epilogue included); PyTorch's from torch.profiler (CUDA kernels in one eager
inference).

Prints one Markdown table row per model, batch and precision (docs/perf.md keeps them)
and writes the same rows to --out. Not a test: nothing here passes or fails on a number.

usage: bench.py --gpucc build/gpucc [--models resnet50,...] [--batches 1,32]
                [--precisions fp32,bf16] [--iters 100] [--work DIR] [--out FILE]
"""
import argparse
import concurrent.futures
import os
import re
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "models"))
import export as exp  # noqa: E402  (build(), randomize(), seed(): the tests' own models)

MODELS = ["resnet50", "mobilenetv2", "vit_b_16", "bert", "gpt2"]


def batched(inputs, batch):
    """The export's batch-1 inputs at this batch: fresh random images, repeated ids/masks."""
    out = {}
    for k, t in inputs.items():
        if t.dtype.is_floating_point:
            out[k] = torch.randn(batch, *t.shape[1:])
        else:
            out[k] = t.repeat(batch, *([1] * (t.dim() - 1)))
    return out


def time_cuda(fn, iters, warmup=10):
    """Median ms of fn() over iters runs, each between two CUDA events, synchronized."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for _ in range(iters):
        start.record()
        fn()
        end.record()
        end.synchronize()
        ms.append(start.elapsed_time(end))
    return statistics.median(ms)


def torch_kernels(model, args):
    """CUDA kernels launched by one eager inference."""
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
        model(*args)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower())


def first_output(out):
    if isinstance(out, torch.Tensor):
        return out
    return out[0]


def run(argv, timeout=1800):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout)
    text = p.stdout.decode("utf-8", "replace")
    if p.returncode != 0:
        raise RuntimeError("%s: exit %d:\n%s" % (" ".join(argv), p.returncode, text[-3000:]))
    return text


TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16,
                "fp16": torch.float16, "fp8": torch.bfloat16}


def so_path(work, flags):
    return os.path.join(work, "model%s.so" % "".join(
        "-" + f.lstrip("-").replace("=", "") for f in flags if f.startswith("--p") or
        f.startswith("--n")))


def gpucc_compile(args, onnx_path, work, flags):
    """Compiles model.onnx with flags: (launches in the plan, seconds)."""
    t0 = time.monotonic()
    report = run([args.gpucc, onnx_path, "-o", so_path(work, flags), "-v"] + flags)
    m = re.search(r"(\d+) kernel launches", report)
    return (int(m.group(1)) if m else -1), time.monotonic() - t0


def gpucc_time(args, so, given, first, want):
    """Median ms of model.so, the error of its output named first against want, and its
    kernels per inference: one run to size the count, then the timed replays, the last of
    which writes the outputs. given: the --input arguments."""
    out_dir = so[:-3] + "-out"
    # Enough replays for a stable median within about 3 s of GPU time.
    text = run([args.gpucc, "run", so, "--iters", "3"] + given)
    m = re.search(r"median latency ([0-9.]+) ms", text)
    iters = args.iters if not m else max(20, min(args.iters, int(3000 / max(float(m.group(1)), 1e-3))))
    text = run([args.gpucc, "run", so, "--output-dir", out_dir, "--iters", str(iters)] + given)
    m = re.search(r"median latency ([0-9.]+) ms", text)
    ms = float(m.group(1)) if m else float("nan")
    m = re.search(r"(\d+) kernels per inference", text)
    kernels = int(m.group(1)) if m else -1
    path = os.path.join(out_dir, exp_name(first) + ".npy")
    err = (float(np.linalg.norm(np.load(path) - want) / np.linalg.norm(want))
           if os.path.exists(path) else float("nan"))
    return ms, err, kernels


def bench_one(args, name, batch):
    """The rows of one model at one batch, one per precision (one export for all)."""
    exp.seed(1000 + exp.MODELS.index(name))  # the weights tests/models/export.py --full uses
    model, inputs = exp.build(name, True)
    exp.randomize(model).eval()
    inputs = batched(inputs, batch)
    work = os.path.join(args.work, "%s-b%d" % (name, batch))
    os.makedirs(work, exist_ok=True)
    onnx_path = os.path.join(work, "model.onnx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp.export(model, inputs, onnx_path, False, 17)

    import onnx
    first = onnx.load(onnx_path, load_external_data=False).graph.output[0].name
    given, calibrate = [], []
    for k, t in inputs.items():
        p = os.path.join(work, "in.%s.npy" % k)
        np.save(p, t.numpy())
        given += ["--input", "%s=%s" % (k, p)]
        if t.dtype.is_floating_point:  # fp8's calibration: another input of the kind
            p = os.path.join(work, "calib.%s.npy" % k)
            np.save(p, torch.randn(t.shape).numpy())
        calibrate += ["--calibrate", "%s=%s" % (k, p)]

    # Every model.so first, in parallel (NVRTC is CPU-bound; nothing is timed yet).
    precisions = args.precisions.split(",")
    variants = [(p, fused) for p in precisions for fused in (True, False)]
    flag_sets = {v: ["--precision=" + v[0]] + ([] if v[1] else ["--no-fuse"]) +
                 (calibrate if v[0] == "fp8" else []) for v in variants}
    with concurrent.futures.ThreadPoolExecutor(len(variants)) as pool:
        built = dict(zip(variants, pool.map(
            lambda v: gpucc_compile(args, onnx_path, work, flag_sets[v]), variants)))

    dev = torch.device("cuda")
    model = model.to(dev)
    rows = []
    with torch.no_grad():
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        want = first_output(model(*[t.to(dev) for t in inputs.values()])).double().cpu().numpy()
        for prec in precisions:
            dtype = TORCH_DTYPES[prec]
            torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
            torch.backends.cudnn.allow_tf32 = prec == "tf32"
            model = model.to(dtype)
            gpu_args = [t.to(dev, dtype) if t.dtype.is_floating_point else t.to(dev)
                        for t in inputs.values()]
            row = {"model": name, "batch": batch, "precision": prec}
            row["eager"] = time_cuda(lambda: model(*gpu_args), args.iters)
            row["torch_kernels"] = torch_kernels(model, gpu_args)
            torch._dynamo.reset()
            compiled = torch.compile(model, mode="reduce-overhead")
            t0 = time.monotonic()
            for _ in range(3):
                compiled(*gpu_args)
            row["compile_s"] = time.monotonic() - t0
            row["compiled"] = time_cuda(lambda: compiled(*gpu_args), args.iters)
            del compiled
            torch.cuda.empty_cache()
            row["planned"], row["gpucc_compile_s"] = built[(prec, True)]
            row["gpucc"], row["rel_err"], row["gpucc_kernels"] = gpucc_time(
                args, so_path(work, flag_sets[(prec, True)]), given, first, want)
            row["unfused"], row["unfused_err"], row["unfused_kernels"] = gpucc_time(
                args, so_path(work, flag_sets[(prec, False)]), given, first, want)
            rows.append(row)
    return rows


def exp_name(name):
    return "".join(c if c.isascii() and (c.isalnum() or c in "_.-") else "_x%02x" % ord(c)
                   for c in name)


HEADER = ("| model | batch | precision | gpucc ms | gpucc unfused ms | eager ms | "
          "torch.compile ms | gpucc / eager | gpucc / compile | gpucc kernels | "
          "unfused kernels | eager kernels | gpucc vs PyTorch fp32 rel err |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def md_row(r):
    return ("| %s | %d | %s | %.3f | %.3f | %.3f | %.3f | %.2f | %.2f | %d | %d | %d | %.1e |" % (
        r["model"], r["batch"], r["precision"], r["gpucc"], r["unfused"], r["eager"],
        r["compiled"], r["gpucc"] / r["eager"], r["gpucc"] / r["compiled"],
        r["gpucc_kernels"], r["unfused_kernels"], r["torch_kernels"], r["rel_err"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--precisions", default="fp32,bf16")
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--work", default="/tmp/gpucc-bench")
    ap.add_argument("--out", help="also write the table here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench: no CUDA device: nothing to measure")
        return 1
    for p in args.precisions.split(","):
        if p not in TORCH_DTYPES:
            ap.error("unknown precision '%s' (known: %s)" % (p, ", ".join(TORCH_DTYPES)))
    print("bench: %s, torch %s, %d iterations per median" % (
        torch.cuda.get_device_name(), torch.__version__, args.iters), flush=True)
    rows = []
    for name in args.models.split(","):
        for b in [int(x) for x in args.batches.split(",")]:
            try:
                rs = bench_one(args, name, b)
            except Exception as e:  # one model's failure must not hide the others' rows
                print("bench: %s batch %d: %s" % (name, b, e), flush=True)
                continue
            rows += rs
            for r in rs:
                print(md_row(r) + "  (compile: gpucc %.1f s, torch.compile %.1f s; %d launches "
                      "planned)" % (r["gpucc_compile_s"], r["compile_s"], r["planned"]),
                      flush=True)
    text = HEADER + "\n" + "\n".join(md_row(r) for r in rows)
    print("\n" + text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
