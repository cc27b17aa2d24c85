#!/usr/bin/env python3
"""ONNX Runtime and OpenVINO peer figures for bench/onnx_models_bench.sh: one model, the same .npy inputs as smelt's run.

    models_peers.py MODEL.onnx --input NAME=FILE.npy ... --threads 2 --system ort|ort-noopt|openvino
                    [--reps 21] [--min-reps 5] [--budget-s 20] [--cache-dir DIR] [--first-only]

Method: the runtime gets --threads threads for one call at a time (ORT: intra_op_num_threads =
threads, inter_op_num_threads = 1, sequential; OpenVINO's CPU plugin: INFERENCE_NUM_THREADS =
threads, one stream, the LATENCY hint, float32 inference precision: on CPUs with bfloat16
support it would otherwise run MatMul/Conv in bfloat16, which the other systems here do not).
OpenVINO gets the inputs' static shapes before compiling (model.reshape, as benchmark_app -shape
does); ORT and smelt take the model's dynamic shapes as they are. After the first call, timed
calls run until --reps are done or --budget-s seconds are spent (at least --min-reps): the median
and minimum are reported, so big models get fewer repetitions than small ones.

The first call: setup_ms (ORT: InferenceSession construction with its graph optimizations;
OpenVINO: read_model + reshape + compile_model) and first_run_ms (the first call after it);
first_call_ms = both, in a new process. With --cache-dir, OpenVINO keeps its compiled model in that
folder (CACHE_DIR): the benchmark runs it once with an empty folder (cold) and again (warm).

Prints one JSON object {system, version, model, threads, reps, median_ms, min_ms, runs_ms,
setup_ms, first_run_ms, first_call_ms}.
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np


def ort_session(model, threads, opt):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if opt
                                     else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    return (lambda feed: sess.run(None, feed)), ort.__version__


def openvino_model(model, threads, feed, cache_dir):
    import openvino as ov
    core = ov.Core()
    if cache_dir:
        core.set_property({"CACHE_DIR": cache_dir})
    m = core.read_model(model)
    m.reshape({name: list(v.shape) for name, v in feed.items()})
    compiled = core.compile_model(m, "CPU", {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                                             "PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()

    def run(f):
        # share_outputs=False: the outputs are copied out as NumPy arrays, as the other systems return them.
        return request.infer(f, share_outputs=False)
    return run, ov.__version__


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--system", choices=["ort", "ort-noopt", "openvino"], required=True)
    p.add_argument("--reps", type=int, default=21)
    p.add_argument("--min-reps", type=int, default=5)
    p.add_argument("--budget-s", type=float, default=20.0)
    p.add_argument("--cache-dir", default="")
    p.add_argument("--first-only", action="store_true", help="the first call only (no timed calls)")
    a = p.parse_args()
    if a.min_reps < 3 or a.reps < a.min_reps:
        sys.exit("models_peers.py: needs 3 <= --min-reps <= --reps")
    feed = {}
    for spec in a.input:
        name, path = spec.split("=", 1)
        feed[name] = np.load(path)

    t0 = time.perf_counter()
    if a.system == "openvino":
        run, version = openvino_model(a.model, a.threads, feed, a.cache_dir)
    else:
        run, version = ort_session(a.model, a.threads, a.system == "ort")
    setup_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    run(feed)
    first_run_ms = (time.perf_counter() - t0) * 1e3

    times = []
    start = time.perf_counter()
    while not a.first_only and len(times) < a.reps and (len(times) < a.min_reps or time.perf_counter() - start < a.budget_s):
        t0 = time.perf_counter()
        run(feed)
        times.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"system": a.system, "version": version, "model": a.model, "threads": a.threads,
                      "reps": len(times), "median_ms": statistics.median(times) if times else None,
                      "min_ms": min(times) if times else None,
                      "runs_ms": times, "setup_ms": setup_ms, "first_run_ms": first_run_ms,
                      "first_call_ms": setup_ms + first_run_ms}))


if __name__ == "__main__":
    main()
