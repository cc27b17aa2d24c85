#!/usr/bin/env python3
"""GPU peers for scripts/gpu.sh: PyTorch eager, torch.compile and jax.jit on SUITE.md's W1-W9,
single reductions (row and column sums, float32, bfloat16 and float16), broadcasting element-wise
ops beside the same-shape op, the char-GPT example's training step and the copy floor, joined with smelt's rows (bench_gpu's JSON, plus W12 rows given as
extra JSON lines) into one JSON report and a table (SUITE.md's fields).

Usage: peers_gpu.py SMELT_JSON OUT_JSON [reps] [TABLE_TXT] [W12_JSONL]. CUDA events around each
call for the bandwidth workloads (warm-up first, median of reps, default 50); host time per call
over back-to-back calls for W8 and W9's host rows; the same sizes and value ranges as bench_gpu.cpp.
"""
import json
import os
import platform
import sys
import time


def main():
    smelt_json, out_json = sys.argv[1], sys.argv[2]
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    rows = json.load(open(smelt_json))
    if len(sys.argv) > 5 and os.path.exists(sys.argv[5]):
        rows += [json.loads(line) for line in open(sys.argv[5]) if line.strip()]
    import torch

    dev = torch.device("cuda")
    torch.manual_seed(0)

    def bench(fn):
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            e.synchronize()
            times.append(s.elapsed_time(e) * 1e3)
        times.sort()
        return times[len(times) // 2]

    def host_per_call(fn, sync):
        for _ in range(50):
            fn()
        sync()
        t = []
        for _ in range(7):
            calls = 2000
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            sync()
            t.append((time.perf_counter() - t0) / calls * 1e6)
        t.sort()
        return t[len(t) // 2]

    def add(work, system, fn, nbytes):
        try:
            rows.append({"work": work, "system": system, "time_us": bench(fn), "bytes": nbytes})
        except Exception as e:  # a peer that fails is reported, not fatal
            print(f"{system} {work}: {type(e).__name__}: {e}")

    try:
        import jax
        import jax.numpy as jnp
        jax_ok = any(d.platform == "gpu" for d in jax.devices())
    except Exception as e:
        print("jax: not usable:", e)
        jax_ok = False

    def add_jax(work, fn, args, nbytes):
        if not jax_ok:
            return
        try:
            jf = jax.jit(fn)
            jargs = [jax.dlpack.from_dlpack(a) for a in args]
            out = None

            def call():
                nonlocal out
                out = jf(*jargs)
            for _ in range(3):
                call()
            out.block_until_ready() if not isinstance(out, tuple) else [o.block_until_ready() for o in out]
            # jax.jit runs on its own stream: time with the host clock around block_until_ready.
            t = []
            for _ in range(reps):
                t0 = time.perf_counter()
                call()
                jax.block_until_ready(out)
                t.append((time.perf_counter() - t0) * 1e6)
            t.sort()
            rows.append({"work": work, "system": "jax_jit", "time_us": t[len(t) // 2], "bytes": nbytes})
        except Exception as e:
            print(f"jax {work}: {type(e).__name__}: {e}")

    src = torch.empty(1 << 28, device=dev).uniform_(-1, 1)
    add("copy_1GiB", "torch_eager", lambda: src.clone(), 2.0 * 4 * (1 << 28))
    del src

    def gelu(x, tanh=torch.tanh):
        return 0.5 * x * (1 + tanh(0.79788456 * (x + 0.044715 * x * x * x)))

    def w3(x, y, m=torch):
        t = x * 1.5 + y
        t = m.exp(-(t * t))
        t = t * y - 0.25
        t = m.sin(t) + m.cos(x)
        t = m.abs(t) + 1.0
        t = m.log(t) * 0.5
        t = m.sqrt(t + 1.0)
        t = m.maximum(t, y)
        return t / (x * x + 1.0)

    n1 = 64 << 20
    x1 = torch.empty(n1, device=dev).uniform_(-4, 4)
    add("W1_gelu_tanh_64Mi_f32", "torch_eager", lambda: gelu(x1), 2.0 * 4 * n1)
    cg = torch.compile(gelu)
    add("W1_gelu_tanh_64Mi_f32", "torch_compile", lambda: cg(x1), 2.0 * 4 * n1)
    if jax_ok:
        add_jax("W1_gelu_tanh_64Mi_f32", lambda x: gelu(x, jnp.tanh), [x1], 2.0 * 4 * n1)
    del x1

    g2 = torch.empty(8192, 14336, device=dev).uniform_(-4, 4).bfloat16()
    u2 = torch.empty(8192, 14336, device=dev).uniform_(-2, 2).bfloat16()
    n2 = g2.numel()

    def swiglu(g, u, sig=torch.sigmoid):
        return g * sig(g) * u
    add("W2_swiglu_8192x14336_bf16", "torch_eager", lambda: swiglu(g2, u2), 3.0 * 2 * n2)
    cs = torch.compile(swiglu)
    add("W2_swiglu_8192x14336_bf16", "torch_compile", lambda: cs(g2, u2), 3.0 * 2 * n2)
    if jax_ok:
        add_jax("W2_swiglu_8192x14336_bf16", lambda g, u: swiglu(g, u, jax.nn.sigmoid), [g2, u2], 3.0 * 2 * n2)
    del g2, u2

    n3 = 16 << 20
    x3 = torch.empty(n3, device=dev).uniform_(-1, 1)
    y3 = torch.empty(n3, device=dev).uniform_(0.5, 2.0)
    add("W3_chain16_16Mi_f32", "torch_eager", lambda: w3(x3, y3), 3.0 * 4 * n3)
    c3 = torch.compile(w3)
    add("W3_chain16_16Mi_f32", "torch_compile", lambda: c3(x3, y3), 3.0 * 4 * n3)
    if jax_ok:
        add_jax("W3_chain16_16Mi_f32", lambda x, y: w3(x, y, jnp), [x3, y3], 3.0 * 4 * n3)
    del x3, y3

    # W7: Adam, the same formula as bench_gpu's adam_step, in place on the state.
    n7 = 64 << 20
    p7 = torch.empty(n7, device=dev).uniform_(-1, 1)
    m7 = torch.empty(n7, device=dev).uniform_(-0.1, 0.1)
    v7 = torch.empty(n7, device=dev).uniform_(0, 0.01)
    g7 = torch.empty(n7, device=dev).uniform_(-1, 1)
    step7 = torch.tensor(10.0, device=dev)

    def adam(p, m, v, g, step, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
        step += 1
        m.mul_(b1).add_(g * (1 - b1))
        v.mul_(b2).add_(g * g * (1 - b2))
        mhat = m / (1 - b1 ** step)
        vhat = v / (1 - b2 ** step)
        p.sub_(mhat / (torch.sqrt(vhat) + eps) * lr)
    b7 = 7.0 * 4 * n7
    add("W7_adam_64Mi_f32", "torch_eager", lambda: adam(p7, m7, v7, g7, step7), b7)
    ca = torch.compile(adam)
    add("W7_adam_64Mi_f32", "torch_compile", lambda: ca(p7, m7, v7, g7, step7), b7)
    try:
        param = torch.nn.Parameter(p7)
        param.grad = g7
        opt = torch.optim.Adam([param], lr=1e-3, fused=True)
        add("W7_adam_64Mi_f32", "torch_fused_adam", lambda: opt.step(), b7)
    except Exception as e:
        print("fused Adam:", e)
    del p7, m7, v7, g7

    # W8: host time per call of 32 element-wise ops on 16 elements.
    x8 = torch.empty(16, device=dev).uniform_(-1, 1)

    def w8(x, tanh=torch.tanh):
        t = x
        for _ in range(8):
            t = tanh(t * 1.01 + 0.5) - 0.1
        return t
    sync = torch.cuda.synchronize
    rows.append({"work": "W8_dispatch_32ops_16_f32", "system": "torch_eager",
                 "time_us": host_per_call(lambda: w8(x8), sync), "bytes": 0})
    c8 = torch.compile(w8)
    rows.append({"work": "W8_dispatch_32ops_16_f32", "system": "torch_compile",
                 "time_us": host_per_call(lambda: c8(x8), sync), "bytes": 0})
    if jax_ok:
        j8 = jax.jit(lambda x: w8(x, jnp.tanh))
        jx8 = jax.dlpack.from_dlpack(x8)
        last = [None]

        def call8():
            last[0] = j8(jx8)
        rows.append({"work": "W8_dispatch_32ops_16_f32", "system": "jax_jit",
                     "time_us": host_per_call(call8, lambda: last[0].block_until_ready()), "bytes": 0})

    # Reductions: W4 RMSNorm, W5 softmax (max/exp/sum/divide), W6 LayerNorm + residual, and sums
    # over the last and the first axis (bench_gpu.cpp's rows, same shapes and dtypes).
    big = (16384, 4096)
    nb = 16384 * 4096
    xb = torch.randn(big, device=dev).to(torch.bfloat16)
    rb = torch.randn(big, device=dev).to(torch.bfloat16)
    wb = torch.randn(4096, device=dev).to(torch.bfloat16)
    bb = torch.randn(4096, device=dev).to(torch.bfloat16)
    xf = torch.randn(big, device=dev)
    x5 = torch.randn((4096, 32768), device=dev)
    xh = torch.randn(big, device=dev).to(torch.float16)
    colf = torch.randn((16384, 1), device=dev)
    rowf = torch.randn(4096, device=dev)
    colb = torch.randn((16384, 1), device=dev).to(torch.bfloat16)

    def rmsnorm(x, w, m=torch):
        xc = x.astype(m.float32) if m is not torch else x.float()
        ms = (xc * xc).mean(-1, keepdims=True) if m is not torch else (xc * xc).mean(-1, keepdim=True)
        y = xc * (1.0 / m.sqrt(ms + 1e-6)) * (w.astype(m.float32) if m is not torch else w.float())
        return y.astype(x.dtype) if m is not torch else y.to(x.dtype)

    def softmax(x, m=torch):
        kd = {"keepdims": True} if m is not torch else {"keepdim": True}
        mx = x.max(-1, **kd) if m is not torch else x.amax(-1, **kd)
        e = m.exp(x - mx)
        return e / e.sum(-1, **kd)

    def layernorm(x, r, w, b, m=torch):
        h = x + r
        hc = h.astype(m.float32) if m is not torch else h.float()
        kd = {"keepdims": True} if m is not torch else {"keepdim": True}
        d = hc - hc.mean(-1, **kd)
        var = (d * d).mean(-1, **kd)
        wf = w.astype(m.float32) if m is not torch else w.float()
        bf = b.astype(m.float32) if m is not torch else b.float()
        y = d * (1.0 / m.sqrt(var + 1e-5)) * wf + bf
        return y.astype(h.dtype) if m is not torch else y.to(h.dtype)

    def sum1(x, m=torch):
        return x.sum(-1) if m is not torch else x.sum(-1)

    def sum0(x, m=torch):
        return x.sum(0, keepdims=True) if m is not torch else x.sum(0, keepdim=True)

    def mul_self(x, m=torch):
        return x * x

    def sub(x, y, m=torch):
        return x - y

    def add2(x, y, m=torch):
        return x + y

    def attn(q, k, v, m=torch):
        if m is torch:
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        t = lambda a: a.transpose(0, 2, 1, 3)  # jax.nn.dot_product_attention's [B, T, N, H]
        return t(jax.nn.dot_product_attention(t(q), t(k), t(v), is_causal=True))
    qkv = [torch.randn(8, 12, 512, 64, device=dev).to(torch.bfloat16) for _ in range(3)]

    red = [("W4_rmsnorm_16384x4096_bf16", rmsnorm, [xb, wb], 2.0 * 2 * nb),
           ("W5_softmax_4096x32768_f32", softmax, [x5], 2.0 * 4 * 4096 * 32768),
           ("W6_layernorm_residual_16384x4096_bf16", layernorm, [xb, rb, wb, bb], 3.0 * 2 * nb),
           ("sum_axis1_16384x4096_f32", sum1, [xf], 4.0 * nb),
           ("sum_axis0_16384x4096_f32", sum0, [xf], 4.0 * nb),
           ("sum_axis1_16384x4096_bf16", sum1, [xb], 2.0 * nb),
           ("sum_axis0_16384x4096_bf16", sum0, [xb], 2.0 * nb),
           ("sum_axis1_16384x4096_f16", sum1, [xh], 2.0 * nb),
           ("sum_axis0_16384x4096_f16", sum0, [xh], 2.0 * nb),
           ("mul_self_16384x4096_f32", mul_self, [xf], 2.0 * 4 * nb),
           ("sub_col_16384x4096_f32", sub, [xf, colf], 2.0 * 4 * nb),
           ("add_row_16384x4096_f32", add2, [xf, rowf], 2.0 * 4 * nb),
           ("mul_self_16384x4096_bf16", mul_self, [xb], 2.0 * 2 * nb),
           ("sub_col_16384x4096_bf16", sub, [xb, colb], 2.0 * 2 * nb),
           ("attention_causal_8x12x512x64_bf16", attn, qkv, 0)]
    for work, fn, args, nbytes in red:
        add(work, "torch_eager", lambda fn=fn, args=args: fn(*args), nbytes)
        cf = torch.compile(fn)
        add(work, "torch_compile", lambda cf=cf, args=args: cf(*args), nbytes)
        if jax_ok:
            add_jax(work, lambda *a, fn=fn: fn(*a, m=jnp), args, nbytes)
    del xb, rb, xf, x5, xh, colf, rowf, colb, qkv
    rows += char_gpt_train_rows(reps)

    # W9: a GPT-2-small block forward, bf16, batch 8 x seq 512 x d 768, 12 heads (bench_gpu.cpp's
    # gpt2_block: pre-LN, QKV with bias, causal attention, proj + residual, tanh-GELU MLP + residual).
    import torch.nn.functional as F
    B, T, D, H = 8, 512, 768, 12

    def wt(*shape, sd=0.02, mean=0.0):
        return (torch.randn(*shape, device=dev) * sd + mean).to(torch.bfloat16)
    w9 = [wt(B, T, D, sd=1.0), wt(D, sd=0.1, mean=1.0), wt(D, sd=0.1, mean=1.0), wt(D, 3 * D), wt(3 * D),
          wt(D, D), wt(D), wt(D, sd=0.1, mean=1.0), wt(D, sd=0.1, mean=1.0), wt(D, 4 * D), wt(4 * D),
          wt(4 * D, D), wt(D)]

    def block(x, ln1_w, ln1_b, w_qkv, b_qkv, w_proj, b_proj, ln2_w, ln2_b, w_fc, b_fc, w_out, b_out):
        h = F.layer_norm(x, (D,), ln1_w, ln1_b, 1e-5)
        q, k, v = (h @ w_qkv + b_qkv).split(D, -1)

        def heads(a):
            return a.view(B, T, H, D // H).transpose(1, 2)
        a = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True)
        x1 = x + (a.transpose(1, 2).reshape(B, T, D) @ w_proj + b_proj)
        m = F.gelu(F.layer_norm(x1, (D,), ln2_w, ln2_b, 1e-5) @ w_fc + b_fc, approximate="tanh")
        return x1 + (m @ w_out + b_out)

    def host_per_call_batches(fn, sync):
        # bench_gpu's W9 host rows: batches of 10 back-to-back calls timed until the last one has
        # queued its work, a wait between batches; median of 50 batches.
        for _ in range(10):
            fn()
        sync()
        t = []
        for _ in range(50):
            keep = []
            t0 = time.perf_counter()
            for _ in range(10):
                keep.append(fn())
            t.append((time.perf_counter() - t0) / 10 * 1e6)
            sync()
        t.sort()
        return t[len(t) // 2]
    work9 = "W9_gpt2_block_8x512x768_bf16"
    with torch.no_grad():
        add(work9, "torch_eager", lambda: block(*w9), 0)
        cb = torch.compile(block)
        add(work9, "torch_compile", lambda: cb(*w9), 0)
        # torch.compile with CUDA graphs (mode="reduce-overhead"): the peer of smelt's graphs.
        cg9 = torch.compile(block, mode="reduce-overhead")
        add(work9, "torch_compile_cudagraphs", lambda: cg9(*w9), 0)
        for system, fn in (("torch_eager", lambda: block(*w9)), ("torch_compile", lambda: cb(*w9)),
                           ("torch_compile_cudagraphs", lambda: cg9(*w9))):
            try:
                rows.append({"work": "W9_host_per_call", "system": system,
                             "time_us": host_per_call_batches(fn, torch.cuda.synchronize), "bytes": 0})
            except Exception as e:
                print(f"{system} W9 host: {type(e).__name__}: {e}")
    if jax_ok:
        def jblock(x, ln1_w, ln1_b, w_qkv, b_qkv, w_proj, b_proj, ln2_w, ln2_b, w_fc, b_fc, w_out, b_out):
            def ln(a, w, b):
                af = a.astype(jnp.float32)
                mu = af.mean(-1, keepdims=True)
                var = ((af - mu) ** 2).mean(-1, keepdims=True)
                return ((af - mu) * jax.lax.rsqrt(var + 1e-5) * w + b).astype(a.dtype)
            q, k, v = jnp.split(ln(x, ln1_w, ln1_b) @ w_qkv + b_qkv, 3, axis=-1)

            def heads(a):
                return a.reshape(B, T, H, D // H)  # jax.nn.dot_product_attention's [B, T, N, H]
            a = jax.nn.dot_product_attention(heads(q), heads(k), heads(v), is_causal=True).reshape(B, T, D)
            x1 = x + (a @ w_proj + b_proj)
            m = jax.nn.gelu(ln(x1, ln2_w, ln2_b) @ w_fc + b_fc, approximate=True)
            return x1 + (m @ w_out + b_out)
        add_jax(work9, jblock, w9, 0)
    del w9

    # Floor: the best copy bandwidth measured in this run.
    copy_gbps = max(r["bytes"] / r["time_us"] / 1e3 for r in rows if r["work"] == "copy_1GiB")
    for r in rows:
        if r.get("bytes"):
            r["GBps"] = r["bytes"] / r["time_us"] / 1e3
            r["fraction_of_floor"] = r["GBps"] / copy_gbps
        else:
            r["GBps"] = r["fraction_of_floor"] = None
    for r in rows:
        if r["system"].startswith("smelt"):
            peers = [p["time_us"] for p in rows if p["work"] == r["work"] and not p["system"].startswith("smelt")]
            r["ratio_vs_best_peer"] = min(peers) / r["time_us"] if peers else None
    report = {"machine": {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                          "jax": jax.__version__ if jax_ok else None,
                          "host": platform.node(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
              "copy_GBps": copy_gbps, "rows": rows}
    json.dump(report, open(out_json, "w"), indent=1)
    lines = [f"{'work':<26} {'system':<19} {'time_us':>11} {'GB/s':>8} {'floor':>6} {'vs best peer':>12}"]
    for r in sorted(rows, key=lambda r: (r["work"], not r["system"].startswith("smelt"), r["system"])):
        ratio = r.get("ratio_vs_best_peer")
        gb = "" if r["GBps"] is None else f"{r['GBps']:.1f}"
        fl = "" if r["fraction_of_floor"] is None else f"{r['fraction_of_floor']:.2f}"
        lines.append(f"{r['work']:<26} {r['system']:<19} {r['time_us']:>11.1f} {gb:>8} {fl:>6} "
                     f"{'' if ratio is None else f'{ratio:.2f}x':>12}")
    lines.append("W8: host µs per call (2000 back-to-back calls); W9_host_per_call: host µs per call (batches of 10 "
                 "back-to-back calls; smelt with CUDA graphs on and off); W12: µs for the first call in a new process; "
                 "char_gpt_train_step_b64: host µs per training step, waited for.")
    print("\n".join(lines))
    return lines


def char_gpt_train_rows(reps):
    """The char-GPT example's training step (examples/char_gpt/char_gpt.h) in PyTorch, eager and
    torch.compile, with the fused AdamW (lr 1e-3, betas (0.9, 0.99), eps 1e-8, weight decay 0.01),
    gradient clipping at norm 1, batch 64 windows of 64 bytes of the same text. Same model as
    smelt's: token and position embeddings, 2 pre-norm blocks (LayerNorm, causal multi-head
    attention with one in_proj [3D, D] and out_proj, LayerNorm, MLP D -> 4D -> D with erf GELU),
    final LayerNorm, linear head. Attention goes through F.scaled_dot_product_attention (PyTorch's
    fastest path). Median host time per step over `reps`, each step waited for (loss.item()), as
    bench_gpu times smelt's step. Returns rows in bench_gpu's JSON format."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    dev = torch.device("cuda")
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "char_gpt", "alice_ch1.txt")
    text = open(path, "rb").read()
    vocab = sorted(set(text))
    index = {b: i for i, b in enumerate(vocab)}
    data = torch.tensor([index[b] for b in text], dtype=torch.long, device=dev)
    V, D, H, L, T, B = len(vocab), 128, 4, 2, 64, 64

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.in_proj, self.out_proj = nn.Linear(D, 3 * D), nn.Linear(D, D)

        def forward(self, x):
            b, t, _ = x.shape
            q, k, v = self.in_proj(x).split(D, dim=-1)
            q, k, v = (z.view(b, t, H, D // H).transpose(1, 2) for z in (q, k, v))
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.out_proj(o.transpose(1, 2).reshape(b, t, D))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2, self.attn = nn.LayerNorm(D), nn.LayerNorm(D), Attention()
            self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(T, D)
            self.blocks = nn.ModuleList(Block() for _ in range(L))
            self.ln_f, self.head = nn.LayerNorm(D), nn.Linear(D, V)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for b in self.blocks:
                x = b(x)
            return self.head(self.ln_f(x))

    offsets = torch.arange(T, device=dev)

    def batch():
        start = torch.randint(0, data.numel() - T - 1, (B, 1), device=dev)
        return data[start + offsets], data[start + offsets + 1]

    rows = []
    for system in ("torch_eager", "torch_compile"):
        try:
            torch.manual_seed(0)
            model = GPT().to(dev)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.01,
                                    fused=True)
            forward = torch.compile(model) if system == "torch_compile" else model

            def step():
                x, y = batch()
                loss = F.cross_entropy(forward(x).view(-1, V), y.view(-1))
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
                return loss.item()

            for _ in range(5):  # warm-up: compilation and autotuning stay out of the numbers
                step()
            times = []
            for _ in range(reps):
                t0 = time.perf_counter()
                step()
                times.append((time.perf_counter() - t0) * 1e6)
            times.sort()
            rows.append({"work": "char_gpt_train_step_b64", "system": system, "time_us": times[len(times) // 2],
                         "bytes": 0})
        except Exception as e:  # a peer that fails is reported, not fatal
            print(f"{system} char_gpt_train_step_b64: {type(e).__name__}: {e}")
    return rows


if __name__ == "__main__":
    lines = main()
    if len(sys.argv) > 4:
        open(sys.argv[4], "w").write("\n".join(lines) + "\n")
