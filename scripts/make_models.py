#!/usr/bin/env python3
"""Writes the bundled ONNX models (models/*.onnx) and their ONNX Runtime reference fixtures.

    bench/.venv/bin/pip install onnx onnxruntime numpy   # once (the library never needs Python)
    bench/.venv/bin/python scripts/make_models.py        # rewrites models/ and tests/onnx/fixtures/

Both models have seeded random weights (numpy.random.default_rng), so the files are the same on
every run with the same onnx version. Each model is validated with onnx.checker (full check,
with shape inference), then run through ONNX Runtime's CPU provider on seeded inputs; the inputs
and ORT's outputs are written as .npy files under tests/onnx/fixtures/, which
tests/onnx/bundled_models_test.cpp compares smelt against (no Python at test time).
"""
import argparse
import math
import os
import sys

import numpy as np

try:
    import onnx
    from onnx import TensorProto, helper, numpy_helper
except ImportError:  # the fixture script's one dependency: say how to get it
    sys.exit("make_models.py: needs the onnx package (bench/.venv/bin/pip install onnx onnxruntime numpy)")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPSET = 17  # LayerNormalization is an operator from opset 17 on
IR_VERSION = 8  # the IR that opset 17 shipped with: ONNX Runtime and older tools read it


class GraphBuilder:
    """Collects nodes and initializers with unique names."""

    def __init__(self, rng):
        self.rng = rng
        self.nodes = []
        self.initializers = []
        self.count = 0

    def weight(self, name, array):
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def const(self, name, values, dtype=np.int64):
        return self.weight(name, np.asarray(values, dtype=dtype))

    def normal(self, name, shape, std):
        return self.weight(name, (self.rng.standard_normal(shape) * std).astype(np.float32))

    def op(self, op_type, inputs, name=None, outputs=1, **attrs):
        self.count += 1
        base = name or f"{op_type.lower()}_{self.count}"
        outs = [base] if outputs == 1 else [f"{base}_{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=base, **attrs))
        return outs[0] if outputs == 1 else outs


def finish(b, name, inputs, outputs, doc):
    graph = helper.make_graph(b.nodes, name, inputs, outputs, b.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="smelt scripts/make_models.py",
                              producer_version=f"onnx {onnx.__version__}", doc_string=doc)
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def tiny_transformer(seed=0, vocab=1000, d_model=128, heads=4, layers=2, d_ff=512, max_seq=128):
    """A pre-LayerNorm transformer encoder (GPT-2 block layout, no causal mask) with tied output
    embeddings: input_ids int64 [batch, seq] -> logits float [batch, seq, vocab] and
    last_hidden_state float [batch, seq, d_model]."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder(rng)
    head_dim = d_model // heads

    def layer_norm(x, prefix):
        gamma = b.weight(prefix + ".weight", (1.0 + 0.1 * rng.standard_normal(d_model)).astype(np.float32))
        beta = b.weight(prefix + ".bias", (0.05 * rng.standard_normal(d_model)).astype(np.float32))
        return b.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=1e-5)

    def linear(x, prefix, d_in, d_out):
        w = b.normal(prefix + ".weight", (d_in, d_out), 1.0 / math.sqrt(d_in))
        bias = b.normal(prefix + ".bias", (d_out,), 0.02)
        return b.op("Add", [b.op("MatMul", [x, w]), bias])

    tok_emb = b.normal("embed_tokens.weight", (vocab, d_model), 1.0)
    pos_emb = b.normal("embed_positions.weight", (max_seq, d_model), 0.5)
    x = b.op("Gather", [tok_emb, "input_ids"], axis=0, name="token_embedding")
    # Positions 0..seq-1: slice the table to the sequence length read from the input's shape.
    seq_len = b.op("Slice", [b.op("Shape", ["input_ids"]), b.const("c_1", [1]), b.const("c_2", [2])])
    positions = b.op("Slice", [pos_emb, b.const("c_0", [0]), seq_len, b.const("c_axis0", [0])])
    x = b.op("Add", [x, positions], name="embeddings")

    split_sizes = b.const("qkv_split", [d_model] * 3)
    to_heads = b.const("to_heads", [0, 0, heads, head_dim])  # 0 copies batch and seq
    from_heads = b.const("from_heads", [0, 0, d_model])
    scale = b.weight("attn_scale", np.array(1.0 / math.sqrt(head_dim), dtype=np.float32))
    half = b.weight("c_half", np.array(0.5, dtype=np.float32))
    one = b.weight("c_one", np.array(1.0, dtype=np.float32))
    inv_sqrt2 = b.weight("c_inv_sqrt2", np.array(1.0 / math.sqrt(2.0), dtype=np.float32))
    for i in range(layers):
        p = f"layers.{i}"
        # Self-attention: fused QKV projection, split into heads, scaled dot product, softmax.
        h = layer_norm(x, p + ".ln_1")
        q, k, v = b.op("Split", [linear(h, p + ".attn.qkv", d_model, 3 * d_model), split_sizes],
                       outputs=3, axis=-1, name=p + ".attn.split")
        q = b.op("Transpose", [b.op("Reshape", [q, to_heads])], perm=[0, 2, 1, 3])  # [B, H, S, Dh]
        k = b.op("Transpose", [b.op("Reshape", [k, to_heads])], perm=[0, 2, 3, 1])  # [B, H, Dh, S]
        v = b.op("Transpose", [b.op("Reshape", [v, to_heads])], perm=[0, 2, 1, 3])
        scores = b.op("Mul", [b.op("MatMul", [q, k]), scale], name=p + ".attn.scores")
        probs = b.op("Softmax", [scores], axis=-1, name=p + ".attn.probs")
        ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = b.op("Reshape", [ctx, from_heads])
        x = b.op("Add", [x, linear(ctx, p + ".attn.out", d_model, d_model)], name=p + ".attn.residual")
        # MLP with the exact (Erf) GELU: 0.5 * u * (1 + erf(u / sqrt(2))).
        h = layer_norm(x, p + ".ln_2")
        u = linear(h, p + ".mlp.fc_in", d_model, d_ff)
        erf = b.op("Erf", [b.op("Mul", [u, inv_sqrt2])])
        gelu = b.op("Mul", [b.op("Mul", [u, half]), b.op("Add", [erf, one])], name=p + ".mlp.gelu")
        x = b.op("Add", [x, linear(gelu, p + ".mlp.fc_out", d_ff, d_model)], name=p + ".mlp.residual")
    hidden = layer_norm(x, "ln_f")
    b.nodes[-1].output[0] = "last_hidden_state"
    # Tied output embedding: logits = hidden @ embed_tokens^T.
    emb_t = b.op("Transpose", [tok_emb], perm=[1, 0])
    b.nodes.append(helper.make_node("MatMul", ["last_hidden_state", emb_t], ["logits"], name="lm_head"))

    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", vocab]),
               helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", d_model])]
    doc = (f"tiny transformer encoder: {layers} pre-LN layers, d_model {d_model}, {heads} heads, MLP {d_ff} "
           f"with Erf GELU, vocab {vocab}, learned positions up to {max_seq}, tied output embedding; "
           f"seeded random weights (seed {seed})")
    return finish(b, "tiny_transformer", inputs, outputs, doc)


def tiny_cnn(seed=1, channels=(16, 32, 64), classes=10):
    """Three Conv3x3 + BatchNormalization + Relu + MaxPool2x2 stages, GlobalAveragePool, a Gemm
    classifier and Softmax: input float [N, 3, 32, 32] -> probs float [N, classes]."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder(rng)
    x = "input"
    c_in = 3
    for i, c_out in enumerate(channels):
        p = f"stage{i}"
        w = b.normal(p + ".conv.weight", (c_out, c_in, 3, 3), math.sqrt(2.0 / (9 * c_in)))
        bias = b.normal(p + ".conv.bias", (c_out,), 0.05)
        x = b.op("Conv", [x, w, bias], kernel_shape=[3, 3], pads=[1, 1, 1, 1], name=p + ".conv")
        scale = b.weight(p + ".bn.weight", (1.0 + 0.1 * rng.standard_normal(c_out)).astype(np.float32))
        shift = b.weight(p + ".bn.bias", (0.1 * rng.standard_normal(c_out)).astype(np.float32))
        mean = b.weight(p + ".bn.running_mean", (0.1 * rng.standard_normal(c_out)).astype(np.float32))
        var = b.weight(p + ".bn.running_var", rng.uniform(0.5, 2.0, c_out).astype(np.float32))
        x = b.op("BatchNormalization", [x, scale, shift, mean, var], epsilon=1e-5, name=p + ".bn")
        x = b.op("Relu", [x], name=p + ".relu")
        x = b.op("MaxPool", [x], kernel_shape=[2, 2], strides=[2, 2], name=p + ".pool")
        c_in = c_out
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x], name="gap")], axis=1)
    w = b.normal("fc.weight", (classes, c_in), 1.0 / math.sqrt(c_in))
    bias = b.normal("fc.bias", (classes,), 0.05)
    x = b.op("Gemm", [x, w, bias], transB=1, name="fc")
    b.nodes.append(helper.make_node("Softmax", [x], ["probs"], axis=-1, name="softmax"))
    inputs = [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 32, 32])]
    outputs = [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", classes])]
    doc = (f"tiny CNN: {len(channels)} x (Conv3x3 + BatchNormalization + Relu + MaxPool2x2), channels "
           f"{list(channels)}, GlobalAveragePool, Gemm to {classes} classes, Softmax; seeded random weights "
           f"(seed {seed})")
    return finish(b, "tiny_cnn", inputs, outputs, doc)


def cli_fixture():
    """A small model for the `smelt run` tests: a symbol with no default (height), an input and an
    output whose names need sanitizing, and inputs of several element types whose names pick the
    random rule (a mask, ids, a plain integer whose name merely contains "id")."""
    b = GraphBuilder(np.random.default_rng(2))
    two = b.weight("two", np.array(2.0, dtype=np.float32))
    one = b.weight("one", np.array(1, dtype=np.int32))
    b.nodes.append(helper.make_node("Mul", ["x:0", two], ["y/out:0"], name="double"))
    b.nodes.append(helper.make_node("Add", ["n", one], ["n_plus_one"], name="increment"))
    inputs = [helper.make_tensor_value_info("x:0", TensorProto.FLOAT, ["batch", "height"]),
              helper.make_tensor_value_info("n", TensorProto.INT32, [3])]
    outputs = [helper.make_tensor_value_info("y/out:0", TensorProto.FLOAT, ["batch", "height"]),
               helper.make_tensor_value_info("n_plus_one", TensorProto.INT32, [3])]
    passthrough = [("attention_mask", TensorProto.INT64, ["batch", "seq_len"]),
                   ("token_ids", TensorProto.INT64, ["batch", "seq_len"]),
                   ("width", TensorProto.INT64, [64]),
                   ("flag", TensorProto.BOOL, [64]),
                   ("half", TensorProto.FLOAT16, [64]),
                   ("brain", TensorProto.BFLOAT16, [64]),
                   ("bytes", TensorProto.UINT8, [64])]
    for name, elem, dims in passthrough:
        b.nodes.append(helper.make_node("Identity", [name], [name + "_out"], name="copy_" + name))
        inputs.append(helper.make_tensor_value_info(name, elem, dims))
        outputs.append(helper.make_tensor_value_info(name + "_out", elem, dims))
    return finish(b, "cli_fixture", inputs, outputs, "y/out:0 = 2 * x:0, n_plus_one = n + 1, the rest copied")


def breaks_fixture():
    """A small model with graph breaks for `smelt run --compile`: the scores above a threshold
    (Greater -> NonZero, a break: its output shape depends on the values) are gathered, pass an
    element-wise chain long enough to compile (eager_below = 20) and are summed; an If on the input
    use_double (a break, unless given with --static) doubles the sum or not; grid is 2 * scores
    reshaped to the input grid_shape, whose initializer [4, 8] is its default (a constant: the
    Reshape folds; given with --input it is data and the Reshape a break; with --static, another
    constant)."""
    b = GraphBuilder(np.random.default_rng(3))
    f32 = lambda name, v: b.weight(name, np.array(v, dtype=np.float32))  # noqa: E731
    mask = b.op("Greater", ["scores", "threshold"], name="above")
    positions = b.op("NonZero", [mask], name="positions")                  # int64 [1, K]
    flat = b.op("Reshape", [positions, b.const("c_flat", [-1])], name="flat_positions")
    y = b.op("Gather", ["scores", flat], axis=0, name="picked")
    # An element-wise chain (fused when compiled): a smooth squashing of the picked scores.
    half, quarter, one, two = f32("c_half", 0.5), f32("c_quarter", 0.25), f32("c_one", 1.0), f32("c_two", 2.0)
    steps = [("Mul", half), ("Add", quarter), ("Tanh", None), ("Mul", two), ("Sub", one), ("Abs", None),
             ("Add", one), ("Sqrt", None), ("Mul", y), ("Neg", None), ("Exp", None), ("Add", one),
             ("Log", None), ("Mul", half), ("Sigmoid", None), ("Sub", quarter), ("Mul", y), ("Add", quarter),
             ("Relu", None), ("Mul", two)]
    for i, (op, other) in enumerate(steps):
        y = b.op(op, [y] if other is None else [y, other], name=f"chain_{i}_{op.lower()}")
    b.nodes[-1].output[0] = "selected"
    total = b.op("ReduceSum", ["selected"], keepdims=0, name="sum")
    then_graph = helper.make_graph(
        [helper.make_node("Mul", [total, "c_two"], ["doubled"], name="double")], "then_double", [],
        [helper.make_tensor_value_info("doubled", TensorProto.FLOAT, [])])
    else_graph = helper.make_graph(
        [helper.make_node("Identity", [total], ["kept"], name="keep")], "else_keep", [],
        [helper.make_tensor_value_info("kept", TensorProto.FLOAT, [])])
    b.nodes.append(helper.make_node("If", ["use_double"], ["total"], name="maybe_double",
                                    then_branch=then_graph, else_branch=else_graph))
    scaled = b.op("Mul", ["scores", "c_two"], name="scale")
    b.const("grid_shape", [4, 8])  # the default of the input grid_shape
    b.nodes.append(helper.make_node("Reshape", [scaled, "grid_shape"], ["grid"], name="to_grid"))
    inputs = [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["length"]),
              helper.make_tensor_value_info("threshold", TensorProto.FLOAT, []),
              helper.make_tensor_value_info("use_double", TensorProto.BOOL, []),
              helper.make_tensor_value_info("grid_shape", TensorProto.INT64, [2])]
    outputs = [helper.make_tensor_value_info("selected", TensorProto.FLOAT, ["count"]),
               helper.make_tensor_value_info("total", TensorProto.FLOAT, []),
               helper.make_tensor_value_info("grid", TensorProto.FLOAT, ["rows", "cols"])]
    doc = ("selected = chain(scores[scores > threshold]) (20 element-wise ops), total = sum(selected), "
           "doubled if use_double; grid = reshape(2 * scores, grid_shape), grid_shape [4, 8] unless given")
    return finish(b, "breaks_fixture", inputs, outputs, doc)


def static_fixture():
    """Inputs that `smelt run --compile --static` reads or refuses by type: a string tensor (values
    are read as strings), a float8 tensor (a storage type: only from .npy files) and an optional
    sequence (not a tensor); each passes through to an output."""
    b = GraphBuilder(np.random.default_rng(4))
    b.nodes.append(helper.make_node("Identity", ["label"], ["label_out"], name="copy_label"))
    b.nodes.append(helper.make_node("Identity", ["f8"], ["f8_out"], name="copy_f8"))
    b.nodes.append(helper.make_node("OptionalHasElement", ["maybe"], ["has_maybe"], name="has_maybe"))
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT, None))
    inputs = [helper.make_tensor_value_info("label", TensorProto.STRING, [2]),
              helper.make_tensor_value_info("f8", TensorProto.FLOAT8E4M3FN, [4]),
              helper.make_value_info("maybe", helper.make_optional_type_proto(seq))]
    outputs = [helper.make_tensor_value_info("label_out", TensorProto.STRING, [2]),
               helper.make_tensor_value_info("f8_out", TensorProto.FLOAT8E4M3FN, [4]),
               helper.make_tensor_value_info("has_maybe", TensorProto.BOOL, [])]
    model = helper.make_model(helper.make_graph(b.nodes, "static_fixture", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 19)],
                              producer_name="smelt scripts/make_models.py",
                              producer_version=f"onnx {onnx.__version__}",
                              doc_string="label_out = label, f8_out = f8, has_maybe = maybe is not empty")
    model.ir_version = 9  # float8 types arrive with IR 9 (opset 19)
    onnx.checker.check_model(model, full_check=True)
    return model


def write_fixtures(name, path, inputs, fixture_dir):
    """Runs the model through ONNX Runtime (CPU, one thread) and saves inputs and outputs."""
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    outputs = sess.run(None, inputs)
    os.makedirs(fixture_dir, exist_ok=True)
    for key, value in inputs.items():
        np.save(os.path.join(fixture_dir, f"{name}.input.{key}.npy"), value)
    for meta, value in zip(sess.get_outputs(), outputs):
        np.save(os.path.join(fixture_dir, f"{name}.output.{meta.name}.npy"), value)
    return ort.__version__


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "tests", "onnx", "fixtures"))
    ap.add_argument("--no-fixtures", action="store_true", help="write the models only (no onnxruntime needed)")
    args = ap.parse_args()
    os.makedirs(args.models, exist_ok=True)

    rng = np.random.default_rng(1234)
    fixture_inputs = {
        "tiny_transformer": {"input_ids": rng.integers(0, 1000, size=(2, 16), dtype=np.int64)},
        "tiny_cnn": {"input": rng.uniform(-1.0, 1.0, size=(2, 3, 32, 32)).astype(np.float32)},
    }
    for name, build in (("tiny_transformer", tiny_transformer), ("tiny_cnn", tiny_cnn)):
        model = build()
        path = os.path.join(args.models, name + ".onnx")
        onnx.save(model, path)
        onnx.checker.check_model(path, full_check=True)  # the file as written, re-read
        size = os.path.getsize(path)
        line = f"{path}: {size / 1e6:.2f} MB, {len(model.graph.node)} nodes, onnx {onnx.__version__}"
        if not args.no_fixtures:
            try:
                ort_version = write_fixtures(name, path, fixture_inputs[name], args.fixtures)
            except ImportError:
                sys.exit("make_models.py: fixtures need onnxruntime (bench/.venv/bin/pip install onnxruntime), "
                         "or pass --no-fixtures")
            line += f"; fixtures from onnxruntime {ort_version} in {args.fixtures}"
        print(line)
    if not args.no_fixtures:
        path = os.path.join(args.fixtures, "cli_fixture.onnx")
        onnx.save(cli_fixture(), path)
        print(f"{path}: the `smelt run` test model")
        path = os.path.join(args.fixtures, "breaks_fixture.onnx")
        onnx.save(breaks_fixture(), path)
        print(f"{path}: the `smelt run --compile` test model")
        path = os.path.join(args.fixtures, "static_fixture.onnx")
        onnx.save(static_fixture(), path)
        print(f"{path}: the `smelt run --static` input-type test model")


if __name__ == "__main__":
    main()
