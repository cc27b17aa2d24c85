#!/usr/bin/env python3
"""ONNX Runtime peer figures for bench/onnx_bench.sh: one model, the same .npy inputs as smelt's run.

Method: a session on the CPU execution provider with intra_op_num_threads = --threads and
inter_op_num_threads = 1 (sequential execution), one warm-up run, then --reps timed runs
(time.perf_counter around session.run, outputs returned as NumPy arrays); the median and the
minimum are reported. ORT's own set-up cost, the counterpart of smelt's compile cost, is reported
too: session_ms (InferenceSession construction: loading, graph optimizations, kernel selection)
and first_run_ms (the warm-up run: first-run allocations for these shapes). --opt picks ORT's graph optimization level: "all" (the default users get:
constant folding, fusions such as LayerNorm/GELU/attention and layout changes) or "none" (the
nodes as written, closer to what an eager runner does).

Prints one JSON object {system, model, threads, reps, median_ms, min_ms, runs_ms, session_ms,
first_run_ms, ort_version}.
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np
import onnxruntime as ort


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--reps", type=int, default=21)
    p.add_argument("--opt", choices=["all", "none"], default="all")
    args = p.parse_args()
    if args.reps < 20:
        sys.exit("ort_bench.py: --reps must be at least 20")

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if args.opt == "all"
                                     else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    feed = {}
    for spec in args.input:
        name, path = spec.split("=", 1)
        feed[name] = np.load(path)
    t0 = time.perf_counter()
    sess = ort.InferenceSession(args.model, opts, providers=["CPUExecutionProvider"])
    session_ms = (time.perf_counter() - t0) * 1e3

    t0 = time.perf_counter()
    sess.run(None, feed)  # warm-up: first-run allocations and kernel selection
    first_run_ms = (time.perf_counter() - t0) * 1e3
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        sess.run(None, feed)
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"system": "onnxruntime" if args.opt == "all" else "onnxruntime-noopt",
                      "model": args.model, "threads": args.threads, "reps": args.reps,
                      "median_ms": statistics.median(times), "min_ms": min(times), "runs_ms": times,
                      "session_ms": session_ms, "first_run_ms": first_run_ms,
                      "ort_version": ort.__version__}))


if __name__ == "__main__":
    main()
