#!/usr/bin/env python3
"""NumPy peer figures for bench/bench_arrays.cpp: the same workloads, sizes and random inputs.

Method (../../shared/bench/SUITE.md): one warm-up run, then the median of --reps runs (>= 20)
timed with time.perf_counter; every run allocates its output, as smelt's ops do. Threads: NumPy's
ufuncs use one thread; its BLAS (matmul) uses OPENBLAS_NUM_THREADS / OMP_NUM_THREADS /
MKL_NUM_THREADS, which are set to --threads below before numpy is imported, so matmul runs on the
same thread count as smelt. run.sh passes the count it gives smelt (SMELT_NUM_THREADS).

Writes a JSON list of rows {work, system, time_us, bytes, flops} to --out.
"""
import argparse
import json
import os
import statistics
import sys
import time


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=21, help="timed runs per workload (>= 20)")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="BLAS threads")
    p.add_argument("--out", default="-", help="JSON output file ('-' for stdout)")
    p.add_argument("--only", default="", help="comma-separated work names to run (default: all)")
    return p.parse_args()


ARGS = parse_args()
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[var] = str(ARGS.threads)

import numpy as np  # noqa: E402  (after the thread variables)

F32 = 4
ELEMS = 16 << 20          # 16 Mi float32 = 64 MiB per array
GELU_ELEMS = 64 << 20
COPY_BYTES = 256 << 20
MAT_N = 1024


def median_us(fn, reps):
    fn()  # warm-up: page faults, BLAS threads
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def gelu_tanh(x):
    # The tanh form of W1, with x³ as x*x*x (the same op count as bench_arrays.cpp).
    inner = (x + x * x * x * np.float32(0.044715)) * np.float32(0.79788456)
    return (x * np.float32(0.5)) * (np.tanh(inner) + np.float32(1.0))


def w3_chain(x, y):
    t = x * np.float32(1.5) + y
    t = np.exp(-(t * t))
    t = t * y - np.float32(0.25)
    t = np.sin(t) + np.cos(x)
    t = np.abs(t) + np.float32(1.0)
    t = np.log(t) * np.float32(0.5)
    t = np.sqrt(t + np.float32(1.0))
    t = np.maximum(t, y)
    return t / (x * x + np.float32(1.0))


def sigmoid(x):
    return np.float32(1.0) / (np.float32(1.0) + np.exp(-x))


def erf_peer():
    """SciPy's erf where SciPy is installed (NumPy has none); else no erf row."""
    try:
        from scipy.special import erf
    except ImportError:
        return None
    return erf


def main():
    rng = np.random.default_rng(0)
    x = rng.uniform(-3.0, 3.0, ELEMS).astype(np.float32)
    y = rng.uniform(0.5, 2.0, ELEMS).astype(np.float32)
    cond = rng.uniform(0.0, 1.0, ELEMS).astype(np.float32) > 0.5
    src = rng.integers(0, 255, COPY_BYTES, dtype=np.uint8)
    dst = np.ones(COPY_BYTES, dtype=np.uint8)
    a = rng.uniform(-1.0, 1.0, (MAT_N, MAT_N)).astype(np.float32)
    b = rng.uniform(-1.0, 1.0, (MAT_N, MAT_N)).astype(np.float32)

    works = [
        ("copy_256MiB", lambda: np.copyto(dst, src), 2 * COPY_BYTES, 0),
        ("add_16Mi_f32", lambda: np.add(x, y), 3 * F32 * ELEMS, 0),
        ("multiply_16Mi_f32", lambda: np.multiply(x, y), 3 * F32 * ELEMS, 0),
        ("exp_16Mi_f32", lambda: np.exp(x), 2 * F32 * ELEMS, 0),
        ("tanh_16Mi_f32", lambda: np.tanh(x), 2 * F32 * ELEMS, 0),
        ("log_16Mi_f32", lambda: np.log(y), 2 * F32 * ELEMS, 0),
        ("sin_16Mi_f32", lambda: np.sin(x), 2 * F32 * ELEMS, 0),
        # NumPy has no sigmoid: the expression a NumPy user writes (three passes over memory).
        ("sigmoid_16Mi_f32", lambda: sigmoid(x), 2 * F32 * ELEMS, 0),
        ("where_16Mi_f32", lambda: np.where(cond, x, y), (1 + 3 * F32) * ELEMS, 0),
        ("matmul_1024_f32", lambda: a @ b, 0, 2 * MAT_N**3),
        ("W3_chain16_16Mi_f32", lambda: w3_chain(x, y), 3 * F32 * ELEMS, 0),
    ]
    erf = erf_peer()
    if erf is not None:
        works.append(("erf_16Mi_f32", lambda: erf(x), 2 * F32 * ELEMS, 0))
    only = set(filter(None, ARGS.only.split(",")))
    rows = []
    for name, fn, nbytes, flops in works:
        if only and name not in only:
            continue
        rows.append({"work": name, "system": "numpy", "time_us": median_us(fn, ARGS.reps),
                     "bytes": nbytes, "flops": flops})
        print(f"numpy {name}: {rows[-1]['time_us']:.0f} us", file=sys.stderr)
    del x, y, cond, src, dst
    if not only or "W1_gelu_tanh_64Mi_f32" in only:
        g = rng.uniform(-4.0, 4.0, GELU_ELEMS).astype(np.float32)
        rows.append({"work": "W1_gelu_tanh_64Mi_f32", "system": "numpy",
                     "time_us": median_us(lambda: gelu_tanh(g), ARGS.reps),
                     "bytes": 2 * F32 * GELU_ELEMS, "flops": 0})
        print(f"numpy W1_gelu_tanh_64Mi_f32: {rows[-1]['time_us']:.0f} us", file=sys.stderr)

    meta = {"numpy": np.__version__, "threads": ARGS.threads, "reps": ARGS.reps}
    for r in rows:
        r["meta"] = meta
    text = json.dumps(rows, indent=1)
    if ARGS.out == "-":
        print(text)
    else:
        with open(ARGS.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
