#!/usr/bin/env python3
"""Exports small models in every spelling the exporters write, for the canonicalization
test (issue 24, point 6): one computation, many ONNX graphs, one kernel count.

Three models, hidden sizes 16 to 64, random weights from a fixed seed:
  vitblock  a pre-norm ViT encoder block: nn.LayerNorm (LayerNormalization from opset 17,
            ReduceMean/Sub/Pow/Sqrt/Div before), attention with nn.Softmax, nn.GELU
            (an Erf chain before opset 20);
  convnet   Conv-BatchNorm-ReLU, -Hardswish (HardSigmoid times x before opset 14), -SiLU
            (x times Sigmoid(x)), a hand-written hard swish x * relu6(x + 3) / 6, a
            squeeze-excite with Hardsigmoid, a BatchNorm with no convolution before it,
            a softmax over the channels (written out as Exp / ReduceSum before opset 13),
            then a Linear and a BatchNorm1d;
  llama     Llama-style RMSNorm (in f32 between Casts), attention, SwiGLU MLP (SiLU).
Each with the TorchScript exporter at opsets 11, 13 and 17, each of those also with
do_constant_folding=False (BatchNormalization left unfolded, weights through Identity),
and with the dynamo exporter (opset 18) where it works:

    OUT/<model>-ts<opset>.onnx, OUT/<model>-ts<opset>nofold.onnx, OUT/<model>-dynamo.onnx
    OUT/<model>.in.<input name>.npy, OUT/<model>.out.<index>.npy

(the layout tests/models/test_models.py reads). Needs torch and onnx (onnxscript for the
dynamo exporter); the exports are committed in tests/models/spellings/, so the tests need
neither:

    python3 tests/models/export_spellings.py --out tests/models/spellings
"""
import argparse
import os
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def seed(s):
    torch.manual_seed(s)
    np.random.seed(s)


class Attention(nn.Module):
    def __init__(self, dim, heads, bias=True):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=bias)
        self.proj = nn.Linear(dim, dim, bias=bias)

    def forward(self, x):
        b, s, d = x.shape
        h = self.heads
        q, k, v = self.qkv(x).reshape(b, s, 3, h, d // h).permute(2, 0, 3, 1, 4)
        a = torch.softmax(q @ k.transpose(-2, -1) * (d // h) ** -0.5, dim=-1)
        return self.proj((a @ v).transpose(1, 2).reshape(b, s, d))


class VitBlock(nn.Module):
    def __init__(self, dim=32, heads=4, mlp=64):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp), nn.GELU(), nn.Linear(mlp, dim))
        self.norm = nn.LayerNorm(dim, eps=1e-6)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return self.norm(x)


class HandSwish(nn.Module):
    """x * relu6(x + 3) / 6, as models written before nn.Hardswish do it."""

    def forward(self, x):
        return x * F.relu6(x + 3) / 6


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()

        def cbn(cin, cout, k, act, stride=1, groups=1):
            return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=False),
                                 nn.BatchNorm2d(cout), act)

        self.stem = cbn(3, 16, 3, nn.ReLU(), stride=2)
        self.dw = cbn(16, 16, 3, nn.Hardswish(), groups=16)
        self.pw = cbn(16, 24, 1, nn.SiLU())
        self.c3 = cbn(24, 24, 3, HandSwish())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(24, 8, 1), nn.ReLU(),
                                nn.Conv2d(8, 24, 1), nn.Hardsigmoid())
        self.bn = nn.BatchNorm2d(24)  # after a residual add: no convolution to fold into
        self.fc = nn.Linear(24, 32)
        self.bn1d = nn.BatchNorm1d(32)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        x = self.pw(self.dw(self.stem(x)))
        y = self.c3(x)
        y = y * self.se(y)
        x = F.relu(self.bn(x + y))
        x = x * torch.softmax(x, dim=1)  # over the channels
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.head(F.relu(self.bn1d(self.fc(x))))


class RMSNorm(nn.Module):
    """transformers' LlamaRMSNorm."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dtype)


class LlamaBlock(nn.Module):
    def __init__(self, dim=32, heads=4, mlp=64):
        super().__init__()
        self.n1 = RMSNorm(dim)
        self.attn = Attention(dim, heads, bias=False)
        self.n2 = RMSNorm(dim)
        self.gate = nn.Linear(dim, mlp, bias=False)
        self.up = nn.Linear(dim, mlp, bias=False)
        self.down = nn.Linear(mlp, dim, bias=False)
        self.norm = RMSNorm(dim)

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        h = self.n2(x)
        x = x + self.down(F.silu(self.gate(h)) * self.up(h))
        return self.norm(x)


def randomize(model):
    """Zero biases, unit norm scales and BatchNorm's zero means and unit variances hide
    mistakes in how they are applied: random values of the same scale instead."""
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if not t.is_floating_point() or t.numel() == 0:
                continue
            if bool((t == 0).all()):
                t.uniform_(-0.1, 0.1)
            elif bool((t == 1).all()):
                t.uniform_(0.5, 1.5)
    return model


MODELS = {
    "vitblock": (VitBlock, lambda: {"x": torch.randn(1, 17, 32)}),
    "convnet": (ConvNet, lambda: {"x": torch.randn(2, 3, 32, 32)}),
    "llama": (LlamaBlock, lambda: {"x": torch.randn(1, 16, 32)}),
}
# tag: (dynamo, opset, do_constant_folding)
EXPORTS = {f"ts{o}{'' if fold else 'nofold'}": (False, o, fold)
           for o in (11, 13, 17) for fold in (True, False)}
EXPORTS["dynamo"] = (True, 18, True)


def export(model, inputs, path, dynamo, opset, fold):
    args = tuple(inputs.values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kwargs = dict(input_names=list(inputs), opset_version=opset, dynamo=dynamo,
                      do_constant_folding=fold)
        if dynamo:
            kwargs["external_data"] = False
        torch.onnx.export(model, args, path, **kwargs)


def check_ort(path, inputs, want):
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime not installed"
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = {i.name: inputs[i.name].numpy() for i in sess.get_inputs()}
    got = sess.run(None, feed)
    errs = [float(np.linalg.norm(g.astype(np.float64) - w) / max(np.linalg.norm(w), 1e-30))
            for g, w in zip(got, want)]
    return "onnxruntime rel err " + ", ".join(f"{e:.2e}" for e in errs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--exports", default=",".join(EXPORTS))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    failed = 0
    for i, name in enumerate(a.models.split(",")):
        seed(2400 + i)
        make, make_inputs = MODELS[name]
        model = randomize(make()).eval()
        inputs = make_inputs()
        with torch.no_grad():
            out = model(*inputs.values())
        outs = [out] if isinstance(out, torch.Tensor) else list(out)
        want = [o.double().numpy() for o in outs]
        for k, t in inputs.items():
            np.save(os.path.join(a.out, f"{name}.in.{k}.npy"), t.numpy())
        for k, o in enumerate(outs):
            np.save(os.path.join(a.out, f"{name}.out.{k}.npy"), o.numpy())
        for tag in a.exports.split(","):
            path = os.path.join(a.out, f"{name}-{tag}.onnx")
            try:
                export(model, inputs, path, *EXPORTS[tag])
                print(f"{name}-{tag}: {os.path.getsize(path)} bytes, "
                      f"{check_ort(path, inputs, want)}", flush=True)
            except Exception as e:  # one exporter's bug is not fatal: report it
                failed += 1
                if os.path.exists(path):
                    os.remove(path)
                print(f"{name}-{tag}: FAILED: {type(e).__name__}: {str(e)[:300]}", flush=True)
    print(f"{failed} exports failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
