#!/usr/bin/env python3
"""The latency of one ranged model.so against model.so files compiled for each exact size
(issue 25, docs/dynamic-shapes.md section 7), on one GPU in one run.

The model is a transformers BERT (hidden 768, 12 heads; --layers of them, random
weights) exported with dynamic batch and sequence axes and an attention mask. It is
compiled once with --dim batch=B --dim seq=S, then at each (batch, seq) of the sweep both
the ranged model.so (its class for that size) and an exact one are run by `gpucc run
--iters N`, which prints the median GPU time of N replays of the model's CUDA graph (the
input copies and, for the ranged one, the padding and size writes are not in it: they
are a few small async copies and memsets on the stream). Writes one JSON line per size:
sizes, the class bound, both medians and their ratio, kernels of each.

usage: ranged_sweep.py --gpucc PATH --out FILE [--layers N] [--batch 1..16]
                       [--seq 1..128] [--sizes 1x1,3x7,...] [--iters N] [--work DIR]
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time

import numpy as np


def run(argv, timeout=1800):
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    if p.returncode:
        raise RuntimeError("%s failed:\n%s" % (" ".join(argv), p.stdout[-4000:]))
    return p.stdout


def export_bert(path, layers):
    import torch
    import transformers
    torch.manual_seed(0)

    class Bert(torch.nn.Module):
        def __init__(self):
            super().__init__()
            cfg = transformers.BertConfig(num_hidden_layers=layers)
            self.m = transformers.BertModel(cfg, add_pooling_layer=False)

        def forward(self, ids, mask):
            return self.m(input_ids=ids, attention_mask=mask).last_hidden_state

    ids = torch.ones(2, 8, dtype=torch.int64)
    with torch.no_grad():
        torch.onnx.export(Bert().eval(), (ids, ids), path, input_names=["ids", "mask"],
                          output_names=["y"], opset_version=17, dynamo=False,
                          dynamic_axes={"ids": {0: "batch", 1: "seq"},
                                        "mask": {0: "batch", 1: "seq"},
                                        "y": {0: "batch", 1: "seq"}})


def timed(gpucc, so, inputs, iters, out_dir):
    shutil.rmtree(out_dir, ignore_errors=True)
    argv = [gpucc, "run", so, "--iters", str(iters), "--output-dir", out_dir]
    for k, v in inputs.items():
        argv += ["--input", "%s=%s" % (k, v)]
    text = run(argv)
    ms = float(re.search(r"median latency ([0-9.]+) ms", text).group(1))
    k = re.search(r"(\d+) kernels per inference", text)
    return ms, int(k.group(1)) if k else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpucc", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--batch", default="1..16")
    ap.add_argument("--seq", default="1..128")
    ap.add_argument("--sizes", default="1x1,1x7,1x64,1x65,1x100,1x128,3x17,4x128,5x128,8x64,9x96,16x128")
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--work", default="/tmp/ranged_sweep")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    model = os.path.join(args.work, "bert.onnx")
    export_bert(model, args.layers)
    ranged = os.path.join(args.work, "ranged.so")
    t0 = time.time()
    text = run([args.gpucc, model, "--dim", "batch=" + args.batch, "--dim", "seq=" + args.seq,
                "-v", "-o", ranged])
    compile_s = time.time() - t0
    classes = int(re.search(r"(\d+) shape classes", text).group(1))
    print("ranged: %d classes, compiled in %.1f s" % (classes, compile_s), flush=True)
    with open(args.out, "a") as out:
        for size in args.sizes.split(","):
            b, s = (int(x) for x in size.split("x"))
            r = np.random.RandomState(b * 1000 + s)
            ids = os.path.join(args.work, "ids.npy")
            mask = os.path.join(args.work, "mask.npy")
            np.save(ids, r.randint(0, 30000, (b, s)).astype(np.int64))
            np.save(mask, np.ones((b, s), np.int64))
            inputs = {"ids": ids, "mask": mask}
            exact = os.path.join(args.work, "exact.so")
            run([args.gpucc, model, "--dim", "batch=%d" % b, "--dim", "seq=%d" % s, "-o", exact])
            out_dir = os.path.join(args.work, "out")
            ms_r, k_r = timed(args.gpucc, ranged, inputs, args.iters, out_dir)
            ms_e, k_e = timed(args.gpucc, exact, inputs, args.iters, out_dir)
            row = {"model": "bert-base-%dl" % args.layers, "batch": b, "seq": s,
                   "ranges": "batch=%s seq=%s" % (args.batch, args.seq), "classes": classes,
                   "compile_s": round(compile_s, 1), "ranged_ms": ms_r, "exact_ms": ms_e,
                   "ratio": round(ms_r / ms_e, 3), "kernels_ranged": k_r, "kernels_exact": k_e}
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
