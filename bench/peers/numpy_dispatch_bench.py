#!/usr/bin/env python3
"""NumPy peer figure for W8 of bench/bench_compile.cpp: host time per call of 32 element-wise ops
(8 x tanh(1.01x + 0.5) - 0.1) on 16 float32 elements, many calls back to back.

Method (../../shared/bench/SUITE.md): one warm-up batch, then the median over --reps batches of
the time per call (each batch: 2000 calls, timed with time.perf_counter). Writes a JSON list of
rows {work, system, time_us, bytes, flops} to --out.
"""
import argparse
import json
import statistics
import time

import numpy as np

CALLS = 2000


def w8_chain(x):
    t = x
    for _ in range(8):
        t = np.tanh(t * np.float32(1.01) + np.float32(0.5)) - np.float32(0.1)
    return t


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=21)
    p.add_argument("--out", default="-")
    args = p.parse_args()
    x = np.random.default_rng(1).uniform(-2, 2, 16).astype(np.float32)
    for _ in range(CALLS):
        w8_chain(x)
    per_call = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            w8_chain(x)
        per_call.append((time.perf_counter() - t0) / CALLS)
    rows = [{"work": "W8_dispatch_32ops_16_f32", "system": "numpy", "time_us": statistics.median(per_call) * 1e6,
             "bytes": 0, "flops": 0, "meta": {"numpy": np.__version__}}]
    text = json.dumps(rows, indent=1)
    if args.out == "-":
        print(text)
    else:
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
