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
ViT-B/16, BERT-base and GPT-2 small at seq 128, DistilBERT, and the rest of bench/bench.py's
zoo: EfficientNet-B0, ConvNeXt-Tiny, RegNetY-800MF, ShuffleNetV2 x1.0 and GoogLeNet at
224x224, a t5-small encoder, a Llama-class decoder with grouped-query attention and
whisper-base's encoder; then Swin-T and a deberta-v3-base encoder), which are regenerated
on demand and never committed. Needs torch, torchvision, transformers, onnx, onnxscript
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


def mini_googlenet():
    """GoogLeNet in miniature: torchvision's own BasicConv2d stem and Inception blocks
    (four branches concatenated, ceil-mode max pooling), with a few channels each."""
    from torchvision.models.googlenet import BasicConv2d, Inception

    class MiniGoogLeNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Sequential(
                BasicConv2d(3, 8, kernel_size=7, stride=2, padding=3),
                torch.nn.MaxPool2d(3, stride=2, ceil_mode=True),
                BasicConv2d(8, 8, kernel_size=1),
                BasicConv2d(8, 16, kernel_size=3, padding=1),
                torch.nn.MaxPool2d(3, stride=2, ceil_mode=True))
            self.blocks = torch.nn.Sequential(
                Inception(16, 8, 8, 12, 4, 4, 4),
                Inception(28, 12, 8, 16, 4, 8, 8),
                torch.nn.MaxPool2d(3, stride=2, ceil_mode=True),
                Inception(44, 16, 8, 16, 4, 8, 8))
            self.pool = torch.nn.AdaptiveAvgPool2d(1)
            self.fc = torch.nn.Linear(48, 10)

        def forward(self, x):
            x = self.pool(self.blocks(self.stem(x)))
            return self.fc(torch.flatten(x, 1))

    return MiniGoogLeNet()


class Encoder(torch.nn.Module):
    """Wraps a module that takes one float input (Whisper's encoder: log-mel features)
    so it returns its first output as a plain tensor."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_features):
        return self.model(input_features, return_dict=False)[0]


def random_layer_scales(model):
    """ConvNeXt scales each block's output by a learned per-channel factor that starts
    at 1e-6, which makes every block all but invisible in the output: random factors
    of a useful size instead, so a mistake in a block shows."""
    with torch.no_grad():
        for name, t in model.named_parameters():
            if name.endswith("layer_scale"):
                t.uniform_(0.1, 1.0)
    return model


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
    image = {"x": torch.randn(1, 3, 224 if full else 48, 224 if full else 48)}
    if name == "efficientnet_b0":
        from torchvision.models.efficientnet import EfficientNet, MBConvConfig
        m = torchvision.models.efficientnet_b0() if full else EfficientNet(
            [MBConvConfig(1, 3, 1, 16, 16, 1), MBConvConfig(6, 3, 2, 16, 24, 1),
             MBConvConfig(6, 5, 2, 24, 40, 1)], dropout=0.2, num_classes=10,
            last_channel=64)
        return m, image
    if name == "convnext_tiny":
        from torchvision.models.convnext import CNBlockConfig, ConvNeXt
        m = torchvision.models.convnext_tiny() if full else ConvNeXt(
            [CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)], num_classes=10)
        return random_layer_scales(m), image
    if name == "regnet_y_800mf":
        from torchvision.models.regnet import BlockParams, RegNet
        m = torchvision.models.regnet_y_800mf() if full else RegNet(
            BlockParams(depths=[1, 2], widths=[16, 32], group_widths=[8, 8],
                        bottleneck_multipliers=[1.0, 1.0], strides=[2, 2], se_ratio=0.25),
            num_classes=10, stem_width=8)
        return m, image
    if name == "shufflenet_v2_x1_0":
        m = torchvision.models.shufflenet_v2_x1_0() if full else \
            torchvision.models.ShuffleNetV2([1, 1, 1], [8, 16, 32, 64, 128], num_classes=10)
        return m, image
    if name == "googlenet":
        m = torchvision.models.googlenet(aux_logits=False, init_weights=True) if full else \
            mini_googlenet()
        return m, image
    if name == "t5_encoder":
        # t5-small's configuration (relu feed-forward, relative position buckets)
        cfg = tf.T5Config(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6,
                          num_heads=8) if full else tf.T5Config(
            vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=1, num_heads=4)
        inputs = ids(cfg.vocab_size)
        inputs["attention_mask"] = torch.ones(1, seq, dtype=torch.int64)
        inputs["attention_mask"][0, seq - 3:] = 0
        return Outputs(tf.T5EncoderModel(cfg)), inputs
    if name == "llama":
        # A Llama-class decoder: RoPE, RMSNorm, SwiGLU and grouped-query attention (the
        # key and value heads shared by three query heads each at full size).
        cfg = tf.LlamaConfig(
            vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
            num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=2048) \
            if full else tf.LlamaConfig(
            vocab_size=64, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
        cfg.use_cache = False
        inputs = ids(cfg.vocab_size)
        inputs["attention_mask"] = torch.ones(1, seq, dtype=torch.int64)
        inputs["attention_mask"][0, seq - 2:] = 0
        return Outputs(tf.LlamaModel(cfg)), inputs
    if name == "whisper_encoder":
        # whisper-base's encoder on 30 s of log-mel features (3000 frames, 1500 positions)
        from transformers.models.whisper.modeling_whisper import WhisperEncoder
        cfg = tf.WhisperConfig(
            num_mel_bins=80, d_model=512, encoder_layers=6, encoder_attention_heads=8,
            encoder_ffn_dim=2048, max_source_positions=1500) if full else tf.WhisperConfig(
            num_mel_bins=32, d_model=64, encoder_layers=1, encoder_attention_heads=4,
            encoder_ffn_dim=128, max_source_positions=32)
        frames = 2 * cfg.max_source_positions
        return Encoder(WhisperEncoder(cfg)), {
            "input_features": torch.randn(1, cfg.num_mel_bins, frames)}
    if name == "swin_t":
        # shifted windows: the windows' mask added to [B, windows, H, N, N] scores
        m = torchvision.models.swin_t() if full else torchvision.models.SwinTransformer(
            patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4],
            window_size=[4, 4], num_classes=10)
        return m, {"x": torch.randn(1, 3, 224 if full else 32, 224 if full else 32)}
    if name == "deberta_v3":
        # deberta-v3-base's configuration: disentangled attention (content-to-position and
        # position-to-content terms gathered from relative positions), K divided by the
        # scale before its bmm over heads flattened into the batch
        rel = dict(relative_attention=True, pos_att_type=["p2c", "c2p"], norm_rel_ebd="layer_norm",
                   share_att_key=True, max_relative_positions=-1, position_biased_input=False)
        cfg = tf.DebertaV2Config(vocab_size=128100, hidden_size=768, num_hidden_layers=12,
                                 num_attention_heads=12, intermediate_size=3072,
                                 position_buckets=256, **rel) if full else tf.DebertaV2Config(
            vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=128, max_position_embeddings=64, position_buckets=16, **rel)
        inputs = ids(cfg.vocab_size)
        inputs["attention_mask"] = torch.ones(1, seq, dtype=torch.int64)
        inputs["attention_mask"][0, seq - 3:] = 0
        return Outputs(tf.DebertaV2Model(cfg)), inputs
    raise SystemExit(f"unknown model {name}")


# New models go at the end: a model's seed is 1000 + its index here.
MODELS = ["resnet50", "mobilenetv2", "vit_b_16", "bert", "gpt2", "distilbert",
          "efficientnet_b0", "convnext_tiny", "regnet_y_800mf", "shufflenet_v2_x1_0",
          "googlenet", "t5_encoder", "llama", "whisper_encoder", "swin_t", "deberta_v3"]
# name: (dynamo, opset, constant folding). The data of tests/models/data are the first two;
# the others are the older spellings bench/bench.py compares (its ts11, ts13, ts17-nofold).
EXPORTERS = {"torchscript": (False, 17, True), "dynamo": (True, 18, True),
             "torchscript11": (False, 11, True), "torchscript13": (False, 13, True),
             "nofold": (False, 17, False)}
DEFAULT_EXPORTERS = ["torchscript", "dynamo"]


def math_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                   enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention written out (inference only):
    what PyTorch and transformers computed before the fused op, and what an exporter
    below opset 14 can write (the TorchScript exporter has no symbolic for the fused op
    there)."""
    scale = q.size(-1) ** -0.5 if scale is None else scale
    if enable_gqa and k.size(-3) != q.size(-3):
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if is_causal:
        keep = torch.ones(q.size(-2), k.size(-2), dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        scores = scores.masked_fill(~attn_mask, float("-inf")) \
            if attn_mask.dtype == torch.bool else scores + attn_mask
    return torch.matmul(torch.softmax(scores, -1), v)


def export(model, inputs, path, dynamo, opset, fold=True):
    """torch.onnx.export with the given exporter and opset. fold=False: the TorchScript
    exporter's do_constant_folding off (BatchNormalization stays a node). Below opset 14
    attention is exported as math_attention, and at opset 11 aten::unflatten borrows its
    opset 13 symbolic (Shape, Slice, Concat, Reshape: all opset 11 ops)."""
    args = tuple(inputs.values())
    sdpa = torch.nn.functional.scaled_dot_product_attention
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kwargs = dict(input_names=list(inputs), opset_version=opset, dynamo=dynamo)
        if dynamo:
            kwargs["external_data"] = False
        else:
            kwargs["do_constant_folding"] = fold
        if not dynamo and opset < 14:
            torch.nn.functional.scaled_dot_product_attention = math_attention
        if not dynamo and opset < 13:
            from torch.onnx import symbolic_opset13
            torch.onnx.register_custom_op_symbolic("aten::unflatten",
                                                   symbolic_opset13.unflatten, opset)
        try:
            torch.onnx.export(model, args, path, **kwargs)
        finally:
            torch.nn.functional.scaled_dot_product_attention = sdpa


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
    ap.add_argument("--exporters", default=",".join(DEFAULT_EXPORTERS),
                    help="of: " + ", ".join(EXPORTERS))
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
            dynamo, opset, fold = EXPORTERS[ex]
            path = os.path.join(a.out, f"{name}-{ex}.onnx")
            try:
                export(model, inputs, path, dynamo, opset, fold)
                print(f"{name}-{ex}: {os.path.getsize(path)} bytes, "
                      f"{check_ort(path, inputs, want)}", flush=True)
            except Exception as e:  # report and go on: one exporter's bug is not fatal
                failed += 1
                print(f"{name}-{ex}: FAILED: {type(e).__name__}: {str(e)[:300]}", flush=True)
    print(f"{failed} exports failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
