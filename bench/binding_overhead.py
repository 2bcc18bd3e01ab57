#!/usr/bin/env python3
"""The Python binding's per-call overhead: host time per call of a tiny model.so called
from Python (gpucc's package, on torch tensors) against the same model's gpucc_model_run
called from C (bench/call_overhead.c), in one process, on the GPU machine.

    python3 bench/binding_overhead.py --call-overhead build/libcall_overhead.so [--json F]

Each figure is the median over 200 rounds of a burst of 100 calls' host time per call
(each burst waited for afterwards, outside the timing); the four take turns in each round,
on one model, one pair of buffers and one stream, so that a drift of clocks or load falls
on all of them alike:
  - c:       gpucc_model_run in a C loop;
  - ctypes:  gpucc_model_run called through ctypes with prebuilt pointer arrays (the floor
             of any ctypes binding);
  - out:     model(x, out=y), the output given (torch);
  - new:     model(x), a new output tensor each call (torch.empty).
The model is relu over f32[1024]: one kernel, so the GPU is never what is measured.
The binding's overhead is out - c and new - c.
"""
import argparse
import ctypes
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import gpucc  # noqa: E402

GRAPH = "graph tiny(%x: f32[1024]) {\n  %y = relu(%x)\n  return %y\n}\n"


CALLS = 100


def bursts(fns, sync, rounds=200):
    """The median over rounds of each fn's burst time per call (us), the fns taking turns
    in each round. "c" is one call that runs the burst in C and returns its time."""
    per = {k: [] for k in fns}
    for r in range(rounds + 5):  # 5 rounds of warm-up
        for k, fn in fns.items():
            if k == "c":
                t = fn()
                if t < 0:
                    raise RuntimeError("gpucc_model_run failed in the C loop")
            else:
                t0 = time.perf_counter()
                for _ in range(CALLS):
                    fn()
                t = (time.perf_counter() - t0) / CALLS * 1e6
            sync()
            if r >= 5:
                per[k].append(t)
    return {k: statistics.median(v) for k, v in per.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--call-overhead", required=True, help="libcall_overhead.so's path")
    ap.add_argument("--json", help="append the figures here as a JSON line")
    args = ap.parse_args()
    import torch
    with tempfile.TemporaryDirectory() as tmp:
        model = gpucc.load(gpucc.build(GRAPH, os.path.join(tmp, "tiny.so")))
        x = torch.randn(1024, device="cuda")
        y = torch.empty_like(x)
        s = torch.cuda.Stream()
        lib, m = model._lib, model._m
        ins = (ctypes.c_void_p * 1)(x.data_ptr())
        outs = (ctypes.c_void_p * 1)(y.data_ptr())
        h = s.cuda_stream
        c = ctypes.CDLL(args.call_overhead).call_overhead_burst
        c.restype = ctypes.c_double
        c.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int]
        run = ctypes.cast(lib.gpucc_model_run, ctypes.c_void_p).value
        with torch.cuda.stream(s):
            torch.testing.assert_close(model(x), torch.relu(x))
            t = bursts({"c": lambda: c(run, m, ins, outs, h, CALLS),
                        "ctypes": lambda: lib.gpucc_model_run(m, ins, outs, h),
                        "out": lambda: model(x, out=y), "new": lambda: model(x)},
                       s.synchronize)
        model.close()
    c_us, ctypes_us, out_us, new_us = t["c"], t["ctypes"], t["out"], t["new"]
    row = {"gpu": torch.cuda.get_device_name(), "c_us": c_us, "out_us": out_us,
           "new_us": new_us, "ctypes_us": ctypes_us, "overhead_out_us": out_us - c_us,
           "overhead_new_us": new_us - c_us,
           "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    print("%s: C %.2f us/call; Python model(x, out=y) %.2f (+%.2f), model(x) %.2f (+%.2f); "
          "bare ctypes %.2f" % (row["gpu"], c_us, out_us, out_us - c_us, new_us,
                                new_us - c_us, ctypes_us))
    if args.json:
        with open(args.json, "a") as f:
            f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
