#!/usr/bin/env python3
"""Exports the real models gpucc is tested on to ONNX and records PyTorch's outputs.

For each model: random weights from a fixed seed, a fixed input, both of torch.onnx.export's
exporters (the TorchScript one at opset 17, the dynamo one at opset 18), and PyTorch's fp32
outputs computed on the CPU, saved beside the model:

    OUT/<model>-<exporter>.onnx
    OUT/<model>.in.<input name>.npy
    OUT/<model>.out.<index>.npy

By default the configurations are reduced so the files are small enough to keep in the
repository (tests/models/data/); --full exports the real sizes (ResNet-50, MobileNetV2,
ViT-B/16, BERT-base and GPT-2 small at seq 128, DistilBERT), which are regenerated on
demand and never committed. Needs torch, torchvision, transformers, onnx, onnxscript
(for the dynamo exporter) and, to cross-check each export, onnxruntime.

    python3 tests/models/export.py --out tests/models/data
"""
import argparse
import os
import sys
import warnings

import numpy as np
import torch


def seed(s):
    torch.manual_seed(s)
    np.random.seed(s)


class Outputs(torch.nn.Module):
    """Wraps a transformers model so it returns a plain tuple of tensors."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask=None):
        kwargs = {"return_dict": False}
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask
        out = self.model(input_ids, **kwargs)
        return tuple(t for t in out if isinstance(t, torch.Tensor))


def mini_resnet():
    """A ResNet-50 in miniature: the same torchvision Bottleneck blocks, stem, pooling and
    head (so the same ONNX ops), with an eighth of the channels and one block a stage."""
    from torchvision.models.resnet import Bottleneck

    class MiniResNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Sequential(
                torch.nn.Conv2d(3, 8, 7, 2, 3, bias=False), torch.nn.BatchNorm2d(8),
                torch.nn.ReLU(inplace=True), torch.nn.MaxPool2d(3, 2, 1))
            layers, inplanes = [], 8
            for i, planes in enumerate([8, 16, 32, 64]):
                stride = 1 if i == 0 else 2
                down = torch.nn.Sequential(
                    torch.nn.Conv2d(inplanes, planes * 4, 1, stride, bias=False),
                    torch.nn.BatchNorm2d(planes * 4))
                layers.append(Bottleneck(inplanes, planes, stride, down))
                inplanes = planes * 4
            self.layers = torch.nn.Sequential(*layers)
            self.pool = torch.nn.AdaptiveAvgPool2d(1)
            self.fc = torch.nn.Linear(inplanes, 10)

        def forward(self, x):
            x = self.pool(self.layers(self.stem(x)))
            return self.fc(torch.flatten(x, 1))

    return MiniResNet()


def randomize(model):
    """Fresh models start with zero biases, unit norm scales, zero BatchNorm means and
    unit variances, and (torchvision's ViT) a zero head: values that hide mistakes in how
    they are applied, and a zero head makes the output zero. Give every float parameter
    and buffer that is all zeros or all ones random values of the same scale."""
    with torch.no_grad():
        for t in list(model.parameters()) + list(model.buffers()):
            if not t.is_floating_point() or t.numel() == 0:
                continue
            if bool((t == 0).all()):
                t.uniform_(-0.1, 0.1)
            elif bool((t == 1).all()):
                t.uniform_(0.5, 1.5)
    return model


def build(name, full):
    import torchvision
    import transformers as tf

    seq = 128 if full else 16
    ids = lambda vocab: {"input_ids": torch.randint(0, vocab, (1, seq), dtype=torch.int64)}
    if name == "resnet50":
        m = torchvision.models.resnet50() if full else mini_resnet()
        return m, {"x": torch.randn(1, 3, 224 if full else 64, 224 if full else 64)}
    if name == "mobilenetv2":
        m = torchvision.models.mobilenet_v2() if full else \
            torchvision.models.mobilenet_v2(width_mult=0.25, num_classes=10)
        return m, {"x": torch.randn(1, 3, 224 if full else 64, 224 if full else 64)}
    if name == "vit_b_16":
        m = torchvision.models.vit_b_16() if full else torchvision.models.VisionTransformer(
            image_size=32, patch_size=8, num_layers=2, num_heads=4, hidden_dim=64,
            mlp_dim=128, num_classes=10)
        return m, {"x": torch.randn(1, 3, 224 if full else 32, 224 if full else 32)}
    if name == "bert":
        cfg = tf.BertConfig() if full else tf.BertConfig(
            vocab_size=1000, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
            intermediate_size=128, max_position_embeddings=64)
        inputs = ids(cfg.vocab_size)
        inputs["attention_mask"] = torch.ones(1, seq, dtype=torch.int64)
        inputs["attention_mask"][0, seq - 3:] = 0  # padding, so the mask matters
        return Outputs(tf.BertModel(cfg, add_pooling_layer=True)), inputs
    if name == "gpt2":
        cfg = tf.GPT2Config() if full else tf.GPT2Config(
            vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=4)
        cfg.use_cache = False
        # Without an attention mask, transformers looks for packed sequences with
        # aten::diff, which the TorchScript exporter cannot write at opset 17.
        inputs = ids(cfg.vocab_size)
        inputs["attention_mask"] = torch.ones(1, seq, dtype=torch.int64)
        inputs["attention_mask"][0, seq - 2:] = 0
        return Outputs(tf.GPT2Model(cfg)), inputs
    if name == "distilbert":
        cfg = tf.DistilBertConfig() if full else tf.DistilBertConfig(
            vocab_size=1000, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
            max_position_embeddings=64)
        inputs = ids(cfg.vocab_size)
        inputs["attention_mask"] = torch.ones(1, seq, dtype=torch.int64)
        inputs["attention_mask"][0, seq - 2:] = 0
        return Outputs(tf.DistilBertModel(cfg)), inputs
    raise SystemExit(f"unknown model {name}")


MODELS = ["resnet50", "mobilenetv2", "vit_b_16", "bert", "gpt2", "distilbert"]
EXPORTERS = {"torchscript": (False, 17), "dynamo": (True, 18)}


def export(model, inputs, path, dynamo, opset):
    args = tuple(inputs.values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kwargs = dict(input_names=list(inputs), opset_version=opset, dynamo=dynamo)
        if dynamo:
            kwargs["external_data"] = False
        torch.onnx.export(model, args, path, **kwargs)


def check_ort(path, inputs, want):
    """onnxruntime's outputs against PyTorch's: the largest relative error."""
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime not installed"
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    feed = {n: inputs[n].numpy() for n in names if n in inputs}
    got = sess.run(None, feed)
    errs = [float(np.linalg.norm(g.astype(np.float64) - w) / max(np.linalg.norm(w), 1e-30))
            for g, w in zip(got, want)]
    return "onnxruntime rel err " + ", ".join(f"{e:.2e}" for e in errs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--full", action="store_true", help="the real model sizes")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--exporters", default=",".join(EXPORTERS))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    failed = 0
    for name in a.models.split(","):
        seed(1000 + MODELS.index(name))  # the same model gets the same weights in any run
        model, inputs = build(name, a.full)
        randomize(model).eval()
        with torch.no_grad():
            out = model(*inputs.values())
        outs = [out] if isinstance(out, torch.Tensor) else list(out)
        want = [o.detach().double().numpy() for o in outs]
        for k, t in inputs.items():
            np.save(os.path.join(a.out, f"{name}.in.{k}.npy"), t.numpy())
        for k, o in enumerate(outs):
            np.save(os.path.join(a.out, f"{name}.out.{k}.npy"), o.detach().numpy())
        for ex in a.exporters.split(","):
            dynamo, opset = EXPORTERS[ex]
            path = os.path.join(a.out, f"{name}-{ex}.onnx")
            try:
                export(model, inputs, path, dynamo, opset)
                print(f"{name}-{ex}: {os.path.getsize(path)} bytes, "
                      f"{check_ort(path, inputs, want)}", flush=True)
            except Exception as e:  # report and go on: one exporter's bug is not fatal
                failed += 1
                print(f"{name}-{ex}: FAILED: {type(e).__name__}: {str(e)[:300]}", flush=True)
    print(f"{failed} exports failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
