#!/usr/bin/env python3
"""Real-architecture ONNX exports for the model benchmarks: GPT-2, BERT, ViT, a Whisper encoder, ResNet, MobileNetV3.

    bench/.venv/bin/python bench/models/export_models.py                 # every model, small and base
    bench/.venv/bin/python bench/models/export_models.py --sizes small --only bert,vit
    bench/.venv/bin/python bench/models/export_models.py --list          # the configurations

The architectures are plain PyTorch modules written here (no `transformers`, no torchvision, no
downloads) with random weights from a fixed seed, so an export is the same on every machine with
the same torch version. Each is exported with the TorchScript exporter (dynamo=False: it needs no
onnxscript, which the GPU machine lacks) at opset 17, batch as a dynamic axis (and the sequence,
past and frame lengths where the architecture has them), then checked: ONNX Runtime's CPU provider
runs the file on seeded inputs of a batch and length other than the export's (so that a dimension
the exporter froze shows) and its outputs must match the module's (see check_export for the
bound). Files go to bench/models/out/ (ignored by git) with manifest.json, which tells the
benchmark scripts each model's inputs (make_inputs below builds them).

Configurations ("base" is the published size; "small" a smaller sibling for quick runs):
  gpt2_prefill / gpt2_decode  base: GPT-2 small (12 layers, d 768, 12 heads, vocab 50257); decode
                              is one token with a KV cache (past_key_i/past_value_i) as inputs
  bert                        base: BERT-base (12 layers, d 768, 12 heads, vocab 30522)
  vit                         base: ViT-B/16 (224x224, 12 layers, d 768, 12 heads)
  whisper_encoder             base: Whisper-base encoder (80 mels, 6 layers, d 512, 8 heads); the
                              frame count is dynamic (3000 = 30 s is the published input)
  resnet                      base: ResNet-50; small: ResNet-18 (224x224)
  mobilenetv3                 base: MobileNetV3-small (224x224); small: width 0.5 at 128x128
The modules are importable (build_module, make_inputs) so that bench/gpu/onnx_models_gpu.py runs the
very same modules under torch eager and torch.compile.
"""
import argparse
import inspect
import json
import math
import os
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "out")
OPSET = 17  # LayerNormalization is an operator from opset 17 on
SEED = 0

# ---- configurations ------------------------------------------------------------------------------

CONFIGS = {
    "gpt2": {
        "small": dict(vocab=8192, n_pos=512, d=256, layers=4, heads=4),
        "base": dict(vocab=50257, n_pos=1024, d=768, layers=12, heads=12),
    },
    "bert": {
        "small": dict(vocab=30522, n_pos=512, types=2, d=256, layers=4, heads=4, ff=1024),
        "base": dict(vocab=30522, n_pos=512, types=2, d=768, layers=12, heads=12, ff=3072),
    },
    "vit": {
        "small": dict(image=224, patch=16, d=192, layers=12, heads=3, ff=768, classes=1000),  # ViT-Ti/16
        "base": dict(image=224, patch=16, d=768, layers=12, heads=12, ff=3072, classes=1000),  # ViT-B/16
    },
    "whisper_encoder": {
        "small": dict(mels=80, n_ctx=1500, d=384, layers=4, heads=6),  # Whisper-tiny's encoder
        "base": dict(mels=80, n_ctx=1500, d=512, layers=6, heads=8),  # Whisper-base's encoder
    },
    "resnet": {
        "small": dict(block="basic", layers=[2, 2, 2, 2], image=224, classes=1000),  # ResNet-18
        "base": dict(block="bottleneck", layers=[3, 4, 6, 3], image=224, classes=1000),  # ResNet-50
    },
    "mobilenetv3": {
        "small": dict(width=0.5, image=128, classes=1000),
        "base": dict(width=1.0, image=224, classes=1000),  # MobileNetV3-small
    },
}

# The exported models; gpt2_prefill and gpt2_decode are two exports of one GPT-2 module.
MODELS = ["gpt2_prefill", "gpt2_decode", "bert", "vit", "whisper_encoder", "resnet", "mobilenetv3"]


def arch_of(model):
    return "gpt2" if model.startswith("gpt2") else model


# ---- transformer parts ---------------------------------------------------------------------------


def split_heads(x, heads):
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)


def merge_heads(x):
    b, h, t, dh = x.shape
    return x.transpose(1, 2).reshape(b, t, h * dh)


class MLP(nn.Module):
    def __init__(self, d, ff, approximate="none"):
        super().__init__()
        self.fc1, self.fc2, self.approximate = nn.Linear(d, ff), nn.Linear(ff, d), approximate

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate=self.approximate))


class SelfAttention(nn.Module):
    """Multi-head self-attention written out (matmul, scale, mask, softmax, matmul), as the
    published implementations of these models do and as their ONNX exports look."""

    def __init__(self, d, heads, k_bias=True):
        super().__init__()
        self.heads, self.scale = heads, (d // heads) ** -0.5
        self.q, self.k, self.v = nn.Linear(d, d), nn.Linear(d, d, bias=k_bias), nn.Linear(d, d)
        self.out = nn.Linear(d, d)

    def forward(self, x, additive_mask=None):
        q, k, v = (split_heads(p(x), self.heads) for p in (self.q, self.k, self.v))
        att = (q @ k.transpose(-1, -2)) * self.scale
        if additive_mask is not None:
            att = att + additive_mask
        return self.out(merge_heads(F.softmax(att, dim=-1) @ v))


class PreLNBlock(nn.Module):
    """ViT and Whisper: x + attn(ln(x)), x + mlp(ln(x))."""

    def __init__(self, d, heads, ff, eps, k_bias=True):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=eps), nn.LayerNorm(d, eps=eps)
        self.attn, self.mlp = SelfAttention(d, heads, k_bias), MLP(d, ff)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


def init_transformer(module):
    """GPT-2/BERT-style initialization (normal, std 0.02) with small random biases, so that every
    bias-add and LayerNorm affine carries values."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Embedding, nn.Conv1d, nn.Conv2d)):
            nn.init.normal_(m.weight, std=0.02)
            if getattr(m, "bias", None) is not None:
                nn.init.normal_(m.bias, std=0.02)
        elif isinstance(m, nn.LayerNorm):
            nn.init.normal_(m.weight, mean=1.0, std=0.05)
            nn.init.normal_(m.bias, std=0.02)


# ---- GPT-2 ---------------------------------------------------------------------------------------


class GPT2Attention(nn.Module):
    def __init__(self, d, heads, n_pos):
        super().__init__()
        self.heads, self.d, self.scale = heads, d, (d // heads) ** -0.5
        self.c_attn, self.c_proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        causal = torch.tril(torch.ones(n_pos, n_pos, dtype=torch.bool)).view(1, 1, n_pos, n_pos)
        self.register_buffer("causal", causal, persistent=False)

    def forward(self, x, past_k=None, past_v=None):
        q, k, v = self.c_attn(x).split(self.d, dim=2)
        q, k, v = split_heads(q, self.heads), split_heads(k, self.heads), split_heads(v, self.heads)
        if past_k is not None:
            k, v = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        att = (q @ k.transpose(-1, -2)) * self.scale
        t, kl = q.shape[2], k.shape[2]
        # The query rows are the last t of the kl positions (HF GPT-2's causal slice).
        mask = self.causal[:, :, kl - t:kl, :kl]
        att = att.masked_fill(~mask, torch.finfo(att.dtype).min)
        y = merge_heads(F.softmax(att, dim=-1) @ v)
        return self.c_proj(y), k, v


class GPT2Block(nn.Module):
    def __init__(self, d, heads, n_pos):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(d, eps=1e-5), nn.LayerNorm(d, eps=1e-5)
        self.attn, self.mlp = GPT2Attention(d, heads, n_pos), MLP(d, 4 * d, approximate="tanh")

    def forward(self, x, past_k=None, past_v=None):
        a, k, v = self.attn(self.ln_1(x), past_k, past_v)
        x = x + a
        return x + self.mlp(self.ln_2(x)), k, v


class GPT2(nn.Module):
    """GPT-2 language model: forward(input_ids, past_key_0, past_value_0, ...) returns the logits and
    each layer's present key and value ([batch, heads, past + seq, d / heads]); without past inputs
    it is the prefill."""

    def __init__(self, vocab, n_pos, d, layers, heads):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(n_pos, d)
        self.h = nn.ModuleList(GPT2Block(d, heads, n_pos) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d, eps=1e-5)
        init_transformer(self)

    def forward(self, input_ids, *past):
        past_len = past[0].shape[2] if past else 0
        pos = torch.arange(past_len, past_len + input_ids.shape[1], device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        presents = []
        for i, block in enumerate(self.h):
            x, k, v = block(x, *(past[2 * i:2 * i + 2] if past else ()))
            presents += [k, v]
        logits = F.linear(self.ln_f(x), self.wte.weight)  # the LM head shares the token embedding
        return (logits, *presents)


# ---- BERT ----------------------------------------------------------------------------------------


class BertLayer(nn.Module):
    """Post-LN: ln(x + attn(x)), ln(x + mlp(x))."""

    def __init__(self, d, heads, ff):
        super().__init__()
        self.attn, self.mlp = SelfAttention(d, heads), MLP(d, ff)
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)

    def forward(self, x, mask):
        x = self.ln1(x + self.attn(x, mask))
        return self.ln2(x + self.mlp(x))


class Bert(nn.Module):
    """BERT encoder with its pooler: forward(input_ids, attention_mask, token_type_ids) returns the
    last hidden state and the pooled output."""

    def __init__(self, vocab, n_pos, types, d, layers, heads, ff):
        super().__init__()
        self.word, self.pos, self.token_type = nn.Embedding(vocab, d), nn.Embedding(n_pos, d), nn.Embedding(types, d)
        self.ln = nn.LayerNorm(d, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(d, heads, ff) for _ in range(layers))
        self.pool = nn.Linear(d, d)
        init_transformer(self)

    def forward(self, input_ids, attention_mask, token_type_ids):
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.ln(self.word(input_ids) + self.pos(pos) + self.token_type(token_type_ids))
        keep = attention_mask[:, None, None, :].to(x.dtype)
        mask = (1.0 - keep) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, mask)
        return x, torch.tanh(self.pool(x[:, 0]))


# ---- ViT -----------------------------------------------------------------------------------------


class ViT(nn.Module):
    def __init__(self, image, patch, d, layers, heads, ff, classes):
        super().__init__()
        self.patch = nn.Conv2d(3, d, kernel_size=patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d))
        self.pos = nn.Parameter(torch.zeros(1, (image // patch) ** 2 + 1, d))
        self.blocks = nn.ModuleList(PreLNBlock(d, heads, ff, eps=1e-6) for _ in range(layers))
        self.ln = nn.LayerNorm(d, eps=1e-6)
        self.head = nn.Linear(d, classes)
        init_transformer(self)
        nn.init.normal_(self.cls, std=0.02)
        nn.init.normal_(self.pos, std=0.02)

    def forward(self, pixel_values):
        x = self.patch(pixel_values).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x)[:, 0])


# ---- Whisper encoder -----------------------------------------------------------------------------


def sinusoids(length, channels):
    """Whisper's fixed positional embedding."""
    inc = math.log(10000) / (channels // 2 - 1)
    inv = torch.exp(-inc * torch.arange(channels // 2, dtype=torch.float32))
    t = torch.arange(length, dtype=torch.float32)[:, None] * inv[None, :]
    return torch.cat([torch.sin(t), torch.cos(t)], dim=1)


class WhisperEncoder(nn.Module):
    """forward(input_features [batch, mels, frames]) -> [batch, frames / 2, d]; frames <= 2 n_ctx."""

    def __init__(self, mels, n_ctx, d, layers, heads):
        super().__init__()
        self.conv1 = nn.Conv1d(mels, d, kernel_size=3, padding=1)
        self.conv2 = nn.Conv1d(d, d, kernel_size=3, stride=2, padding=1)
        self.register_buffer("positions", sinusoids(n_ctx, d), persistent=False)
        # Whisper's key projection has no bias.
        self.blocks = nn.ModuleList(PreLNBlock(d, heads, 4 * d, eps=1e-5, k_bias=False) for _ in range(layers))
        self.ln_post = nn.LayerNorm(d, eps=1e-5)
        init_transformer(self)

    def forward(self, input_features):
        x = F.gelu(self.conv1(input_features))
        x = F.gelu(self.conv2(x)).transpose(1, 2)
        x = x + self.positions[:x.shape[1]].to(x.dtype)
        for block in self.blocks:
            x = block(x)
        return self.ln_post(x)


# ---- ResNet --------------------------------------------------------------------------------------


def conv_bn(cin, cout, k, stride=1, groups=1):
    return [nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, cin, width, stride):
        super().__init__()
        self.body = nn.Sequential(*conv_bn(cin, width, 3, stride), nn.ReLU(inplace=True), *conv_bn(width, width, 3))
        self.down = (nn.Sequential(*conv_bn(cin, width, 1, stride)) if stride != 1 or cin != width else nn.Identity())

    def forward(self, x):
        return F.relu(self.body(x) + self.down(x))


class Bottleneck(nn.Module):
    """ResNet v1.5: the stride is on the 3x3 convolution."""
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(*conv_bn(cin, width, 1), nn.ReLU(inplace=True), *conv_bn(width, width, 3, stride),
                                  nn.ReLU(inplace=True), *conv_bn(width, cout, 1))
        self.down = (nn.Sequential(*conv_bn(cin, cout, 1, stride)) if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return F.relu(self.body(x) + self.down(x))


class ResNet(nn.Module):
    def __init__(self, block, layers, image, classes):
        super().__init__()
        Block = BasicBlock if block == "basic" else Bottleneck
        self.stem = nn.Sequential(*conv_bn(3, 64, 7, 2), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1))
        stages, cin = [], 64
        for i, n in enumerate(layers):
            width = 64 * 2 ** i
            for j in range(n):
                stages.append(Block(cin, width, 2 if (j == 0 and i > 0) else 1))
                cin = width * Block.expansion
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(cin, classes)

    def forward(self, pixel_values):
        x = self.stages(self.stem(pixel_values))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


# ---- MobileNetV3-small ---------------------------------------------------------------------------


def make_divisible(v, divisor=8):
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


class SqueezeExcite(nn.Module):
    def __init__(self, c):
        super().__init__()
        sq = make_divisible(c // 4)
        self.fc1, self.fc2 = nn.Conv2d(c, sq, 1), nn.Conv2d(sq, c, 1)

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class InvertedResidual(nn.Module):
    def __init__(self, cin, k, exp, cout, se, act, stride):
        super().__init__()
        Act = nn.Hardswish if act == "HS" else nn.ReLU
        layers = []
        if exp != cin:
            layers += [*conv_bn(cin, exp, 1), Act()]
        layers += [*conv_bn(exp, exp, k, stride, groups=exp), Act()]
        if se:
            layers.append(SqueezeExcite(exp))
        layers += conv_bn(exp, cout, 1)
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


# (kernel, expansion, out, squeeze-excite, activation, stride): the published MobileNetV3-small.
MOBILENETV3_SMALL = [
    (3, 16, 16, True, "RE", 2), (3, 72, 24, False, "RE", 2), (3, 88, 24, False, "RE", 1),
    (5, 96, 40, True, "HS", 2), (5, 240, 40, True, "HS", 1), (5, 240, 40, True, "HS", 1),
    (5, 120, 48, True, "HS", 1), (5, 144, 48, True, "HS", 1), (5, 288, 96, True, "HS", 2),
    (5, 576, 96, True, "HS", 1), (5, 576, 96, True, "HS", 1),
]


class MobileNetV3Small(nn.Module):
    def __init__(self, width, image, classes):
        super().__init__()
        c = lambda n: make_divisible(n * width)
        layers, cin = [*conv_bn(3, c(16), 3, 2), nn.Hardswish()], c(16)
        for k, exp, out, se, act, stride in MOBILENETV3_SMALL:
            layers.append(InvertedResidual(cin, k, c(exp), c(out), se, act, stride))
            cin = c(out)
        layers += [*conv_bn(cin, 6 * cin, 1), nn.Hardswish()]
        self.features = nn.Sequential(*layers)
        last = make_divisible(1024 * width)
        self.classifier = nn.Sequential(nn.Linear(6 * cin, last), nn.Hardswish(), nn.Linear(last, classes))

    def forward(self, pixel_values):
        x = F.adaptive_avg_pool2d(self.features(pixel_values), 1)
        return self.classifier(torch.flatten(x, 1))


# ---- building, inputs, export --------------------------------------------------------------------


def calibrate_batchnorm(module, image, seed):
    """Random convolution weights with BatchNorm's default statistics (mean 0, variance 1) blow
    activations up or down layer by layer; a few training-mode passes over random images set the
    running statistics the way training would, so that the exported network keeps values O(1)."""
    g = torch.Generator().manual_seed(seed + 1)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.momentum = None  # cumulative average over the calibration batches
            nn.init.normal_(m.weight, mean=1.0, std=0.1)
            nn.init.normal_(m.bias, std=0.1)
    module.train()
    with torch.no_grad():
        for _ in range(2):
            module(torch.randn(4, 3, image, image, generator=g))
    module.eval()


def build_module(model, size, dtype=torch.float32, device="cpu"):
    """The module of one model name and size ('small' or 'base'), weights from the fixed seed, in eval mode."""
    arch = arch_of(model)
    cfg = CONFIGS[arch][size]
    torch.manual_seed(SEED)
    if arch == "gpt2":
        m = GPT2(**cfg)
    elif arch == "bert":
        m = Bert(**cfg)
    elif arch == "vit":
        m = ViT(**cfg)
    elif arch == "whisper_encoder":
        m = WhisperEncoder(**cfg)
    elif arch == "resnet":
        m = ResNet(**cfg)
        calibrate_batchnorm(m, cfg["image"], SEED)
    elif arch == "mobilenetv3":
        m = MobileNetV3Small(**cfg)
        calibrate_batchnorm(m, cfg["image"], SEED)
    else:
        raise ValueError(f"export_models: unknown model '{model}' (known: {', '.join(MODELS)})")
    return m.eval().to(device=device, dtype=dtype)


def input_specs(model, size):
    """[(name, numpy dtype, shape with symbols 'batch'/'seq'/'past'/'frames', kind)] of one model;
    kind says how make_inputs fills it."""
    cfg = CONFIGS[arch_of(model)][size]
    if model == "gpt2_prefill":
        return [("input_ids", "int64", ["batch", "seq"], f"ids:{cfg['vocab']}")]
    if model == "gpt2_decode":
        dh = cfg["d"] // cfg["heads"]
        specs = [("input_ids", "int64", ["batch", 1], f"ids:{cfg['vocab']}")]
        for i in range(cfg["layers"]):
            for kv in ("key", "value"):
                specs.append((f"past_{kv}_{i}", "float32", ["batch", cfg["heads"], "past", dh], "normal"))
        return specs
    if model == "bert":
        return [("input_ids", "int64", ["batch", "seq"], f"ids:{cfg['vocab']}"),
                ("attention_mask", "int64", ["batch", "seq"], "ones"),
                ("token_type_ids", "int64", ["batch", "seq"], "zeros")]
    if model == "whisper_encoder":
        return [("input_features", "float32", ["batch", cfg["mels"], "frames"], "normal")]
    return [("pixel_values", "float32", ["batch", 3, cfg["image"], cfg["image"]], "normal")]


def output_names(model, size):
    if model.startswith("gpt2"):
        layers = CONFIGS["gpt2"][size]["layers"]
        return ["logits"] + [f"present_{kv}_{i}" for i in range(layers) for kv in ("key", "value")]
    if model == "bert":
        return ["last_hidden_state", "pooler_output"]
    if model == "whisper_encoder":
        return ["last_hidden_state"]
    return ["logits"]


def make_inputs(model, size, batch, seq=128, past=127, frames=3000, seed=0):
    """{name: numpy array} for one call; the same arrays on every run with the same arguments.
    ids uniform in [0, vocab), masks ones, token types zeros, features and KV caches N(0, 1)."""
    rng = np.random.default_rng(seed)
    sizes = {"batch": batch, "seq": seq, "past": past, "frames": frames}
    feed = {}
    for name, dtype, shape, kind in input_specs(model, size):
        dims = [sizes[d] if isinstance(d, str) else d for d in shape]
        if kind.startswith("ids:"):
            feed[name] = rng.integers(0, int(kind[4:]), size=dims, dtype=np.int64)
        elif kind == "ones":
            feed[name] = np.ones(dims, dtype=np.int64)
        elif kind == "zeros":
            feed[name] = np.zeros(dims, dtype=np.int64)
        else:
            feed[name] = rng.standard_normal(dims, dtype=np.float32)
    return feed


def dynamic_axes(model, size):
    axes = {}
    for name, _, shape, _ in input_specs(model, size):
        axes[name] = {i: d for i, d in enumerate(shape) if isinstance(d, str)}
    for name in output_names(model, size):
        if name.startswith("present"):
            axes[name] = {0: "batch", 2: "total"}
        elif model.startswith("gpt2") and name == "logits":
            axes[name] = {0: "batch", 1: "seq" if model == "gpt2_prefill" else 1}
        elif model == "bert" and name == "last_hidden_state":
            axes[name] = {0: "batch", 1: "seq"}
        elif model == "whisper_encoder":
            axes[name] = {0: "batch", 1: "positions"}
        else:
            axes[name] = {0: "batch"}
    for v in axes.values():
        for k in [k for k, d in v.items() if not isinstance(d, str)]:
            del v[k]
    return axes


def to_torch(feed, dtype, device="cpu"):
    """The feed as torch tensors; floating inputs in `dtype`."""
    out = []
    for v in feed.values():
        t = torch.from_numpy(v).to(device)
        out.append(t.to(dtype) if t.is_floating_point() else t)
    return tuple(out)


def check_sizes(model):
    """Sizes for the export-time check: a batch and lengths other than the export example's."""
    return dict(batch=3, seq=9, past=6, frames=64)


def export_sizes(model):
    return dict(batch=2, seq=7, past=5, frames=48)


def check_export(path, module, model, size, seed=1):
    """ONNX Runtime against the torch module on float32 inputs of new sizes. Bound: both compute in
    float32 with different summation orders and fused kernels, so outputs differ by a few ulps of
    the partial sums (dot products of at most 3072 terms through at most 12 layers: relative
    differences ~1e-5 of the output's scale); any wrong or frozen operator gives O(1) differences.
    The check fails above 1e-3 x (max |reference| + 1)."""
    import onnxruntime as ort
    feed = make_inputs(model, size, seed=seed, **check_sizes(model))
    with torch.no_grad():
        ref = module(*to_torch(feed, torch.float32))
    ref = [ref] if torch.is_tensor(ref) else list(ref)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = max(1, min(4, os.cpu_count() or 1))
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    got = sess.run(None, feed)
    worst = 0.0
    for name, r, g in zip(output_names(model, size), ref, got):
        r = r.float().numpy()
        if r.shape != g.shape:
            raise RuntimeError(f"export_models: {model}/{size} output '{name}': ONNX Runtime gives shape "
                               f"{g.shape}, torch {r.shape}")
        err = float(np.max(np.abs(r - g))) / (float(np.max(np.abs(r))) + 1.0)
        worst = max(worst, err)
        if not err <= 1e-3:
            raise RuntimeError(f"export_models: {model}/{size} output '{name}': ONNX Runtime differs from torch "
                               f"by {err:.3g} of the output's scale (bound 1e-3)")
    return worst


def export(model, size, out_dir=OUT, dtype=torch.float32, check=True, quiet=False, device="cpu"):
    """Exports one model and size to out_dir/MODEL_SIZE[_bf16|_float16].onnx and returns its manifest entry.
    `device`: where the exporter traces the module (float16 convolutions want the GPU on older torches)."""
    os.makedirs(out_dir, exist_ok=True)
    tag = "" if dtype == torch.float32 else "_" + str(dtype).replace("torch.", "").replace("bfloat16", "bf16")
    path = os.path.join(out_dir, f"{model}_{size}{tag}.onnx")
    t0 = time.perf_counter()
    module = build_module(model, size, dtype, device)
    example = to_torch(make_inputs(model, size, **export_sizes(model)), dtype, device)
    names = [s[0] for s in input_specs(model, size)]
    with torch.no_grad(), warnings.catch_warnings():
        # The TorchScript exporter is deprecated from torch 2.9 on; it is the one that needs no onnxscript.
        warnings.filterwarnings("ignore", message=".*legacy TorchScript-based ONNX export.*")
        kwargs = dict(input_names=names, output_names=output_names(model, size),
                      dynamic_axes=dynamic_axes(model, size), opset_version=OPSET, do_constant_folding=True)
        # A torch older than 2.5 has no dynamo argument: its exporter is TorchScript's.
        if "dynamo" in inspect.signature(torch.onnx.export).parameters:
            kwargs["dynamo"] = False
        torch.onnx.export(module, example, path, **kwargs)
    export_s = time.perf_counter() - t0
    # bfloat16 files are not checked here: ONNX Runtime's CPU provider has no bfloat16 MatMul/Conv.
    err = check_export(path, module.cpu(), model, size) if check and dtype == torch.float32 else None
    entry = {"model": model, "size": size, "dtype": str(dtype).replace("torch.", ""), "file": os.path.basename(path),
             "config": CONFIGS[arch_of(model)][size], "bytes": os.path.getsize(path),
             "params": sum(p.numel() for p in module.parameters()),
             "inputs": [{"name": n, "dtype": d, "shape": s, "kind": k} for n, d, s, k in input_specs(model, size)],
             "outputs": output_names(model, size), "export_s": round(export_s, 2),
             "check_max_rel_error": err, "torch": torch.__version__, "opset": OPSET}
    if not quiet:
        checked = "not checked" if err is None else f"ORT check {err:.2g}"
        print(f"  {entry['file']:<34} {entry['params'] / 1e6:8.1f} M params {entry['bytes'] / 2**20:8.1f} MiB "
              f"{export_s:6.1f} s  {checked}", flush=True)
    return entry


def update_manifest(out_dir, entries):
    path = os.path.join(out_dir, "manifest.json")
    manifest = {}
    if os.path.exists(path):
        with open(path) as f:
            manifest = json.load(f)
    for e in entries:
        manifest[e["file"]] = e
    with open(path, "w") as f:
        json.dump(manifest, f, indent=1)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=OUT, help="output folder (default bench/models/out)")
    p.add_argument("--only", default=",".join(MODELS), help="comma-separated model names")
    p.add_argument("--sizes", default="small,base", help="comma-separated: small, base")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    p.add_argument("--no-check", action="store_true", help="skip the ONNX Runtime check")
    p.add_argument("--force", action="store_true", help="export again when the file exists")
    p.add_argument("--list", action="store_true", help="print the configurations and exit")
    a = p.parse_args()
    models = [m for m in a.only.split(",") if m]
    for m in models:
        if m not in MODELS:
            sys.exit(f"export_models.py: unknown model '{m}' (known: {', '.join(MODELS)})")
    sizes = [s for s in a.sizes.split(",") if s]
    for s in sizes:
        if s not in ("small", "base"):
            sys.exit(f"export_models.py: unknown size '{s}' (known: small, base)")
    if a.list:
        for m in models:
            for s in sizes:
                print(f"{m:<16} {s:<6} {CONFIGS[arch_of(m)][s]}")
        return
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    dtype = getattr(torch, a.dtype)
    print(f"export_models: torch {torch.__version__}, opset {OPSET}, into {a.out}")
    entries = []
    for m in models:
        for s in sizes:
            tag = "" if a.dtype == "float32" else "_bf16"
            path = os.path.join(a.out, f"{m}_{s}{tag}.onnx")
            manifest = os.path.join(a.out, "manifest.json")
            if not a.force and os.path.exists(path) and os.path.exists(manifest):
                with open(manifest) as f:
                    known = json.load(f).get(os.path.basename(path))
                if known and known.get("torch") == torch.__version__ and known.get("config") == CONFIGS[arch_of(m)][s]:
                    print(f"  {os.path.basename(path):<34} exists (--force exports it again)")
                    continue
            entries.append(export(m, s, a.out, dtype, check=not a.no_check))
            update_manifest(a.out, entries)


if __name__ == "__main__":
    main()
