#!/usr/bin/env bash
# Times the bundled ONNX models: smelt's eager runner (`smelt run`) against ONNX Runtime's CPU
# provider, on the same inputs and thread count; prints a table and writes bench/results/onnx.json.
#
#   bench/onnx_bench.sh              every core, 21 timed runs per system (median reported)
#   THREADS=2 REPS=30 bench/onnx_bench.sh
#   SMELT_BIN=build/release/tools/smelt/smelt bench/onnx_bench.sh   # time an existing build
#
# Method: both systems get the same .npy inputs (seeded, written below) and THREADS threads:
# SMELT_NUM_THREADS (smelt's kernels and its OpenBLAS) for smelt, intra_op_num_threads = THREADS
# and inter_op_num_threads = 1 for ONNX Runtime. Each system does one untimed warm-up run, then
# REPS timed runs of the whole model (inputs in memory, outputs materialized); the median is
# reported, the minimum kept in the JSON. ONNX Runtime runs twice: with its default graph
# optimizations ("ort": fusions, constant folding) and with none ("ort-noopt": the graph as
# written, the closer match to an eager runner). ratio = ORT's median / smelt's (> 1: smelt faster).
# ONNX Runtime lives in bench/.venv (created here); the library never needs Python.
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS="${THREADS:-$(nproc)}"
REPS="${REPS:-21}"
if [ "$REPS" -lt 20 ]; then echo "onnx_bench.sh: REPS must be at least 20" >&2; exit 2; fi
export SMELT_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS"

if [ -n "${SMELT_BIN:-}" ]; then
  SMELT="$SMELT_BIN"  # an already built CLI (say build/release/tools/smelt/smelt): no build here
  echo "== using $SMELT"
else
  echo "== building smelt (bench preset: Release, -march=native)"
  cmake --preset bench >/dev/null
  cmake --build --preset bench --target smelt_cli -j "$(nproc)"
  SMELT=build/bench/tools/smelt/smelt
fi

if [ ! -x bench/.venv/bin/python ]; then
  echo "== creating bench/.venv"
  python3 -m venv bench/.venv || { echo "onnx_bench.sh: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2; exit 1; }
fi
if ! bench/.venv/bin/python -c "import numpy, onnxruntime" 2>/dev/null; then
  echo "== installing numpy and onnxruntime into bench/.venv"
  bench/.venv/bin/pip install --quiet numpy onnxruntime
fi
PY=bench/.venv/bin/python

RAW=bench/results/onnx_raw
mkdir -p "$RAW"
# workload  model  input-name  shape  kind (ids: int64 in [0, 1000); image: float32 in [-1, 1))
WORKLOADS=(
  "transformer_b1_s32  models/tiny_transformer.onnx input_ids 1,32       ids"
  "transformer_b8_s128 models/tiny_transformer.onnx input_ids 8,128      ids"
  "cnn_n1              models/tiny_cnn.onnx         input     1,3,32,32  image"
  "cnn_n32             models/tiny_cnn.onnx         input     32,3,32,32 image"
)

for w in "${WORKLOADS[@]}"; do
  read -r work model input shape kind <<<"$w"
  "$PY" - "$RAW/$work.$input.npy" "$shape" "$kind" <<'EOF'
import sys
import numpy as np
path, shape, kind = sys.argv[1], tuple(int(d) for d in sys.argv[2].split(",")), sys.argv[3]
rng = np.random.default_rng(0)
x = rng.integers(0, 1000, size=shape, dtype=np.int64) if kind == "ids" else rng.uniform(-1, 1, size=shape).astype(np.float32)
np.save(path, x)
EOF
  echo "== $work: smelt"
  "$SMELT" run "$model" --input "$input=$RAW/$work.$input.npy" --repeat "$REPS" --threads "$THREADS" \
    --json "$RAW/$work.smelt.json" | tail -n 1
  echo "== $work: onnxruntime"
  "$PY" bench/peers/ort_bench.py "$model" --input "$input=$RAW/$work.$input.npy" --threads "$THREADS" \
    --reps "$REPS" --opt all >"$RAW/$work.ort.json"
  "$PY" bench/peers/ort_bench.py "$model" --input "$input=$RAW/$work.$input.npy" --threads "$THREADS" \
    --reps "$REPS" --opt none >"$RAW/$work.ort-noopt.json"
done

"$PY" - "$RAW" "$THREADS" "$REPS" "$SMELT" "${WORKLOADS[@]}" <<'EOF'
import json, os, platform, subprocess, sys, time
raw, threads, reps, smelt_bin, workloads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]

def cpu_model():
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()

rows = []
for w in workloads:
    work, model, input_name, shape, kind = w.split()
    smelt = json.load(open(os.path.join(raw, work + ".smelt.json")))
    ort = json.load(open(os.path.join(raw, work + ".ort.json")))
    noopt = json.load(open(os.path.join(raw, work + ".ort-noopt.json")))
    rows.append({"work": work, "model": model, "input": f"{input_name}[{shape}]",
                 "smelt_ms": smelt["median_ms"], "smelt_min_ms": smelt["min_ms"], "smelt_first_ms": smelt["first_ms"],
                 "ort_ms": ort["median_ms"], "ort_min_ms": ort["min_ms"],
                 "ort_noopt_ms": noopt["median_ms"], "ort_noopt_min_ms": noopt["min_ms"],
                 "ratio_vs_ort": ort["median_ms"] / smelt["median_ms"],
                 "ratio_vs_ort_noopt": noopt["median_ms"] / smelt["median_ms"]})
result = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpu": cpu_model(), "threads": threads,
          "smelt": smelt_bin, "load_average": os.getloadavg(),
          "reps": reps, "ort_version": ort["ort_version"],
          "method": "median of reps timed runs after one warm-up; same .npy inputs; smelt eager (smelt run) vs "
                    "ONNX Runtime CPU provider (intra_op = threads, inter_op = 1), default and no graph optimizations; "
                    "ratio = ORT median / smelt median (> 1: smelt faster)",
          "rows": rows}
with open("bench/results/onnx.json", "w") as f:
    json.dump(result, f, indent=2)
load = ", ".join(f"{x:.1f}" for x in result["load_average"])
print(f"\n{result['cpu']}, {threads} threads, median of {reps} runs, onnxruntime {result['ort_version']}, "
      f"smelt {smelt_bin}, load average {load}")
print(f"{'workload':<22}{'smelt ms':>10}{'ort ms':>10}{'ort-noopt ms':>14}{'ort/smelt':>11}{'noopt/smelt':>13}"
      f"   {'min: smelt':>10}{'ort':>8}{'noopt':>8}")
for r in rows:
    print(f"{r['work']:<22}{r['smelt_ms']:>10.3f}{r['ort_ms']:>10.3f}{r['ort_noopt_ms']:>14.3f}"
          f"{r['ratio_vs_ort']:>11.2f}{r['ratio_vs_ort_noopt']:>13.2f}"
          f"   {r['smelt_min_ms']:>10.3f}{r['ort_min_ms']:>8.3f}{r['ort_noopt_min_ms']:>8.3f}")
print("medians, then minimums (ms); ratio = ORT median / smelt median, > 1: smelt is faster; "
      "wrote bench/results/onnx.json")
EOF
