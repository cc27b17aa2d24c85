#!/usr/bin/env python3
"""Table and JSON of bench/onnx_models_bench.sh's raw results (bench/results/onnx_models.json).

    report_models.py RAW_DIR OUT.json THREADS SMELT_BIN SEQ FRAMES "WORK FILE"...

A system that failed on a workload has no raw file: its cells read "fail" and it is left out of
the geometric means (which then say over how many architectures they are).
"""
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from report import cpu_model  # noqa: E402 (bench/report.py)


def load(raw, work, system):
    path = os.path.join(raw, f"{work}.{system}.json")
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return None


def geomean(xs):
    xs = [x for x in xs if x is not None]
    return (math.exp(sum(math.log(x) for x in xs) / len(xs)), len(xs)) if xs else (None, 0)


def ratio(a, b):
    return a / b if a is not None and b else None


def main():
    raw, out = sys.argv[1], sys.argv[2]
    threads, smelt_bin, seq, frames = int(sys.argv[3]), sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
    works = sys.argv[7:]
    rows = []
    for w in works:
        work, file = w.split()
        model, size, batch = work.rsplit("_", 2)
        cold, warm = load(raw, work, "smelt-cold"), load(raw, work, "smelt-warm")
        ort, noopt = load(raw, work, "ort"), load(raw, work, "ort-noopt")
        ov, ov_cold = load(raw, work, "openvino"), load(raw, work, "openvino-cold")
        comp = warm["compile"] if warm else None
        r = {"work": work, "model": model, "size": size, "batch": int(batch[1:]), "file": file,
             "smelt_eager_ms": warm and warm["median_ms"], "smelt_eager_min_ms": warm and warm["min_ms"],
             "smelt_compiled_ms": comp and comp["median_ms"], "smelt_compiled_min_ms": comp and comp["min_ms"],
             "smelt_reps": warm and len(warm["runs_ms"]),
             "bit_equal": (comp["bit_equal"] and cold["compile"]["bit_equal"]) if comp and cold else None,
             "segments": comp and len(comp["segments"]),
             "compiled_segments": comp and sum(1 for s in comp["segments"] if s["compiled"]),
             "fused_kernels": comp and sum(len(s["fused"]) for s in comp["segments"]),
             # First calls in a new process: model loading included, as in the peers' set-up.
             "smelt_load_ms": warm and warm["load_ms"],
             "smelt_eager_first_call_ms": warm and warm["load_ms"] + warm["first_ms"],
             "smelt_compiled_first_call_cold_ms": cold and cold["load_ms"] + cold["compile"]["first_call_ms"],
             "smelt_compiled_first_call_warm_ms": comp and warm["load_ms"] + comp["first_call_ms"],
             "smelt_compile_cold_ms": cold and cold["compile"]["compile_ms"],
             "smelt_compile_warm_ms": comp and comp["compile_ms"]}
        for name, d in (("ort", ort), ("ort_noopt", noopt), ("openvino", ov)):
            r[f"{name}_ms"] = d and d["median_ms"]
            r[f"{name}_min_ms"] = d and d["min_ms"]
            r[f"{name}_reps"] = d and d["reps"]
            r[f"{name}_first_call_ms"] = d and d["first_call_ms"]
        r["openvino_first_call_cold_ms"] = ov_cold and ov_cold["first_call_ms"]
        best = [x for x in (r["ort_ms"], r["openvino_ms"]) if x is not None]
        r["best_peer_ms"] = min(best) if best else None
        r["ratio_best_peer_vs_compiled"] = ratio(r["best_peer_ms"], r["smelt_compiled_ms"])
        r["ratio_ort_vs_compiled"] = ratio(r["ort_ms"], r["smelt_compiled_ms"])
        r["ratio_openvino_vs_compiled"] = ratio(r["openvino_ms"], r["smelt_compiled_ms"])
        r["ratio_ort_vs_eager"] = ratio(r["ort_ms"], r["smelt_eager_ms"])
        r["ratio_eager_vs_compiled"] = ratio(r["smelt_eager_ms"], r["smelt_compiled_ms"])
        rows.append(r)
    versions = {}
    for w in works:
        for system in ("ort", "openvino"):
            d = load(raw, w.split()[0], system)
            if d:
                versions[system] = d["version"]
    groups = []
    for size in dict.fromkeys(r["size"] for r in rows):
        for batch in dict.fromkeys(r["batch"] for r in rows if r["size"] == size):
            g = [r for r in rows if r["size"] == size and r["batch"] == batch]
            entry = {"size": size, "batch": batch}
            for key in ("ratio_best_peer_vs_compiled", "ratio_ort_vs_compiled", "ratio_openvino_vs_compiled",
                        "ratio_ort_vs_eager", "ratio_eager_vs_compiled"):
                entry[key], entry[key + "_n"] = geomean([r[key] for r in g])
            groups.append(entry)
    overall = {}
    for key in ("ratio_best_peer_vs_compiled", "ratio_ort_vs_compiled", "ratio_openvino_vs_compiled",
                "ratio_ort_vs_eager", "ratio_eager_vs_compiled"):
        overall[key], overall[key + "_n"] = geomean([r[key] for r in rows])
    result = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "commit": git_commit(), "cpu": cpu_model(),
              "threads": threads, "smelt": smelt_bin, "load_average": os.getloadavg(), "seq": seq, "frames": frames,
              "versions": versions,
              "method": "medians of timed calls after the first (each system: up to REPS calls, at least MIN_REPS, "
                        "within BUDGET_S, split over ROUNDS rounds in which the systems run in turn, pooled); "
                        "same .npy inputs and thread count; first calls in new processes with "
                        "model loading; smelt cold: empty kernel cache; OpenVINO cold: empty CACHE_DIR; ratios > 1: "
                        "the system named second is faster; geometric means over the architectures of a size and batch",
              "rows": rows, "geomeans": groups, "geomean_all": overall}
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    with open(out, "w") as f:
        json.dump(result, f, indent=1)

    def ms(x):
        return "fail" if x is None else (f"{x:.1f}" if x >= 10 else f"{x:.2f}")

    def rt(x):
        return "-" if x is None else f"{x:.2f}"

    loadavg = ", ".join(f"{x:.1f}" for x in result["load_average"])
    print(f"\n{result['cpu']}, {threads} threads, commit {result['commit']}, onnxruntime {versions.get('ort')}, "
          f"openvino {versions.get('openvino', '?').split('-')[0]}, seq {seq}, whisper frames {frames}, "
          f"load average {loadavg}")
    head = (f"{'workload':<28}{'eager':>9}{'compiled':>10}{'ort':>9}{'ort-noopt':>10}{'openvino':>10}"
            f"{'best/comp':>10}{'ort/eager':>10}{'eager/comp':>11}{'reps':>5}{'bit-eq':>7}")
    print(head)
    for r in rows:
        print(f"{r['work']:<28}{ms(r['smelt_eager_ms']):>9}{ms(r['smelt_compiled_ms']):>10}{ms(r['ort_ms']):>9}"
              f"{ms(r['ort_noopt_ms']):>10}{ms(r['openvino_ms']):>10}{rt(r['ratio_best_peer_vs_compiled']):>10}"
              f"{rt(r['ratio_ort_vs_eager']):>10}{rt(r['ratio_eager_vs_compiled']):>11}"
              f"{r['smelt_reps'] or '-':>5}{'-' if r['bit_equal'] is None else ('yes' if r['bit_equal'] else 'NO'):>7}")
    print("medians (ms); best/comp = the faster of ORT and OpenVINO / smelt compiled (> 1: smelt is faster)")
    print(f"\n{'geometric means':<28}{'best/comp':>10}{'ort/comp':>10}{'ov/comp':>10}{'ort/eager':>10}{'eager/comp':>11}")
    for g in groups + [dict(overall, label="all")]:
        print(f"{g.get('label') or g['size'] + ' b' + str(g['batch']):<28}{rt(g['ratio_best_peer_vs_compiled']):>10}"
              f"{rt(g['ratio_ort_vs_compiled']):>10}{rt(g['ratio_openvino_vs_compiled']):>10}"
              f"{rt(g['ratio_ort_vs_eager']):>10}{rt(g['ratio_eager_vs_compiled']):>11}"
              f"   (over {g['ratio_best_peer_vs_compiled_n']})")
    print(f"\n{'first call (ms)':<28}{'smelt compiled cold':>20}{'warm':>9}{'eager':>9}{'ort':>9}{'ov cold':>9}{'ov warm':>9}")
    for r in rows:
        print(f"{r['work']:<28}{ms(r['smelt_compiled_first_call_cold_ms']):>20}{ms(r['smelt_compiled_first_call_warm_ms']):>9}"
              f"{ms(r['smelt_eager_first_call_ms']):>9}{ms(r['ort_first_call_ms']):>9}"
              f"{ms(r['openvino_first_call_cold_ms']):>9}{ms(r['openvino_first_call_ms']):>9}")
    print("first call: a new process's model loading, set-up (compile, session, compile_model) and first call; smelt "
          "cold: empty kernel cache; ov cold: empty CACHE_DIR; wrote " + out)


if __name__ == "__main__":
    main()
