#!/usr/bin/env python3
"""Real architectures on the GPU: smelt (`smelt run --device cuda --compile`) against PyTorch eager and torch.compile.

    python3 bench/gpu/onnx_models_gpu.py --smelt build/gpu/tools/smelt/smelt --out OUT   # on the H200
    bench/.venv/bin/python bench/gpu/onnx_models_gpu.py --dry-run --smelt build/release/tools/smelt/smelt --out /tmp/m

scripts/gpu.sh runs it with SMELT_GPU_MODELS=1 and writes $OUT/gpu_models.txt and $OUT/gpu_models.json.

Workloads (issue 16 item 4; the modules and exports of bench/models/export_models.py, base sizes):
GPT-2 small prefill at batch 8 x 512 tokens and one decode step (batch 8, one new token, a KV cache
of 511), BERT-base at 32 x 128, ViT-B/16 at batch 32, ResNet-50 at batch 32, the Whisper-base
encoder at batch 8 x 3000 frames (30 s). Each in float32 and in half precision (--dtypes half:
bfloat16 for the models without convolutions, float16 for those with them: ONNX's Conv has no
bfloat16 before opset 22, and the TorchScript exporter stops at opset 20): smelt runs the ONNX file
exported in that dtype; PyTorch runs the same
module (the one exported) cast to that dtype, eagerly and through torch.compile (default mode).
float32 means float32 arithmetic for everyone: smelt never uses TF32, so PyTorch's TF32 is off
too (torch.backends.cuda.matmul.allow_tf32, off by default, and torch.backends.cudnn.allow_tf32,
on by default for convolutions).

Method: the same inputs (seeded; smelt reads them as .npy files; bfloat16 floats, which .npy cannot
hold, are random in smelt's run) and one call at a time; after a first call, --reps timed calls,
each followed by a device synchronization; medians (minimum in the JSON). smelt runs eager and
compiled calls alternately in one `smelt run --compile --repeat N` process and checks the compiled
outputs bit for bit against its eager ones. Memory: torch.cuda.max_memory_allocated over the first
and timed calls (weights included); smelt's device peak from `smelt run --json` (memory.peak_bytes:
bytes held by live arrays, weights included, the eager run's kept outputs during compiled calls).
In float32, smelt's eager outputs (--output-dir) are compared with PyTorch eager's on the same
inputs (bound 1e-3 of the output's scale, as the export check).
First call: GPT-2 prefill's first compiled call in a new process (model loading included) with an
empty SMELT_CACHE_DIR (cold) and again with the cache it filled (warm), in the first of --dtypes. torch.compile's first call
(compiling included, with whatever inductor caches the machine has) is in the JSON too. ONNX Runtime's
CPU provider times the float32 files as the floor of expectations when time is left.

The whole run stays within --budget-s (default 280 s): work runs in order of priority (float32
smelt/eager/compile, GPT-2's first calls, bfloat16, ONNX Runtime) and what the budget does not reach
is listed as skipped. --dry-run: small sizes, tiny shapes, 10 reps, the CPU (checks the logic
on a machine without a GPU; no numbers worth reading).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models"))
import export_models  # noqa: E402  (the modules and their exports)

# (model, batch, sizes for make_inputs): the shapes, and tiny ones for --dry-run.
WORKLOADS = [
    ("gpt2_prefill", 8, dict(seq=512)),
    ("gpt2_decode", 8, dict(past=511)),
    ("bert", 32, dict(seq=128)),
    ("vit", 32, {}),
    ("resnet", 32, {}),
    ("whisper_encoder", 8, dict(frames=3000)),
]
DRY_WORKLOADS = [
    ("gpt2_prefill", 2, dict(seq=16)),
    ("gpt2_decode", 2, dict(past=15)),
    ("bert", 2, dict(seq=16)),
    ("vit", 2, {}),
    ("resnet", 1, {}),
    ("whisper_encoder", 1, dict(frames=200)),
]
HAS_CONV = {"vit", "resnet", "whisper_encoder", "mobilenetv3"}


class Budget:
    def __init__(self, seconds):
        self.start, self.seconds = time.perf_counter(), seconds

    def left(self):
        return self.seconds - (time.perf_counter() - self.start)


def synchronize(device):
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_calls(fn, reps, device):
    """(first call ms, [timed call ms])."""
    synchronize(device)
    t0 = time.perf_counter()
    fn()
    synchronize(device)
    first = (time.perf_counter() - t0) * 1e3
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        times.append((time.perf_counter() - t0) * 1e3)
    return first, times


def torch_row(module, dtype, feed, device, reps, compiled, reference_dir=None, names=()):
    """PyTorch eager or torch.compile on the exported module (already in `dtype` on `device`). With
    reference_dir (smelt's outputs as NAME.npy), also the largest difference from them."""
    args = export_models.to_torch(feed, dtype, device)
    fn = torch.compile(module) if compiled else module
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    with torch.inference_mode():
        first, times = time_calls(lambda: fn(*args), reps, device)
        peak = torch.cuda.max_memory_allocated() if device.startswith("cuda") else None
        row = {"median_ms": statistics.median(times), "min_ms": min(times), "first_call_ms": first,
               "reps": len(times), "peak_bytes": peak}
        if reference_dir:
            out = fn(*args)
            row["smelt_max_rel_error"] = max_rel_error(out, reference_dir, names)
    del fn, args
    if compiled:
        torch._dynamo.reset()  # the next model compiles from scratch, and its graphs are freed
    return row


def max_rel_error(out, reference_dir, names):
    """max |smelt - torch| / (max |torch| + 1) over the outputs, as export_models.check_export
    measures ORT: float32 both, different summation orders, so ~1e-5; a wrong result is O(1)."""
    out = [out] if torch.is_tensor(out) else list(out)
    worst = 0.0
    for name, t in zip(names, out):
        ref = t.float().cpu().numpy()
        got = np.load(os.path.join(reference_dir, name + ".npy"))
        if got.shape != ref.shape:
            return float("inf")
        worst = max(worst, float(np.max(np.abs(got.astype(np.float32) - ref))) / (float(np.max(np.abs(ref))) + 1.0))
    return worst


def smelt_run(smelt, path, inputs, device, reps, cache_dir, json_path, timeout_s, output_dir=None):
    """One `smelt run --compile` process; its JSON report, or {"error": ...}. With output_dir, the
    eager outputs are written there as NAME.npy."""
    cmd = [smelt, "run", path, "--device", device, "--compile", "--json", json_path]
    if reps:
        cmd += ["--repeat", str(reps)]
    if output_dir:
        shutil.rmtree(output_dir, ignore_errors=True)
        cmd += ["--output-dir", output_dir]
    for a in inputs:
        cmd += ["--input", a]
    env = dict(os.environ, SMELT_CACHE_DIR=cache_dir)
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=max(1.0, timeout_s))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s (the run's time budget)"}
    if p.returncode not in (0, 1) or not os.path.exists(json_path):  # 1: outputs differ, still a report
        lines = (p.stderr or p.stdout).strip().splitlines()
        return {"error": (lines[-1] if lines else f"exit status {p.returncode}")[:300]}
    with open(json_path) as f:
        report = json.load(f)
    os.remove(json_path)
    return report


def smelt_figures(report):
    if "error" in report:
        return {"error": report["error"]}
    comp = report["compile"]
    return {"eager_ms": report["median_ms"], "eager_min_ms": report["min_ms"], "compiled_ms": comp["median_ms"],
            "compiled_min_ms": comp["min_ms"], "reps": len(comp["runs_ms"]), "bit_equal": comp["bit_equal"],
            "load_ms": report["load_ms"], "compile_ms": comp["compile_ms"], "first_call_ms": comp["first_call_ms"],
            "segments": len(comp["segments"]), "compiled_segments": sum(s["compiled"] for s in comp["segments"]),
            "peak_bytes": report.get("memory", {}).get("peak_bytes")}


def ort_row(path, feed, reps, timeout_s):
    import onnxruntime as ort
    t0 = time.perf_counter()
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess.run(None, feed)
    first = (time.perf_counter() - t0) * 1e3
    if first / 1e3 * reps > timeout_s:
        reps = max(1, int(timeout_s / (first / 1e3)))
    _, times = time_calls(lambda: sess.run(None, feed), reps, "cpu")
    return {"median_ms": statistics.median(times), "min_ms": min(times), "reps": len(times), "first_call_ms": first,
            "version": ort.__version__}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--smelt", required=True, help="the smelt CLI (built with ONNX); a missing one: torch rows only")
    p.add_argument("--out", required=True, help="folder for gpu_models.txt and gpu_models.json")
    p.add_argument("--device", default=None, help="cuda (default) or cpu")
    p.add_argument("--reps", type=int, default=None, help="timed calls per system (default 10; at least 10)")
    p.add_argument("--dtypes", default="float32,half",
                   help="float32, bfloat16, float16, or half: bfloat16 where the model has no convolution, else float16")
    p.add_argument("--models", default=",".join(w[0] for w in WORKLOADS))
    p.add_argument("--budget-s", type=float, default=None,
                   help="seconds for the whole run (default 280; with --dry-run 3600: a CPU compiles slowly)")
    p.add_argument("--work-dir", default=None, help="exports and inputs (default: a temporary folder)")
    p.add_argument("--no-ort", action="store_true", help="skip the ONNX Runtime CPU floor")
    p.add_argument("--dry-run", action="store_true", help="small sizes, tiny shapes, the CPU: checks the script")
    a = p.parse_args()
    device = a.device or ("cpu" if a.dry_run else "cuda")
    reps = a.reps or 10
    if reps < 10 and not a.dry_run:
        sys.exit("onnx_models_gpu.py: --reps must be at least 10 (medians of 10 or more)")
    if device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("onnx_models_gpu.py: torch has no CUDA device here (--dry-run runs on the CPU)")
    size = "small" if a.dry_run else "base"
    workloads = [w for w in (DRY_WORKLOADS if a.dry_run else WORKLOADS) if w[0] in a.models.split(",")]
    dtypes = [d for d in a.dtypes.split(",") if d]
    budget = Budget(a.budget_s or (3600.0 if a.dry_run else 280.0))
    os.makedirs(a.out, exist_ok=True)
    work = a.work_dir or tempfile.mkdtemp(prefix="smelt-gpu-models-")
    os.makedirs(work, exist_ok=True)
    rows, skipped, notes = [], [], []
    have_smelt = os.access(a.smelt, os.X_OK)
    try:
        import onnxruntime  # noqa: F401  (checks the float32 exports and gives the CPU floor)
        have_ort = True
    except ImportError:
        have_ort = False
        notes.append("no onnxruntime: exports unchecked, no CPU floor")
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    info = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device": device,
            "gpu": torch.cuda.get_device_name() if device.startswith("cuda") else None, "torch": torch.__version__,
            "smelt": a.smelt if have_smelt else None, "reps": reps, "size": size, "dry_run": a.dry_run,
            "method": "medians of reps timed calls after a first call, each synchronized; same module for torch "
                      "eager/compile as exported for smelt; peaks: torch.cuda.max_memory_allocated and smelt run "
                      "--json memory.peak_bytes; ratios > 1: the system named second is faster"}
    if not have_smelt:
        notes.append(f"no smelt CLI at {a.smelt} (scripts/gpu.sh builds it with SMELT_DEVKIT): torch rows only")
    cache = os.path.join(work, "kernel-cache")
    shutil.rmtree(cache, ignore_errors=True)
    exports, feeds = {}, {}

    def export(model, dtype):
        key = (model, dtype)
        if key not in exports:
            entry = export_models.export(model, size, work, getattr(torch, dtype), check=(dtype == "float32" and have_ort),
                                         device=device if dtype == "float16" else "cpu")
            exports[key] = os.path.join(work, entry["file"])
        return exports[key]

    def inputs_of(model, batch, sizes, dtype):
        """smelt --input arguments and the feed (NumPy, float32 floats)."""
        if model not in feeds:
            feed = export_models.make_inputs(model, size, batch, **sizes)
            args = []
            for name, v in feed.items():
                f = os.path.join(work, f"{model}.{name}.npy")
                np.save(f, v)
                args.append((name, f, v))
            feeds[model] = (feed, args)
        feed, args = feeds[model]
        if dtype == "float32":
            return feed, [f"{n}={f}" for n, f, _ in args]
        return feed, [f"{n}={f}" if v.dtype != np.float32 else f"{n}=random:{'x'.join(map(str, v.shape))}"
                      for n, f, v in args]

    def step(label, fn, need=5):
        """Runs fn() when at least `need` seconds of the budget are left (about what the step takes on
        the H200 at most, so that a step started late does not overrun); a failure is recorded, not fatal."""
        if budget.left() < need:
            skipped.append(label)
            return None
        try:
            return fn()
        except Exception as e:  # a model one system cannot run must not lose the others' rows
            return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}

    def shape_of(model, batch, sizes):
        return {"batch": batch, **sizes}

    for requested in dtypes:
        for model, batch, sizes in workloads:
            # half: bfloat16, or float16 for the models with convolutions (the same dtype for every system)
            dtype = ("float16" if model in HAS_CONV else "bfloat16") if requested == "half" else requested
            row = {"model": model, "size": size, "dtype": dtype, "shape": shape_of(model, batch, sizes)}
            label = f"{model} {dtype}"
            onnx_ok = not (dtype == "bfloat16" and model in HAS_CONV)
            path = step(label + " export", lambda: export(model, dtype), need=40) if onnx_ok else None
            feed, smelt_inputs = inputs_of(model, batch, sizes, dtype)
            if not onnx_ok:
                row["smelt"] = {"error": "no bfloat16 export: ONNX Conv has no bfloat16 before opset 22"}
            elif isinstance(path, dict):
                row["smelt"] = path  # the export's error
            elif path is None:
                row["smelt"] = {"error": "skipped (time budget)"}
            elif have_smelt:
                # GPT-2 prefill's first call in a new process, in the first dtype measured.
                cold_cache = model == "gpt2_prefill" and requested == dtypes[0]
                cache_dir = os.path.join(work, "gpt2-cache") if cold_cache else cache
                if cold_cache:
                    shutil.rmtree(cache_dir, ignore_errors=True)
                # float32: smelt's outputs are compared with PyTorch eager's below (bfloat16 inputs differ).
                outputs_dir = os.path.join(work, "outputs") if dtype == "float32" else None
                report = step(label + " smelt", lambda: smelt_run(a.smelt, path, smelt_inputs, device, reps, cache_dir,
                                                                   os.path.join(work, "r.json"), budget.left() - 5,
                                                                   outputs_dir), need=20)
                row["smelt"] = smelt_figures(report) if report else {"error": "skipped (time budget)"}
                if cold_cache and report and "error" not in report:
                    # The first compiled call in a new process: cold (the run above, empty cache) and warm.
                    warm = step(label + " smelt warm first call",
                                lambda: smelt_run(a.smelt, path, smelt_inputs, device, 0, cache_dir,
                                                  os.path.join(work, "w.json"), budget.left() - 5))
                    row["smelt"]["first_call_cold_ms"] = report["load_ms"] + report["compile"]["first_call_ms"]
                    if warm and "error" not in warm:
                        row["smelt"]["first_call_warm_ms"] = warm["load_ms"] + warm["compile"]["first_call_ms"]
            module = step(f"{label} torch module",
                          lambda: export_models.build_module(model, size, getattr(torch, dtype), device))
            for name, compiled in (("torch_eager", False), ("torch_compile", True)):
                if isinstance(module, dict):  # building it failed
                    row[name] = module
                    continue
                ref_dir = os.path.join(work, "outputs")
                compare = (not compiled and dtype == "float32" and "eager_ms" in row.get("smelt", {})
                           and os.path.isdir(ref_dir))
                r = step(f"{label} {name}", lambda: torch_row(module, getattr(torch, dtype), feed, device, reps, compiled,
                                                              ref_dir if compare else None,
                                                              export_models.output_names(model, size))
                         , need=90 if compiled else 15) if module is not None else None
                row[name] = r if r else {"error": "skipped (time budget)"}
                if r and "smelt_max_rel_error" in r:
                    row["smelt"]["max_rel_error_vs_torch"] = r.pop("smelt_max_rel_error")
                    shutil.rmtree(ref_dir, ignore_errors=True)
            del module
            rows.append(row)
    if not a.no_ort and have_ort:
        for row in rows:
            if row["dtype"] != "float32" or (row["model"], "float32") not in exports:
                continue
            path, feed = exports[(row["model"], "float32")], feeds[row["model"]][0]
            r = step(f"{row['model']} float32 onnxruntime", lambda: ort_row(path, feed, 3, min(30, budget.left() - 5)))
            row["ort_cpu"] = r if r else {"error": "skipped (time budget)"}

    for row in rows:
        s, e, c = row.get("smelt", {}), row.get("torch_eager", {}), row.get("torch_compile", {})
        sc = s.get("compiled_ms")
        row["ratio_torch_compile_vs_smelt"] = c["median_ms"] / sc if sc and "median_ms" in c else None
        row["ratio_torch_eager_vs_smelt"] = e["median_ms"] / sc if sc and "median_ms" in e else None
    result = dict(info, rows=rows, skipped=skipped, notes=notes, wall_s=round(time.perf_counter() - budget.start, 1))
    with open(os.path.join(a.out, "gpu_models.json"), "w") as f:
        json.dump(result, f, indent=1)
    text = report_text(result)
    with open(os.path.join(a.out, "gpu_models.txt"), "w") as f:
        f.write(text)
    print(text, end="")
    if a.work_dir is None:
        shutil.rmtree(work, ignore_errors=True)


def report_text(result):
    def ms(d, key="median_ms"):
        if not d or d.get(key) is None:
            if d and "error" in d:
                return "skip" if d["error"].startswith("skipped") else "fail"
            return "-"
        x = d[key]
        return f"{x:.1f}" if x >= 10 else f"{x:.2f}"

    def gib(d):
        b = d.get("peak_bytes") if d else None
        return "-" if b is None else f"{b / 2**30:.2f}"

    def rt(x):
        return "-" if x is None else f"{x:.2f}"

    out = [f"{result['gpu'] or result['device']}, torch {result['torch']}, median of {result['reps']} calls, "
           f"{result['date']}{' (dry run)' if result['dry_run'] else ''}\n"]
    out.append(f"{'model':<18}{'dtype':<10}{'smelt comp':>11}{'smelt eager':>12}{'torch eager':>12}{'torch.compile':>14}"
               f"{'ort cpu':>9}{'tc/smelt':>9}{'eager/smelt':>12}{'GiB smelt':>10}{'eager':>7}{'compile':>8}\n")
    for r in result["rows"]:
        s, e, c = r.get("smelt", {}), r.get("torch_eager", {}), r.get("torch_compile", {})
        out.append(f"{r['model']:<18}{r['dtype']:<10}{ms(s, 'compiled_ms'):>11}{ms(s, 'eager_ms'):>12}{ms(e):>12}"
                   f"{ms(c):>14}{ms(r.get('ort_cpu')):>9}{rt(r['ratio_torch_compile_vs_smelt']):>9}"
                   f"{rt(r['ratio_torch_eager_vs_smelt']):>12}{gib(s):>10}{gib(e):>7}{gib(c):>8}\n")
    out.append("ms per call (medians); tc/smelt = torch.compile / smelt compiled (> 1: smelt is faster); GiB: device "
               "memory peaks; fail: see below; skip: not reached within the time budget\n")
    for r in result["rows"]:
        s = r.get("smelt", {})
        if "first_call_cold_ms" in s:
            out.append(f"smelt first call of {r['model']} ({r['dtype']}, new process, loading included): cold "
                       f"{s['first_call_cold_ms']:.0f} ms, warm {s.get('first_call_warm_ms', float('nan')):.0f} ms\n")
    for r in result["rows"]:
        for system in ("smelt", "torch_eager", "torch_compile", "ort_cpu"):
            d = r.get(system)
            if d and "error" in d and not d["error"].startswith("skipped"):
                out.append(f"{r['model']} {r['dtype']} {system}: {d['error']}\n")
            if system == "smelt" and d and d.get("bit_equal") is False:
                out.append(f"{r['model']} {r['dtype']} smelt: compiled outputs DIFFER from eager\n")
            if system == "smelt" and d and d.get("max_rel_error_vs_torch") is not None:
                err = d["max_rel_error_vs_torch"]
                out.append(f"{r['model']} {r['dtype']} smelt eager vs PyTorch eager: max difference {err:.2g} of the "
                           f"output's scale{'' if err <= 1e-3 else ' - ABOVE the 1e-3 bound'}\n")
    if result["skipped"]:
        out.append("skipped (time budget): " + ", ".join(result["skipped"]) + "\n")
    for n in result["notes"]:
        out.append(n + "\n")
    out.append(f"wall {result['wall_s']} s\n")
    return "".join(out)


if __name__ == "__main__":
    main()
