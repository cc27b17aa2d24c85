#!/usr/bin/env python3
"""GPU peers for scripts/gpu.sh: PyTorch eager and torch.compile on W1 and W3 and the copy floor, joined with
smelt's rows (bench_gpu's JSON) into one JSON report and a table (SUITE.md's fields).

Usage: peers_gpu.py SMELT_JSON OUT_JSON [reps]. CUDA events around each call, warm-up first,
median of reps (default 50), the same input sizes and ranges as bench_gpu.cpp.
"""
import json
import platform
import sys
import time


def main():
    smelt_json, out_json = sys.argv[1], sys.argv[2]
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 50
    rows = json.load(open(smelt_json))
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

    src = torch.empty(1 << 28, device=dev).uniform_(-1, 1)
    rows.append({"work": "copy_1GiB", "system": "torch_eager", "time_us": bench(lambda: src.clone()),
                 "bytes": 2.0 * 4 * (1 << 28)})
    del src

    def gelu(x):
        return 0.5 * x * (1 + torch.tanh(0.79788456 * (x + 0.044715 * x * x * x)))

    def w3(x, y):
        t = x * 1.5 + y
        t = torch.exp(-(t * t))
        t = t * y - 0.25
        t = torch.sin(t) + torch.cos(x)
        t = torch.abs(t) + 1.0
        t = torch.log(t) * 0.5
        t = torch.sqrt(t + 1.0)
        t = torch.maximum(t, y)
        return t / (x * x + 1.0)

    n1 = 64 << 20
    x1 = torch.empty(n1, device=dev).uniform_(-4, 4)
    rows.append({"work": "W1_gelu_tanh_64Mi_f32", "system": "torch_eager", "time_us": bench(lambda: gelu(x1)),
                 "bytes": 2.0 * 4 * n1})
    try:
        cg = torch.compile(gelu)
        rows.append({"work": "W1_gelu_tanh_64Mi_f32", "system": "torch_compile", "time_us": bench(lambda: cg(x1)),
                     "bytes": 2.0 * 4 * n1})
    except Exception as e:  # a peer that fails is reported, not fatal
        print("torch.compile W1:", e)
    del x1
    n3 = 16 << 20
    x3 = torch.empty(n3, device=dev).uniform_(-1, 1)
    y3 = torch.empty(n3, device=dev).uniform_(0.5, 2.0)
    rows.append({"work": "W3_chain16_16Mi_f32", "system": "torch_eager", "time_us": bench(lambda: w3(x3, y3)),
                 "bytes": 3.0 * 4 * n3})
    try:
        c3 = torch.compile(w3)
        rows.append({"work": "W3_chain16_16Mi_f32", "system": "torch_compile", "time_us": bench(lambda: c3(x3, y3)),
                     "bytes": 3.0 * 4 * n3})
    except Exception as e:
        print("torch.compile W3:", e)

    # Floor: the best copy bandwidth measured in this run.
    copy_gbps = max(r["bytes"] / r["time_us"] / 1e3 for r in rows if r["work"] == "copy_1GiB")
    for r in rows:
        r["GBps"] = r["bytes"] / r["time_us"] / 1e3
        r["fraction_of_floor"] = r["GBps"] / copy_gbps
    for r in rows:
        if r["system"].startswith("smelt"):
            peers = [p["time_us"] for p in rows if p["work"] == r["work"] and not p["system"].startswith("smelt")]
            r["ratio_vs_best_peer"] = min(peers) / r["time_us"] if peers else None
    report = {"machine": {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                          "host": platform.node(), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
              "copy_GBps": copy_gbps, "rows": rows}
    json.dump(report, open(out_json, "w"), indent=1)
    lines = [f"{'work':<24} {'system':<12} {'time_us':>10} {'GB/s':>8} {'floor':>6} {'vs peer':>8}"]
    for r in rows:
        ratio = r.get("ratio_vs_best_peer")
        lines.append(f"{r['work']:<24} {r['system']:<12} {r['time_us']:>10.1f} {r['GBps']:>8.1f} "
                     f"{r['fraction_of_floor']:>6.2f} {'' if ratio is None else f'{ratio:.2f}x':>8}")
    print("\n".join(lines))
    return lines


if __name__ == "__main__":
    lines = main()
    if len(sys.argv) > 4:
        open(sys.argv[4], "w").write("\n".join(lines) + "\n")
