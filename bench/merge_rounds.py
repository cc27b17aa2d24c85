#!/usr/bin/env python3
"""Merges the rounds of one system on one workload (bench/onnx_bench.sh, bench/onnx_models_bench.sh).

    merge_rounds.py OUT.json ROUND1.json ROUND2.json ...

Each system runs in every round, the systems in turn, so that a slow minute of a shared machine
falls on all of them instead of on whichever ran then. The merged file has the shape of one
round's: the timed calls of all rounds pooled (median and min recomputed over them), the first
call and set-up figures of the round whose first call is the median one, plus `rounds` and
`round_medians_ms` (compiled calls for smelt). A round that failed (no file or not JSON) is left
out; none left: no output file, as when a system fails in a single run.
"""
import json
import statistics
import sys


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def first_call(d):
    if "compile" in d:  # smelt run --json: loading, then the compiled model's first call
        return d["load_ms"] + d["compile"]["first_call_ms"]
    if "first_call_ms" in d:  # bench/peers/models_peers.py
        return d["first_call_ms"]
    return d.get("session_ms", 0.0) + d.get("first_run_ms", 0.0)  # bench/peers/ort_bench.py


def pool(into, rounds, key):
    """Pools the rounds' timed calls into `into` (into[key] when key is given)."""
    runs = [x for d in rounds for x in (d[key] if key else d)["runs_ms"]]
    target = into[key] if key else into
    target["runs_ms"] = runs
    target["median_ms"] = statistics.median(runs) if runs else None
    target["min_ms"] = min(runs) if runs else None
    if "reps" in target:
        target["reps"] = len(runs)


def main():
    out, paths = sys.argv[1], sys.argv[2:]
    rounds = [d for d in (load(p) for p in paths) if d is not None]
    if not rounds:
        return
    ordered = sorted(rounds, key=first_call)
    merged = json.loads(json.dumps(ordered[(len(ordered) - 1) // 2]))  # a copy of the median round
    if "compile" in merged:
        pool(merged, rounds, None)
        pool(merged, rounds, "compile")
        merged["round_medians_ms"] = [d["compile"]["median_ms"] for d in rounds]
    else:
        pool(merged, rounds, None)
        merged["round_medians_ms"] = [d["median_ms"] for d in rounds]
    merged["rounds"] = len(rounds)
    with open(out, "w") as f:
        json.dump(merged, f)


if __name__ == "__main__":
    main()
