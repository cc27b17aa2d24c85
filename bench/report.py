#!/usr/bin/env python3
"""Joins smelt's Google Benchmark JSON and the peers' rows into results/latest.json and a table.

Row fields: work, system, time_us (median), GBps (bytes that must move: inputs read once,
output written once) or GFLOPs, fraction_of_floor (GBps over the best copy bandwidth measured in
the same run, or GFLOPs over the best matrix rate measured), ratio_vs_best_peer (on smelt rows:
the best peer's time over smelt's, so > 1 means smelt is faster). Systems named smelt* are
smelt (eager, compiled); every other system is a peer.
"""
import argparse
import json
import platform
import subprocess
import time


def load_smelt(path):
    with open(path) as f:
        data = json.load(f)
    rows = []
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        work, system = b["run_name"].split("/")[:2]
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[b["time_unit"]]
        rows.append({"work": work, "system": system, "time_us": b["real_time"] * scale,
                     "bytes": b.get("bytes", 0), "flops": b.get("flops", 0)})
    return rows, data.get("context", {})


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smelt", required=True, nargs="+", help="Google Benchmark JSON files of smelt")
    p.add_argument("--peers", nargs="*", default=[])
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--reps", type=int, required=True)
    p.add_argument("--out", required=True)
    args = p.parse_args()

    rows, context = [], {}
    for path in args.smelt:
        more, ctx = load_smelt(path)
        rows += more
        context = context or ctx
    peer_meta = {}
    for path in args.peers:
        with open(path) as f:
            for r in json.load(f):
                peer_meta[r["system"]] = r.pop("meta", {})
                rows.append(r)

    for r in rows:
        r["GBps"] = r["bytes"] / (r["time_us"] * 1e3) if r["bytes"] else None
        r["GFLOPs"] = r["flops"] / (r["time_us"] * 1e3) if r["flops"] else None
    copy_floor = max((r["GBps"] for r in rows if r["work"].startswith("copy_")), default=None)
    matrix_floor = max((r["GFLOPs"] for r in rows if r["GFLOPs"]), default=None)
    for r in rows:
        if r["GBps"] is not None and copy_floor:
            r["fraction_of_floor"] = r["GBps"] / copy_floor
        elif r["GFLOPs"] is not None:
            r["fraction_of_floor"] = r["GFLOPs"] / matrix_floor
        else:
            r["fraction_of_floor"] = None
        r["ratio_vs_best_peer"] = None
        if r["system"].startswith("smelt"):
            peers = [q["time_us"] for q in rows
                     if q["work"] == r["work"] and not q["system"].startswith("smelt")]
            if peers:
                r["ratio_vs_best_peer"] = min(peers) / r["time_us"]

    meta = {
        "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "cpu": cpu_model(),
        "num_cpus": context.get("num_cpus"),
        "threads": args.threads,
        "reps": args.reps,
        "statistic": "median",
        "copy_floor_GBps": copy_floor,
        "matrix_floor_GFLOPs": matrix_floor,
        "peers": peer_meta,
    }
    keys = ["work", "system", "time_us", "GBps", "GFLOPs", "fraction_of_floor", "ratio_vs_best_peer"]
    out_rows = [{k: r[k] for k in keys} for r in rows]
    with open(args.out, "w") as f:
        json.dump({"meta": meta, "rows": out_rows}, f, indent=1)
        f.write("\n")

    def fmt(v, spec):
        width = int(spec.split(".")[0] or 0)
        return "-".rjust(width) if v is None else format(v, spec)

    print(f"\n{meta['cpu']}, {args.threads} threads, median of {args.reps} runs; "
          f"copy floor {fmt(copy_floor, '.1f')} GB/s (read + write), matrix rate {fmt(matrix_floor, '.1f')} GFLOP/s")
    header = f"{'work':<28} {'system':<28} {'time_us':>12} {'GB/s':>8} {'GFLOP/s':>8} {'floor':>6} {'vs best peer':>13}"
    print(header)
    print("-" * len(header))
    order = {w: i for i, w in enumerate(dict.fromkeys(r["work"] for r in out_rows))}
    for r in sorted(out_rows, key=lambda r: (order[r["work"]], not r["system"].startswith("smelt"), r["system"])):
        ratio = r["ratio_vs_best_peer"]
        time_spec = ">12,.1f" if r["time_us"] < 1000 else ">12,.0f"
        print(f"{r['work']:<28} {r['system']:<28} {format(r['time_us'], time_spec)} {fmt(r['GBps'], '8.2f')} "
              f"{fmt(r['GFLOPs'], '8.1f')} {fmt(r['fraction_of_floor'], '6.2f')} "
              f"{'-' if ratio is None else format(ratio, '12.2f') + 'x':>13}")


if __name__ == "__main__":
    main()
