#!/usr/bin/env python3
"""The benchmark zoo: gpucc against PyTorch eager and torch.compile, in one run on one GPU.

The zoo (issue 24): torchvision's resnet50, mobilenet_v2, vit_b_16, efficientnet_b0,
convnext_tiny, regnet_y_800mf, shufflenet_v2_x1_0 and googlenet on 224x224 images;
transformers' BERT-base, GPT-2 small, DistilBERT, a T5 encoder (t5-small), a Llama-class
decoder (hidden 768, 12 layers, 12 query heads sharing 4 key/value heads, SwiGLU 2048)
at sequence 128, and whisper-base's encoder on [B, 80, 3000] log-mel features. Every
configuration is built in code with random weights from tests/models/export.py's fixed
seeds (`--full`): nothing is downloaded. Beyond the zoo, `--models` also takes Swin-T
(swin_t) and a deberta-v3-base encoder (deberta_v3), which the geometric means leave out.

For each model, batch and precision, one row (a JSON line appended to --results as soon
as it is done, so a run cut short keeps what it finished and `--resume` goes on from
there):
  - correctness: each float output of gpucc's model.so against PyTorch's fp32 output on
    the GPU (TF32 off), relative error by norm, passed or not against the precision's
    bound in docs/precision.md (tests/precision.py); PyTorch's own error in that precision
    beside it; fp32 rows also against PyTorch's model in float64, gpucc's error and
    PyTorch fp32's (the two fp32 answers differ by about the larger of the two);
  - kernels per inference: gpucc's CUDA graph's kernel nodes (gpucc_model_kernels,
    cuBLASLt's included), eager's CUDA kernels from torch.profiler;
  - for gpucc (its model.so called through its C API with ctypes: gpucc_model_create, then
    gpucc_model_run on torch tensors' device pointers and torch's current stream), eager
    and torch.compile(mode="reduce-overhead"), in the same process:
      * call ms: synchronized per-call latency, the median over calls each between two
        CUDA events and waited for (host overhead included);
      * GPU ms: the median GPU time of one call with the L2 flushed before each (a 256 MiB
        or 4x L2 memset between calls) and the host's overhead hidden: a group of calls is
        enqueued behind a sleep kernel long enough for the host to enqueue them all, so
        the events time the GPU's work only (a group that the GPU reached before the host
        had enqueued it is timed again with a longer sleep). `--gpu-timer triton` uses
        triton.testing.do_bench (median) instead, which hides the host only as far as its
        cache flush lets the host run ahead;
  - gpucc's compile time (`gpucc model.onnx -o model.so`, cold with an empty
    GPUCC_CACHE_DIR, then warm with the same one) and create time (gpucc_model_create,
    cold with an empty GPUCC_CACHE_DIR for the runtime's cached choices, then the median
    of 5 warm loads and of 5 with timing off, GPUCC_TUNE=0, taken in turn), and
    torch.compile's (its first three calls);
  - model FLOPs (torch.utils.flop_counter: matmuls, convolutions, attention) over gpucc's
    GPU time as a share of the GPU's dense GEMM rate in that precision, measured in the
    same run (an 8192^3 torch.matmul; fp32 with TF32 off).

Exports: --exports picks how each model reaches ONNX: ts17 (the TorchScript exporter at
opset 17, the default), ts13, ts11, ts17-nofold (do_constant_folding=False: BatchNorm
left unfolded) and dynamo (torch.onnx.export(dynamo=True), opset 18). Below opset 14
attention is written out (export.math_attention), as older exporters did. With several
exports, PyTorch is measured once per model, batch and precision and gpucc per export,
and the table compares each model's exports (GPU time and kernels against the best).
--gpucc-only skips PyTorch's eager and torch.compile timings (its fp32 answer, for the
errors, stays) and compiles each export once, with an NVRTC cache the model's exports
and precisions share: gpucc's rows across exports and precisions, without
torch.compile's compile (4 to 18 s a model and precision in the zoo), the baselines'
timing or gpucc's compile times.

--counts-only needs no GPU: it exports each model each way and runs `gpucc --emit=plan -v`
(passes, codegen and memory plan, no NVRTC) for the planned launches, or with --nvrtc
`gpucc -o model.so -v` (NVRTC too: the plan's kernel and GEMM launches; cuBLASLt may add
kernels of its own on the GPU); a model gpucc fails on gets its error message instead.

--table prints the Markdown tables of the rows in --results (the last row of each model,
batch, precision and export): docs/perf.md keeps them.

usage: bench.py --gpucc build/gpucc [--models M,...] [--batches 1,32]
                [--precisions bf16,fp32] [--exports ts17,...] [--work DIR]
                [--results FILE.jsonl] [--resume] [--deadline S] [--iters N] [--gpucc-only]
                [--gpu-timer own|triton] [--counts-only [--nvrtc]] [--table]
"""
import argparse
import copy
import ctypes
import datetime
import gc
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "models"))
sys.path.insert(0, os.path.join(REPO, "tests"))
from precision import REL_BY_NORM  # noqa: E402  (docs/precision.md's bounds)

# tests/models/export.py's names, in the order.
ZOO = ["resnet50", "mobilenetv2", "vit_b_16", "efficientnet_b0", "convnext_tiny",
       "regnet_y_800mf", "shufflenet_v2_x1_0", "googlenet", "bert", "gpt2", "distilbert",
       "t5_encoder", "llama", "whisper_encoder"]
# measured on request (--models), beyond the zoo: tests/models/export.py's later models,
# not in the geometric means
EXTRA = ["swin_t", "deberta_v3"]
# name: (dynamo, opset, constant folding)
EXPORTS = {"ts17": (False, 17, True), "ts13": (False, 13, True), "ts11": (False, 11, True),
           "ts17-nofold": (False, 17, False), "dynamo": (True, 18, True)}
PRECISIONS = ["bf16", "fp32", "tf32", "fp16"]
# warm and untuned loads per row (create times are their medians)
CREATES = 5
DEVICE = "cuda"  # a name, so a test of the script's own logic can run it on the CPU


def log(msg):
    print("bench: " + msg, flush=True)


# ---------------------------------------------------------------------- models and exports


def batched(inputs, batch):
    """The export's batch-1 inputs at this batch: fresh random floats (images, log-mel
    features), token ids and masks repeated."""
    import torch
    out = {}
    for k, t in inputs.items():
        if t.dtype.is_floating_point:
            out[k] = torch.randn(batch, *t.shape[1:])
        else:
            out[k] = t.repeat(batch, *([1] * (t.dim() - 1)))
    return out


def build(name, batch, full=True):
    """(module in eval mode, {input name: CPU tensor}) with the fixed seed's weights;
    full=False: the test suite's miniature of the model (--mini)."""
    import export as exp
    exp.seed(1000 + exp.MODELS.index(name))  # the weights tests/models/export.py --full uses
    model, inputs = exp.build(name, full)
    exp.randomize(model).eval()
    return model, batched(inputs, batch)


def short_error(e):
    """One line of an exception: the dynamo exporter's own summary where it gives one."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e))
    at = text.find("## Exception summary")
    if at >= 0:
        text = text[at + len("## Exception summary"):]
    text = " ".join(text.split())
    return "%s: %s" % (type(e).__name__, text[:400])


def export_to(model, inputs, path, how):
    """Exports once: an existing file at path is taken as it is (--work caches them)."""
    import export as exp
    if os.path.exists(path):
        return
    dynamo, opset, fold = EXPORTS[how]
    tmp = path + ".tmp.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exp.export(model, inputs, tmp, dynamo, opset, fold)
    os.replace(tmp, path)


def model_dir(args, name, batch):
    return os.path.join(args.work, "%s%s-b%d" % (name, "-mini" if args.mini else "", batch))


def save_inputs(inputs, work):
    for k, t in inputs.items():
        p = os.path.join(work, "in.%s.npy" % k)
        if not os.path.exists(p):
            np.save(p, t.numpy())


# ---------------------------------------------------------------------- the gpucc command


def gpucc_error(text):
    """The lines of gpucc's output that say what failed (its errors name the node)."""
    lines = [l.strip() for l in text.splitlines() if re.search(r"error|not supported", l)]
    return " | ".join(lines[:4]) if lines else (text.strip().splitlines() or ["?"])[-1]


def gpucc(args, argv, cache_dir=None, timeout=1800):
    """(ok, seconds, stdout+stderr text) of one gpucc command."""
    env = dict(os.environ)
    if cache_dir:
        env["GPUCC_CACHE_DIR"] = cache_dir
    t0 = time.monotonic()
    try:
        p = subprocess.run([args.gpucc] + argv, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, time.monotonic() - t0, "timed out after %d s" % timeout
    return p.returncode == 0, time.monotonic() - t0, p.stdout.decode("utf-8", "replace")


def planned_kernels(report):
    """The kernels the pass pipeline's report counts after its last pass."""
    found = re.findall(r"kernels \d+ -> (\d+)", report)
    return int(found[-1]) if found else None


def compile_so(args, onnx_path, so, precision, work):
    """Compiles cold (an empty GPUCC_CACHE_DIR) and warm (the same one): a dict of the
    row's compile fields; 'error' when gpucc failed. With --gpucc-only, once, with a
    cache the model's exports and precisions share (their kernels are mostly the same),
    and no compile times."""
    shared = args.gpucc_only
    cache = os.path.join(work, "cache-shared" if shared else "cache-" + os.path.basename(so)[:-3])
    if not shared:
        shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache, exist_ok=True)
    argv = [onnx_path, "-o", so, "-v", "--precision=" + precision]
    ok, cold, text = gpucc(args, argv, cache)
    if not ok:
        return {"error": "gpucc: " + gpucc_error(text)}
    if not shared:
        ok, warm, text = gpucc(args, argv, cache)
        if not ok:
            return {"error": "gpucc (warm): " + gpucc_error(text)}
    m = re.search(r"(\d+) kernel launches", text)
    row = {"gpucc_planned": int(m.group(1)) if m else None}
    if not shared:
        row.update(gpucc_compile_cold_s=cold, gpucc_compile_warm_s=warm)
    return row


# ---------------------------------------------------------------------- model.so through its C API

# runtime/runtime.h's GpuccDType numbers -> torch dtype names
DTYPES = {1: "float32", 2: "float16", 3: "bfloat16", 4: "float64", 5: "int64", 6: "int32",
          7: "int16", 8: "int8", 9: "uint8", 10: "bool"}


class Trailer(ctypes.Structure):
    """runtime.h's GpuccTrailer, field for field. It grew info_offset and info_len with
    the version 2 trailer, and this copy without them let gpucc_trailer_parse write 16
    bytes past it, into Python's heap: torch.compile of the next model segfaulted. So
    create() also parses into a buffer with room to spare."""
    _fields_ = [("flags", ctypes.c_uint32), ("plan_offset", ctypes.c_uint64),
                ("plan_len", ctypes.c_uint64), ("weights_offset", ctypes.c_uint64),
                ("weights_len", ctypes.c_uint64), ("info_offset", ctypes.c_uint64),
                ("info_len", ctypes.c_uint64), ("weights_file", ctypes.c_char * 256)]


class ModelSo:
    """A model.so opened with ctypes; create() makes a GpuccModel from its own payload
    (plan and weights found by gpucc_trailer_parse) with gpucc_model_create."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        self.lib = ctypes.CDLL(self.path)
        L, P, I, S, U = self.lib, ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint64
        L.gpucc_last_error.restype = ctypes.c_char_p
        L.gpucc_trailer_parse.argtypes = [P, S, ctypes.POINTER(Trailer)]
        L.gpucc_model_create.argtypes = [P, S, P, S, I, ctypes.POINTER(P)]
        L.gpucc_model_destroy.argtypes = [P]
        L.gpucc_model_destroy.restype = None
        for f in ("kernels", "num_inputs", "num_outputs"):
            getattr(L, "gpucc_model_" + f).argtypes = [P]
        for f in ("input", "output"):
            getattr(L, "gpucc_model_%s_name" % f).argtypes = [P, I]
            getattr(L, "gpucc_model_%s_name" % f).restype = ctypes.c_char_p
            getattr(L, "gpucc_model_%s_dtype" % f).argtypes = [P, I]
            getattr(L, "gpucc_model_%s_rank" % f).argtypes = [P, I]
            getattr(L, "gpucc_model_%s_dims" % f).argtypes = [P, I]
            getattr(L, "gpucc_model_%s_dims" % f).restype = ctypes.POINTER(ctypes.c_int64)
        L.gpucc_model_check_input.argtypes = [P, I, I, I, ctypes.POINTER(ctypes.c_int64)]
        L.gpucc_model_run.argtypes = [P, ctypes.POINTER(P), ctypes.POINTER(P), P]
        del U

    def fail(self, what):
        raise RuntimeError("%s: %s" % (what, self.lib.gpucc_last_error().decode("utf-8",
                                                                                 "replace")))

    def payload(self):
        """(plan, weights, build info) of the model.so, as byte arrays and text, found by
        its own gpucc_trailer_parse (tests/python/test_bench_payload.py holds this copy of
        the trailer's struct to the runtime's on a real model.so, without a GPU)."""
        data = np.fromfile(self.path, dtype=np.uint8)
        room = ctypes.create_string_buffer(4096)
        t = Trailer.from_buffer(room)
        if self.lib.gpucc_trailer_parse(data.ctypes.data, data.size, ctypes.byref(t)):
            self.fail("gpucc_trailer_parse")
        plan = data[t.plan_offset:t.plan_offset + t.plan_len]
        if t.flags & 1:  # the weights in a file beside the model.so
            weights = np.fromfile(os.path.join(os.path.dirname(self.path),
                                               t.weights_file.decode()), dtype=np.uint8)
        else:
            weights = data[t.weights_offset:t.weights_offset + t.weights_len]
        info = data[t.info_offset:t.info_offset + t.info_len].tobytes().decode("utf-8", "replace")
        return plan, weights, info

    def create(self, device):
        """(GpuccModel handle, seconds gpucc_model_create took)."""
        plan, weights, _ = self.payload()
        handle = ctypes.c_void_p()
        t0 = time.perf_counter()
        if self.lib.gpucc_model_create(plan.ctypes.data, plan.size, weights.ctypes.data,
                                       weights.size, device, ctypes.byref(handle)):
            self.fail("gpucc_model_create")
        return handle, time.perf_counter() - t0

    def tensors(self, m, kind):
        """[(name, torch dtype name, shape)] of the model's inputs or outputs."""
        L = self.lib
        n = getattr(L, "gpucc_model_num_%ss" % kind)(m)
        out = []
        for i in range(n):
            f = lambda what: getattr(L, "gpucc_model_%s_%s" % (kind, what))(m, i)  # noqa: E731
            dims = f("dims")
            out.append((f("name").decode("utf-8", "replace"), DTYPES.get(f("dtype")),
                        tuple(dims[j] for j in range(f("rank")))))
        return out


class GpuccRunner:
    """One created model with device buffers: call() is gpucc_model_run on torch's
    current stream."""

    def __init__(self, so, m, inputs):
        import torch
        self.so, self.m = so, m
        self.ins = []
        for name, dtype, shape in so.tensors(m, "input"):
            if name not in inputs:
                raise RuntimeError("model.so input '%s' is not one of %s" % (name, list(inputs)))
            t = inputs[name].contiguous()
            if str(t.dtype) != "torch." + str(dtype) or tuple(t.shape) != shape:
                raise RuntimeError("input '%s': model.so wants %s%s, given %s%s" % (
                    name, dtype, list(shape), t.dtype, list(t.shape)))
            self.ins.append(t)
        self.outs = [torch.empty(shape, dtype=getattr(torch, dtype), device=DEVICE)
                     for _, dtype, shape in so.tensors(m, "output")]
        P = ctypes.c_void_p
        self.in_ptrs = (P * max(1, len(self.ins)))(*[t.data_ptr() for t in self.ins])
        self.out_ptrs = (P * max(1, len(self.outs)))(*[t.data_ptr() for t in self.outs])

    def __call__(self):
        import torch
        stream = torch.cuda.current_stream().cuda_stream
        if self.so.lib.gpucc_model_run(self.m, self.in_ptrs, self.out_ptrs, stream):
            self.so.fail("gpucc_model_run")
        return self.outs


# ---------------------------------------------------------------------- timing


def call_ms(fn, iters, warmup=10):
    """Synchronized per-call latency: the median of iters calls, each between two CUDA
    events and waited for."""
    import torch
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


class GpuTimer:
    """GPU time of one call, L2 flushed before each, host overhead hidden (the module
    docstring says how)."""

    def __init__(self, kind):
        import torch
        self.kind = kind
        props = torch.cuda.get_device_properties(0)
        l2 = getattr(props, "L2_cache_size", 0) or 0
        self.flush = torch.empty(max(256 << 20, 4 * l2), dtype=torch.int8, device=DEVICE)
        # sleep kernel cycles per ms, measured
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda._sleep(1000)
        s.record()
        torch.cuda._sleep(20_000_000)
        e.record()
        e.synchronize()
        self.cycles_per_ms = 20_000_000 / max(s.elapsed_time(e), 1e-3)

    def __call__(self, fn, launches, target_ms=300.0, min_iters=10, max_iters=200):
        """(median ms, {'groups_retimed': n}); launches: stream entries one call makes
        (its kernels), which bounds how many calls are enqueued at once."""
        import torch
        if self.kind == "triton":
            import triton.testing
            return float(triton.testing.do_bench(fn, return_mode="median")), {}
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        # the host's time to enqueue one flushed call, and the GPU's
        t0 = time.perf_counter()
        for _ in range(3):
            self.flush.zero_()
            fn()
        host_ms = (time.perf_counter() - t0) * 1e3 / 3
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        s.record()
        for _ in range(3):
            self.flush.zero_()
            fn()
        e.record()
        e.synchronize()
        est = max(s.elapsed_time(e) / 3, 1e-3)
        n = int(min(max_iters, max(min_iters, target_ms / est)))
        group = max(1, min(25, 900 // (launches + 4)))  # stay well inside the launch queue
        times, retimed = [], 0
        while len(times) < n:
            k = min(group, n - len(times))
            for attempt in range(4):
                gate = torch.cuda.Event()
                pairs = [(torch.cuda.Event(enable_timing=True),
                          torch.cuda.Event(enable_timing=True)) for _ in range(k)]
                sleep_ms = (2 ** attempt) * (2 * k * host_ms + 1.0)
                torch.cuda._sleep(int(sleep_ms * self.cycles_per_ms))
                gate.record()
                for a, b in pairs:
                    self.flush.zero_()
                    a.record()
                    fn()
                    b.record()
                starved = gate.query()  # the GPU got through the sleep before the host was done
                torch.cuda.synchronize()
                if not starved:
                    break
                retimed += 1
            times += [a.elapsed_time(b) for a, b in pairs]
        return statistics.median(times), {"groups_retimed": retimed}


def torch_kernels(fn):
    """CUDA kernels launched by one call (copies and memsets left out)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
               and "memcpy" not in e.name.lower() and "memset" not in e.name.lower())


GEMM_RATES = {}


def gemm_tflops(precision, timer):
    """The GPU's measured dense GEMM rate for the precision, TFLOP/s (8192^3 matmul)."""
    import torch
    if precision in GEMM_RATES:
        return GEMM_RATES[precision]
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    n = 8192
    a = torch.randn(n, n, device=DEVICE, dtype=dtype)
    b = torch.randn(n, n, device=DEVICE, dtype=dtype)
    c = torch.empty(n, n, device=DEVICE, dtype=dtype)
    ms, _ = timer(lambda: torch.matmul(a, b, out=c), 1, target_ms=200, min_iters=10)
    torch.backends.cuda.matmul.allow_tf32 = tf32
    GEMM_RATES[precision] = 2.0 * n ** 3 / (ms * 1e-3) / 1e12
    del a, b, c
    return GEMM_RATES[precision]


def model_flops(model, args):
    """Matmul, convolution and attention FLOPs of one call (torch.utils.flop_counter).
    nn.MultiheadAttention's fast path (one fused op in eval without grad: torchvision's
    ViT) is off while counting: the counter sees none of its projections' and attention's
    FLOPs (ViT-B/16's 22.5 GFLOP an image counted with it, 35.1 without)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    counter = FlopCounterMode(display=False)
    fast = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        with counter:
            model(*args)
    finally:
        torch.backends.mha.set_fastpath_enabled(fast)
    return int(counter.get_total_flops())


# ---------------------------------------------------------------------- accuracy


def as_list(out):
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    return [t for t in out if isinstance(t, torch.Tensor)]


def rel_err(got, want):
    """The largest relative error by norm over the float outputs, compared in order."""
    worst = 0.0
    for g, w in zip(got, want):
        if not w.dtype.is_floating_point:
            continue
        g, w = g.double().cpu(), w.double().cpu()
        if g.shape != w.shape:
            return float("inf")
        d, n = float((g - w).norm()), float(w.norm())
        worst = max(worst, d / n if n > 0 else (0.0 if d == 0 else float("inf")))
    return worst


# ---------------------------------------------------------------------- one model at one batch


def key(r):
    return (r["model"], r["batch"], r["precision"], r.get("export", "ts17"), r.get("mini", False))


def read_results(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        rows.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut short by a killed run
    return rows


def append_row(path, row):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a") as f:
        f.write(json.dumps(row, sort_keys=True) + "\n")
        f.flush()
        os.fsync(f.fileno())


def environment():
    import torch
    try:
        # "-dirty" when the tree differs from HEAD: a copy of a working tree whose
        # commits its .git does not have reads as its old HEAD otherwise
        # (no optional locks: the index's refresh would lock out a commit meanwhile)
        commit = subprocess.run(["git", "--no-optional-locks", "-C", REPO, "describe",
                                 "--always", "--abbrev=7", "--dirty"],
                                capture_output=True, text=True).stdout.strip() or None
    except OSError:
        commit = None
    return {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "gpucc_commit": commit,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def time_torch(args, m, targs, timer, base):
    """PyTorch's eager and torch.compile (reduce-overhead) timings of m into base."""
    import torch
    run_eager = lambda: m(*targs)  # noqa: E731
    base["eager_call_ms"] = call_ms(run_eager, args.iters)
    base["eager_kernels"] = torch_kernels(run_eager)
    base["eager_gpu_ms"], info = timer(run_eager, base["eager_kernels"])
    base["eager_retimed"] = info.get("groups_retimed", 0)
    torch._dynamo.reset()
    try:
        compiled = torch.compile(m, mode="reduce-overhead")
        t0 = time.monotonic()
        for _ in range(3):
            compiled(*targs)
        torch.cuda.synchronize()
        base["compile_s"] = time.monotonic() - t0
        run_compiled = lambda: compiled(*targs)  # noqa: E731
        base["compile_call_ms"] = call_ms(run_compiled, args.iters)
        base["compile_gpu_ms"], info = timer(run_compiled, 8)
        base["compile_retimed"] = info.get("groups_retimed", 0)
    except Exception as e:
        base["compile_error"] = short_error(e)
    compiled = None
    torch._dynamo.reset()


def measure_model(args, name, batch, todo, timer, env):
    """Measures the (precision, export) pairs of todo for one model and batch; appends a
    row for each."""
    import torch
    dev = torch.device(DEVICE)
    model, inputs = build(name, batch, not args.mini)
    work = model_dir(args, name, batch)
    os.makedirs(work, exist_ok=True)
    save_inputs(inputs, work)
    exports = sorted({e for _, e in todo}, key=list(EXPORTS).index)
    export_errors = {}
    for how in exports:
        t0 = time.monotonic()
        try:
            export_to(model, inputs, os.path.join(work, how + ".onnx"), how)
        except Exception as e:  # the exporter's failure is this export's row
            export_errors[how] = "export: " + short_error(e)
        log("%s b%d: export %s %.1f s" % (name, batch, how, time.monotonic() - t0))

    model = model.to(dev)
    gpu_in = {k: v.to(dev) for k, v in inputs.items()}
    args_fp32 = list(gpu_in.values())
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        want = [t.float().clone() for t in as_list(model(*args_fp32))]
        flops = model_flops(model, args_fp32)
    want64 = None
    if any(p == "fp32" for p, _ in todo):
        # float64, the answer fp32 rows are also measured against: PyTorch's fp32 has an
        # error of its own (its accumulation order), as large as gpucc's distance from it
        m64 = copy.deepcopy(model).double()
        with torch.no_grad():
            want64 = [t.clone() for t in as_list(m64(*[
                t.double() if t.dtype.is_floating_point else t for t in args_fp32]))]
        del m64

    for precision in [p for p in args.precisions if any(q == p for q, _ in todo)]:
        if args.deadline and time.monotonic() - args.t_start > args.deadline:
            log("deadline reached: stopping before %s b%d %s" % (name, batch, precision))
            return False
        t_precision = time.monotonic()
        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision, torch.float32)
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        torch.backends.cudnn.allow_tf32 = precision == "tf32"
        base = dict(env, model=name, batch=batch, precision=precision, flops=flops, mini=args.mini,
                    gemm_tflops=gemm_tflops(precision, timer), timer=args.gpu_timer)
        # PyTorch, once for every export of this precision, on a copy: the fp32 module
        # stays as it was for the next precision
        m = copy.deepcopy(model).to(dtype)
        targs = [t.to(dtype) if t.dtype.is_floating_point else t for t in args_fp32]
        with torch.no_grad():
            got = as_list(m(*targs))
            base["torch_rel_err"] = rel_err(got, want)
            if precision == "fp32" and want64:
                base["torch_f64_err"] = rel_err(got, want64)
            del got
            if not args.gpucc_only:
                time_torch(args, m, targs, timer, base)
        torch.cuda.empty_cache()
        if not args.gpucc_only:
            log("%s b%d %s: eager %.3f ms, torch.compile %s ms (GPU time)" % (
                name, batch, precision, base["eager_gpu_ms"],
                "%.3f" % base["compile_gpu_ms"] if "compile_gpu_ms" in base else "-"))

        for how in [e for p, e in todo if p == precision]:
            row = dict(base, export=how)
            if how in export_errors:
                row["error"] = export_errors[how]
            else:
                row.update(measure_gpucc(args, work, how, precision, gpu_in, want,
                                          want64 if precision == "fp32" else None))
            row["tolerance"] = REL_BY_NORM.get(precision)
            if "gpucc_rel_err" in row:
                row["passed"] = bool(row["gpucc_rel_err"] <= REL_BY_NORM[precision])
            row["seconds"] = time.monotonic() - t_precision  # of the run so far, for planning
            append_row(args.results, row)
            log(summary(row))
        del m
    del model, gpu_in, want
    gc.collect()
    torch.cuda.empty_cache()
    return True


def measure_gpucc(args, work, how, precision, gpu_in, want, want64=None):
    import torch
    so_path = os.path.join(work, "%s-%s.so" % (how, precision))
    row = compile_so(args, os.path.join(work, how + ".onnx"), so_path, precision, work)
    if "error" in row:
        return row
    so = ModelSo(so_path)
    cache = os.path.join(work, "runtime-cache-%s-%s" % (how, precision))
    shutil.rmtree(cache, ignore_errors=True)
    os.makedirs(cache)
    old = os.environ.get("GPUCC_CACHE_DIR")
    os.environ["GPUCC_CACHE_DIR"] = cache
    m = None
    try:
        m, row["create_cold_s"] = so.create(0)
        so.lib.gpucc_model_destroy(m)
        m = None
        # warm loads (decisions from the cache) and loads with timing off (GPUCC_TUNE=0,
        # read at create), what a warm load should match: the median of CREATES of each,
        # taken in turn, since one create of tens of ms moves by several
        warm, untuned = [], []
        tune = os.environ.get("GPUCC_TUNE")
        try:
            for _ in range(CREATES):
                for env, times in ((tune, warm), ("0", untuned)):
                    if env is None:
                        os.environ.pop("GPUCC_TUNE", None)
                    else:
                        os.environ["GPUCC_TUNE"] = env
                    m, t = so.create(0)
                    times.append(t)
                    so.lib.gpucc_model_destroy(m)
                    m = None
        finally:
            if tune is None:
                os.environ.pop("GPUCC_TUNE", None)
            else:
                os.environ["GPUCC_TUNE"] = tune
        row["create_warm_s"] = statistics.median(warm)
        row["create_untuned_s"] = statistics.median(untuned)
        m, _ = so.create(0)
        row["gpucc_kernels"] = so.lib.gpucc_model_kernels(m)
        run = GpuccRunner(so, m, gpu_in)
        got = [t.clone() for t in run()]
        torch.cuda.synchronize()
        if len(got) != len(want):
            row["note"] = "%d outputs, PyTorch %d" % (len(got), len(want))
        row["gpucc_rel_err"] = rel_err(got, want)
        if want64:
            row["gpucc_f64_err"] = rel_err(got, want64)
        row["gpucc_call_ms"] = call_ms(run, args.iters)
        row["gpucc_gpu_ms"], info = args.timer(run, 2 + len(run.ins) + len(run.outs))
        row["gpucc_retimed"] = info.get("groups_retimed", 0)
    except Exception as e:
        row["error"] = short_error(e)
    finally:
        if m is not None:
            torch.cuda.synchronize()
            so.lib.gpucc_model_destroy(m)
        if old is None:
            os.environ.pop("GPUCC_CACHE_DIR", None)
        else:
            os.environ["GPUCC_CACHE_DIR"] = old
    return row


def summary(r):
    def f(k, fmt="%.3f"):
        return fmt % r[k] if r.get(k) is not None else "-"
    return "%s b%d %s %s: gpucc %s ms GPU, %s call; torch.compile %s / %s; eager %s / %s; " \
           "kernels %s; rel err %s%s" % (
               r["model"], r["batch"], r["precision"], r.get("export", "ts17"),
               f("gpucc_gpu_ms"), f("gpucc_call_ms"), f("compile_gpu_ms"), f("compile_call_ms"),
               f("eager_gpu_ms"), f("eager_call_ms"), f("gpucc_kernels", "%d"),
               f("gpucc_rel_err", "%.1e"), "; " + r["error"] if r.get("error") else "")


def measure(args):
    import torch
    if not torch.cuda.is_available():
        log("no CUDA device: nothing to measure (--counts-only needs none)")
        return 1
    env = environment()
    log("%s, torch %s, CUDA %s; results to %s" % (env["gpu"], env["torch"], env["cuda"],
                                                  args.results))
    args.timer = GpuTimer(args.gpu_timer)
    measure_all(args, env)
    print()
    table(args)  # every row of --results so far
    return 0


def measure_all(args, env):
    import torch
    done = {key(r) for r in read_results(args.results)} if args.resume else set()
    for name in args.models:
        for batch in args.batches:
            todo = [(p, e) for p in args.precisions for e in args.exports
                    if (name, batch, p, e, args.mini) not in done]
            if not todo:
                continue
            if args.deadline and time.monotonic() - args.t_start > args.deadline:
                log("deadline reached: stopping before %s b%d (--resume goes on)" % (name, batch))
                return
            try:
                if not measure_model(args, name, batch, todo, args.timer, env):
                    return
            except Exception as e:  # one model's failure must not hide the others' rows
                import traceback
                traceback.print_exc()
                log("%s b%d: %s: %s" % (name, batch, type(e).__name__, e))
                torch.cuda.empty_cache()


# ---------------------------------------------------------------------- counts only (no GPU)


def counts(args):
    """Exports and compiles without a GPU: launches per export, or gpucc's error."""
    done = {key(r) for r in read_results(args.results)} if args.resume else set()
    for name in args.models:
        for batch in args.batches:
            todo = [(p, e) for p in args.precisions for e in args.exports
                    if (name, batch, p, e, args.mini) not in done]
            if not todo:
                continue
            if args.deadline and time.monotonic() - args.t_start > args.deadline:
                log("deadline reached: stopping before %s b%d" % (name, batch))
                return 0
            model, inputs = build(name, batch, not args.mini)
            work = model_dir(args, name, batch)
            os.makedirs(work, exist_ok=True)
            save_inputs(inputs, work)
            for how in sorted({e for _, e in todo}, key=list(EXPORTS).index):
                path = os.path.join(work, how + ".onnx")
                t0 = time.monotonic()
                err = None
                try:
                    export_to(model, inputs, path, how)
                except Exception as e:
                    err = "export: " + short_error(e)
                export_s = time.monotonic() - t0
                nodes = None
                if not err:
                    import onnx
                    g = onnx.load(path, load_external_data=False).graph
                    nodes = len(g.node)
                for precision in [p for p, e in todo if e == how]:
                    row = {"model": name, "batch": batch, "precision": precision,
                           "export": how, "mode": "counts", "onnx_nodes": nodes,
                           "export_s": export_s, "mini": args.mini}
                    if err:
                        row["error"] = err
                    else:
                        row.update(count_one(args, path, work, how, precision))
                    append_row(args.results, row)
                    log("%s b%d %s %s: %s" % (name, batch, precision, how, row.get("error") or
                                              "%s launches planned%s" % (
                                                  row.get("gpucc_planned"),
                                                  ", %s in the model.so" % row["gpucc_launches"]
                                                  if "gpucc_launches" in row else "")))
            del model
            gc.collect()
    return 0


def count_one(args, path, work, how, precision):
    ok, secs, text = gpucc(args, [path, "--emit=plan", "-v", "--precision=" + precision])
    if not ok:
        return {"error": "gpucc --emit=plan: " + gpucc_error(text)}
    row = {"gpucc_planned": planned_kernels(text), "plan_s": secs}
    fuse = re.findall(r"^fuse: .*", text, re.M)
    if fuse:
        row["fuse_report"] = fuse[-1]
    if args.nvrtc:
        so = os.path.join(work, "%s-%s.so" % (how, precision))
        ok, secs, text = gpucc(args, [path, "-o", so, "-v", "--precision=" + precision])
        if not ok:
            row["error"] = "gpucc -o model.so: " + gpucc_error(text)
        else:
            m = re.search(r"(\d+) kernel launches", text)
            row["gpucc_launches"] = int(m.group(1)) if m else None
            row["gpucc_compile_cold_s"] = secs  # NVRTC's cache may have been warm
            os.remove(so)
            if os.path.exists(so + ".weights"):
                os.remove(so + ".weights")
    return row


# ---------------------------------------------------------------------- tables


def geomean(xs):
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def shown(r):
    return r["model"] + (" (mini)" if r.get("mini") else "")


def fmt(v, f="%.3f"):
    return "-" if v is None else f % v


def table(args):
    rows = {}
    for r in read_results(args.results):
        rows[key(r) + (r.get("mode", "measure"),)] = r  # the last row of each key wins
    measured = [r for r in rows.values() if r.get("mode", "measure") == "measure"]
    counted = [r for r in rows.values() if r.get("mode") == "counts"]
    order = lambda r: (r["batch"], PRECISIONS.index(r["precision"]) if r["precision"] in  # noqa: E731
                       PRECISIONS else 9, ZOO.index(r["model"]) if r["model"] in ZOO else 99,
                       list(EXPORTS).index(r.get("export", "ts17")))
    out = []
    if measured:
        measured.sort(key=order)
        envs = sorted({(r.get("gpu"), r.get("torch"), r.get("cuda")) for r in measured})
        dates = sorted({r.get("date", "?")[:10] for r in measured})
        out.append("%s; PyTorch %s, CUDA %s; %s; GPU time by %s." % (
            " / ".join(e[0] or "?" for e in envs), " / ".join(e[1] or "?" for e in envs),
            " / ".join(e[2] or "?" for e in envs), " to ".join(sorted({dates[0], dates[-1]})),
            "bench.py's own timer (sleep-gated groups, L2 flushed)" if all(
                r.get("timer", "own") == "own" for r in measured) else "triton's do_bench"))
        out.append("")
        out.append("| model | batch | precision | export | gpucc GPU ms | eager GPU ms | "
                   "torch.compile GPU ms | gpucc / eager | gpucc / compile | gpucc call ms | "
                   "eager call ms | torch.compile call ms | call gpucc / compile | "
                   "gpucc kernels | eager kernels | rel err vs fp32 | within bound | "
                   "% of GEMM rate |")
        out.append("|" + "---|" * 18)
        for r in measured:
            g, e, c = r.get("gpucc_gpu_ms"), r.get("eager_gpu_ms"), r.get("compile_gpu_ms")
            gc_, cc = r.get("gpucc_call_ms"), r.get("compile_call_ms")
            mfu = (100.0 * r["flops"] / (g * 1e-3) / (r["gemm_tflops"] * 1e12)
                   if g and r.get("flops") and r.get("gemm_tflops") else None)
            err = r.get("error")
            out.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
                       "| %s | %s | %s | %s |" % (
                           shown(r), r["batch"], r["precision"], r.get("export", "ts17"),
                           fmt(g) if not err else "failed", fmt(e), fmt(c),
                           fmt(g / e if g and e else None, "%.2f"),
                           fmt(g / c if g and c else None, "%.2f"), fmt(gc_),
                           fmt(r.get("eager_call_ms")), fmt(cc),
                           fmt(gc_ / cc if gc_ and cc else None, "%.2f"),
                           fmt(r.get("gpucc_kernels"), "%d"), fmt(r.get("eager_kernels"), "%d"),
                           fmt(r.get("gpucc_rel_err"), "%.1e"),
                           {True: "yes", False: "**no**"}.get(r.get("passed"), "-"),
                           fmt(mfu, "%.0f%%")))
        out.append("")
        out.append("Geometric mean of gpucc / torch.compile (GPU time; per-call latency), "
                   "ts17 exports of the zoo's models:")
        out.append("")
        groups = sorted({(r["batch"], r["precision"]) for r in measured},
                        key=lambda k: (k[0], PRECISIONS.index(k[1]) if k[1] in PRECISIONS else 9))
        for b, p in groups:
            rs = [r for r in measured if (r["batch"], r["precision"]) == (b, p)
                  and r.get("export", "ts17") == "ts17" and r["model"] in ZOO]
            gpu = geomean([r["gpucc_gpu_ms"] / r["compile_gpu_ms"] for r in rs
                           if r.get("gpucc_gpu_ms") and r.get("compile_gpu_ms")])
            call = geomean([r["gpucc_call_ms"] / r["compile_call_ms"] for r in rs
                            if r.get("gpucc_call_ms") and r.get("compile_call_ms")])
            n = sum(1 for r in rs if r.get("gpucc_gpu_ms") and r.get("compile_gpu_ms"))
            out.append("- batch %d, %s: %s; %s (%d of %d models)" % (
                b, p, fmt(gpu, "%.2f"), fmt(call, "%.2f"), n, len(rs)))
        by_export = {}
        for r in measured:
            if r.get("gpucc_gpu_ms") and not r.get("error"):
                by_export.setdefault((r["batch"], r["precision"], r["model"], r.get("mini")),
                                     {})[r.get("export", "ts17")] = r
        by_export = {k: v for k, v in by_export.items() if len(v) > 1}
        if by_export:
            exports = [e for e in EXPORTS if any(e in v for v in by_export.values())]
            out.append("")
            out.append("gpucc by export: GPU ms (kernels), and the slowest export's time and "
                       "the most kernels over the best export's:")
            out.append("")
            out.append("| model | batch | precision | " + " | ".join(exports) +
                       " | slowest / fastest | most / fewest kernels |")
            out.append("|" + "---|" * (5 + len(exports)))
            for k in sorted(by_export, key=lambda k: order(next(iter(by_export[k].values())))):
                v = by_export[k]
                t = [r["gpucc_gpu_ms"] for r in v.values()]
                n = [r["gpucc_kernels"] for r in v.values() if r.get("gpucc_kernels")]
                out.append("| %s | %d | %s | %s | %s | %s |" % (
                    shown(next(iter(v.values()))), k[0], k[1],
                    " | ".join("%s (%s)" % (fmt(v[e]["gpucc_gpu_ms"]),
                                            fmt(v[e].get("gpucc_kernels"), "%d"))
                               if e in v else "" for e in exports),
                    fmt(max(t) / min(t), "%.2f"),
                    fmt(max(n) / min(n) if n else None, "%.2f")))
        exact = [r for r in measured if r.get("gpucc_f64_err") is not None]
        if exact:
            out.append("")
            out.append("fp32 against float64 (PyTorch's model in double): relative error by "
                       "norm of gpucc and of PyTorch's own fp32 (TF32 off), and gpucc's "
                       "distance from PyTorch fp32, the column above:")
            out.append("")
            out.append("| model | batch | export | gpucc vs float64 | PyTorch fp32 vs float64 "
                       "| gpucc vs PyTorch fp32 |")
            out.append("|" + "---|" * 6)
            for r in exact:
                out.append("| %s | %d | %s | %s | %s | %s |" % (
                    shown(r), r["batch"], r.get("export", "ts17"),
                    fmt(r["gpucc_f64_err"], "%.1e"), fmt(r.get("torch_f64_err"), "%.1e"),
                    fmt(r.get("gpucc_rel_err"), "%.1e")))
        out.append("")
        out.append("| model | batch | precision | export | gpucc compile s cold / warm | "
                   "create ms cold / warm / untuned | warm / untuned | torch.compile s | "
                   "GEMM TFLOP/s | model GFLOP |")
        out.append("|" + "---|" * 10)
        for r in measured:
            ms = lambda k: r[k] * 1e3 if r.get(k) else None  # noqa: E731
            ratio = (r["create_warm_s"] / r["create_untuned_s"]
                     if r.get("create_warm_s") and r.get("create_untuned_s") else None)
            out.append("| %s | %d | %s | %s | %s / %s | %s / %s / %s | %s | %s | %s | %s |" % (
                shown(r), r["batch"], r["precision"], r.get("export", "ts17"),
                fmt(r.get("gpucc_compile_cold_s"), "%.1f"),
                fmt(r.get("gpucc_compile_warm_s"), "%.1f"),
                fmt(ms("create_cold_s"), "%.0f"), fmt(ms("create_warm_s"), "%.0f"),
                fmt(ms("create_untuned_s"), "%.0f"), fmt(ratio, "%.2f"),
                fmt(r.get("compile_s"), "%.1f"), fmt(r.get("gemm_tflops"), "%.0f"),
                fmt(r["flops"] / 1e9 if r.get("flops") else None, "%.1f")))
        failures = [r for r in measured if r.get("error") or r.get("compile_error")]
        if failures:
            out.append("")
            out.append("Failures:")
            out.append("")
            for r in failures:
                out.append("- %s b%d %s %s: %s" % (shown(r), r["batch"], r["precision"],
                                                  r.get("export", "ts17"),
                                                  r.get("error") or "torch.compile: " +
                                                  r["compile_error"]))
    if counted:
        if out:
            out.append("")
        counted.sort(key=order)
        exports = [e for e in EXPORTS if any(r.get("export") == e for r in counted)]
        keys = sorted({(r["batch"], r["precision"], r["model"], r.get("mini", False))
                       for r in counted},
                      key=lambda k: (k[0], PRECISIONS.index(k[1]) if k[1] in PRECISIONS
                                     else 9, ZOO.index(k[2]) if k[2] in ZOO else 99, k[3]))
        by = {(r["batch"], r["precision"], r["model"], r.get("mini", False), r.get("export")): r
              for r in counted}
        out.append("Kernel launches per inference by export (no GPU: planned by the pass "
                   "pipeline%s; ONNX nodes in parentheses; x: gpucc failed, see below):" % (
                       "; `model.so` launches where NVRTC ran" if any(
                           "gpucc_launches" in r for r in counted) else ""))
        out.append("")
        out.append("| model | batch | precision | " + " | ".join(exports) + " |")
        out.append("|" + "---|" * (3 + len(exports)))
        for b, p, m, mini in keys:
            cells = []
            for e in exports:
                r = by.get((b, p, m, mini, e))
                if r is None:
                    cells.append("")
                elif r.get("error"):
                    cells.append("x" + (" (%d)" % r["onnx_nodes"] if r.get("onnx_nodes") else ""))
                else:
                    n = r.get("gpucc_launches", r.get("gpucc_planned"))
                    cells.append("%s (%s)" % (fmt(n, "%d"), fmt(r.get("onnx_nodes"), "%d")))
            out.append("| %s | %d | %s | %s |" % (shown({"model": m, "mini": mini}), b, p,
                                                  " | ".join(cells)))
        failures = [r for r in counted if r.get("error")]
        if failures:
            out.append("")
            out.append("Failures:")
            out.append("")
            for r in failures:
                out.append("- %s b%d %s %s: %s" % (shown(r), r["batch"], r["precision"],
                                                  r["export"], r["error"]))
    text = "\n".join(out)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


# ---------------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpucc", help="the gpucc binary (a Release build)")
    ap.add_argument("--models", default=",".join(ZOO))
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--precisions", default="bf16,fp32")
    ap.add_argument("--exports", default="ts17", help="of: " + ",".join(EXPORTS))
    ap.add_argument("--iters", type=int, default=50, help="calls per synchronized latency")
    ap.add_argument("--work", default="/tmp/gpucc-bench",
                    help="exports, inputs and model.so files (kept between runs)")
    ap.add_argument("--results", help="JSON lines (default WORK/results.jsonl)")
    ap.add_argument("--resume", action="store_true", help="skip rows --results has")
    ap.add_argument("--deadline", type=float, default=0,
                    help="start nothing new after this many seconds (0: no limit)")
    ap.add_argument("--gpu-timer", choices=["own", "triton"], default="own")
    ap.add_argument("--gpucc-only", action="store_true",
                    help="no eager or torch.compile timings (PyTorch's fp32 answer still): "
                         "gpucc's rows across exports and precisions")
    ap.add_argument("--counts-only", action="store_true",
                    help="no GPU: kernel launches (or gpucc's error) per export")
    ap.add_argument("--nvrtc", action="store_true",
                    help="--counts-only: also compile the model.so (NVRTC)")
    ap.add_argument("--mini", action="store_true",
                    help="the test suite's miniature models (a quick check of the script)")
    ap.add_argument("--table", action="store_true", help="print the tables of --results")
    ap.add_argument("--out", help="--table: also write the tables here")
    args = ap.parse_args()
    args.t_start = time.monotonic()
    args.results = args.results or os.path.join(args.work, "results.jsonl")
    if args.table:
        return table(args)
    if not args.gpucc:
        ap.error("--gpucc is required to measure or count")
    args.gpucc = os.path.abspath(args.gpucc)
    args.models = args.models.split(",")
    args.batches = [int(b) for b in args.batches.split(",")]
    args.precisions = args.precisions.split(",")
    args.exports = args.exports.split(",")
    for what, given, known in (("model", args.models, ZOO + EXTRA),
                               ("precision", args.precisions, PRECISIONS),
                               ("export", args.exports, list(EXPORTS))):
        for x in given:
            if x not in known:
                ap.error("unknown %s '%s' (known: %s)" % (what, x, ", ".join(known)))
    os.makedirs(args.work, exist_ok=True)
    return counts(args) if args.counts_only else measure(args)


if __name__ == "__main__":
    sys.exit(main())
