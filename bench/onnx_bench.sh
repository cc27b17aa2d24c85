#!/usr/bin/env bash
# Times the bundled ONNX models: smelt's eager runner (`smelt run`), smelt compiled (`smelt run
# --compile`: smelt::onnx::compile) and ONNX Runtime's CPU provider, on the same inputs and thread
# count, and smelt's compile cost with a cold and a warm kernel cache; prints two tables and
# writes bench/results/onnx.json.
#
#   bench/onnx_bench.sh              every core, 21 timed runs per system (median reported)
#   THREADS=2 REPS=30 ROUNDS=5 bench/onnx_bench.sh
#   SMELT_BIN=build/release/tools/smelt/smelt bench/onnx_bench.sh   # time an existing build
#   ONNX_MODELS=1 bench/onnx_bench.sh   # then the real-architecture exports (bench/onnx_models_bench.sh)
#
# Method: both systems get the same .npy inputs (seeded, written below) and THREADS threads, and
# run in turn, ROUNDS times (default 3), each time in a new process with REPS timed runs; each
# system's runs are pooled over the rounds (bench/merge_rounds.py): on a shared machine a process
# may run 1.5x slower than the next one for minutes, and a single run of each system one after the
# other gave ratios that flipped between runs. Threads:
# SMELT_NUM_THREADS (smelt's kernels and its OpenBLAS) for smelt, intra_op_num_threads = THREADS
# and inter_op_num_threads = 1 for ONNX Runtime. Each system does one untimed warm-up run, then
# REPS timed runs of the whole model (inputs in memory, outputs materialized); the median is
# reported, the minimum kept in the JSON. smelt runs as `smelt run --compile --repeat REPS`: its
# eager and compiled calls alternate in runs of 10 (drift hits both alike; each side's calls follow
# one another, as ONNX Runtime's do) and the first compiled call's
# outputs are checked bit for bit against the eager ones. Its first run has SMELT_CACHE_DIR set
# to a fresh empty folder: that run's compile cost is cold (every fused kernel goes through the
# C++ compiler); the rounds' runs use the folder it filled: their compile cost is warm (kernels
# load from that disk cache) and their times per call are the ones reported. ONNX Runtime runs
# twice a round: with its default graph optimizations ("ort":
# fusions, constant folding) and with none ("ort-noopt": the graph as written, the closer match
# to an eager runner); its set-up cost (session construction + the first run) is in the JSON.
# Ratios are of medians, > 1: the second system is slower (eager/compiled > 1: compiling helps).
# ONNX Runtime lives in bench/.venv (created here); the library never needs Python.
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS="${THREADS:-$(nproc)}"
REPS="${REPS:-21}"
ROUNDS="${ROUNDS:-3}"
if [ "$REPS" -lt 20 ]; then echo "onnx_bench.sh: REPS must be at least 20" >&2; exit 2; fi
if [ "$ROUNDS" -lt 1 ]; then echo "onnx_bench.sh: ROUNDS must be at least 1" >&2; exit 2; fi
export SMELT_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS"

# shellcheck source=bench/common.sh
source bench/common.sh
bench_smelt_cli
bench_venv onnx_bench.sh "numpy, onnxruntime" numpy onnxruntime

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
  cache="$(mktemp -d)"
  echo "== $work: smelt eager and compiled (cold kernel cache)"
  SMELT_CACHE_DIR="$cache" "$SMELT" run "$model" --input "$input=$RAW/$work.$input.npy" --repeat "$REPS" \
    --threads "$THREADS" --compile --json "$RAW/$work.smelt-cold.json" | grep -E '^(segments|check|compile|payoff)'
  rm -f "$RAW/$work".*.r*.json
  for round in $(seq "$ROUNDS"); do
    echo "== $work, round $round of $ROUNDS: smelt eager and compiled (warm kernel cache), onnxruntime"
    SMELT_CACHE_DIR="$cache" "$SMELT" run "$model" --input "$input=$RAW/$work.$input.npy" --repeat "$REPS" \
      --threads "$THREADS" --compile --json "$RAW/$work.smelt-warm.r$round.json" | grep -E '^(check|payoff)'
    "$PY" bench/peers/ort_bench.py "$model" --input "$input=$RAW/$work.$input.npy" --threads "$THREADS" \
      --reps "$REPS" --opt all >"$RAW/$work.ort.r$round.json"
    "$PY" bench/peers/ort_bench.py "$model" --input "$input=$RAW/$work.$input.npy" --threads "$THREADS" \
      --reps "$REPS" --opt none >"$RAW/$work.ort-noopt.r$round.json"
  done
  rm -rf "$cache"
  for system in smelt-warm ort ort-noopt; do
    "$PY" bench/merge_rounds.py "$RAW/$work.$system.json" "$RAW/$work.$system".r*.json
  done
done

"$PY" - "$RAW" "$THREADS" "$REPS" "$SMELT" "${WORKLOADS[@]}" <<'EOF'
import json, math, os, sys, time
sys.path.insert(0, "bench")  # the script runs from the repository root
from report import cpu_model
raw, threads, reps, smelt_bin, workloads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]

def pays_off_after(compile_ms, eager_ms, compiled_ms):
    # As `smelt run` computes it: calls after which the compile cost is won back, None: never.
    return None if not compiled_ms < eager_ms else math.ceil(compile_ms / (eager_ms - compiled_ms))

rows = []
for w in workloads:
    work, model, input_name, shape, kind = w.split()
    smelt = json.load(open(os.path.join(raw, work + ".smelt-warm.json")))
    cold = json.load(open(os.path.join(raw, work + ".smelt-cold.json")))
    ort = json.load(open(os.path.join(raw, work + ".ort.json")))
    noopt = json.load(open(os.path.join(raw, work + ".ort-noopt.json")))
    comp, comp_cold = smelt["compile"], cold["compile"]
    kinds = [s.get("kind", "compiled" if s["compiled"] else "eager") for s in comp["segments"]]
    rows.append({"work": work, "model": model, "input": f"{input_name}[{shape}]",
                 "smelt_ms": smelt["median_ms"], "smelt_min_ms": smelt["min_ms"], "smelt_first_ms": smelt["first_ms"],
                 "compiled_ms": comp["median_ms"], "compiled_min_ms": comp["min_ms"],
                 "compile_cold_ms": comp_cold["compile_ms"], "compile_warm_ms": comp["compile_ms"],
                 "first_call_cold_ms": comp_cold["first_call_ms"], "first_call_warm_ms": comp["first_call_ms"],
                 # Both from the warm run's medians, so that they differ by the compile cost only.
                 "pays_off_after_warm": pays_off_after(comp["compile_ms"], smelt["median_ms"], comp["median_ms"]),
                 "pays_off_after_cold": pays_off_after(comp_cold["compile_ms"], smelt["median_ms"], comp["median_ms"]),
                 "segments": len(kinds), "compiled_segments": kinds.count("compiled"),
                 "fused_kernels": sum(len(s["fused"]) for s in comp["segments"]),
                 "bit_equal": comp["bit_equal"] and comp_cold["bit_equal"],
                 "ort_ms": ort["median_ms"], "ort_min_ms": ort["min_ms"],
                 "ort_noopt_ms": noopt["median_ms"], "ort_noopt_min_ms": noopt["min_ms"],
                 "ort_session_ms": ort.get("session_ms"), "ort_first_run_ms": ort.get("first_run_ms"),
                 "ratio_vs_ort": ort["median_ms"] / smelt["median_ms"],
                 "ratio_vs_ort_noopt": noopt["median_ms"] / smelt["median_ms"],
                 "ratio_eager_vs_compiled": smelt["median_ms"] / comp["median_ms"],
                 "ratio_ort_vs_compiled": ort["median_ms"] / comp["median_ms"],
                 "ratio_ort_noopt_vs_compiled": noopt["median_ms"] / comp["median_ms"]})
result = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpu": cpu_model(), "threads": threads,
          "smelt": smelt_bin, "load_average": os.getloadavg(),
          "reps": reps, "ort_version": ort["ort_version"],
          "method": "median of reps timed runs after one warm-up, in each of ROUNDS rounds in which the systems "
                    "run in turn, pooled; same .npy inputs; smelt eager and compiled "
                    "(smelt run --compile --repeat: eager and compiled calls alternating in runs of 10; compile cost with a cold and a warm kernel "
                    "cache, times per call from the warm run) vs ONNX Runtime CPU provider (intra_op = threads, "
                    "inter_op = 1), default and no graph optimizations; ratio_vs_ort = ORT median / smelt eager "
                    "median, ratio_eager_vs_compiled = eager / compiled, ratio_ort_vs_compiled = ORT / compiled "
                    "(> 1: the system named second is faster)",
          "rows": rows}
with open("bench/results/onnx.json", "w") as f:
    json.dump(result, f, indent=2)
load = ", ".join(f"{x:.1f}" for x in result["load_average"])
print(f"\n{result['cpu']}, {threads} threads, median of {reps} runs, onnxruntime {result['ort_version']}, "
      f"smelt {smelt_bin}, load average {load}")
print(f"{'workload':<22}{'eager ms':>10}{'compiled':>10}{'ort ms':>10}{'ort-noopt':>11}"
      f"{'eager/comp':>12}{'ort/comp':>10}{'noopt/comp':>12}{'ort/eager':>11}{'noopt/eager':>13}")
for r in rows:
    print(f"{r['work']:<22}{r['smelt_ms']:>10.3f}{r['compiled_ms']:>10.3f}{r['ort_ms']:>10.3f}{r['ort_noopt_ms']:>11.3f}"
          f"{r['ratio_eager_vs_compiled']:>12.2f}{r['ratio_ort_vs_compiled']:>10.2f}"
          f"{r['ratio_ort_noopt_vs_compiled']:>12.2f}{r['ratio_vs_ort']:>11.2f}{r['ratio_vs_ort_noopt']:>13.2f}")
print("medians (ms); a ratio a/b > 1: b is faster")
print(f"\n{'workload':<22}{'segments':>9}{'kernels':>9}{'compile cold':>14}{'warm':>9}{'payoff cold':>13}{'warm':>7}"
      f"{'ort session':>13}{'+1st run':>10}{'bit-equal':>11}")
def calls(n):
    return "never" if n is None else str(n)
for r in rows:
    print(f"{r['work']:<22}{r['compiled_segments']:>4}/{r['segments']:<4}{r['fused_kernels']:>9}"
          f"{r['compile_cold_ms']:>14.1f}{r['compile_warm_ms']:>9.1f}{calls(r['pays_off_after_cold']):>13}"
          f"{calls(r['pays_off_after_warm']):>7}{r['ort_session_ms']:>13.1f}{r['ort_first_run_ms']:>10.1f}"
          f"{'yes' if r['bit_equal'] else 'NO':>11}")
print("segments: compiled/all; compile: trace + build of every segment (ms), cold: empty kernel cache; payoff: "
      "calls after which compiling pays off (compile / (eager - compiled), warm medians); ort: session construction and first "
      "run (ms); wrote bench/results/onnx.json")
EOF

if [ "${ONNX_MODELS:-0}" = 1 ]; then
  # The real architectures (GPT-2, BERT, ViT, Whisper encoder, ResNet, MobileNetV3) with the same build.
  SMELT_BIN="$SMELT" THREADS="$THREADS" bench/onnx_models_bench.sh
fi
