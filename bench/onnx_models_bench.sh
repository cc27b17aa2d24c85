#!/usr/bin/env bash
# Times real-architecture ONNX exports (bench/models/export_models.py: GPT-2 prefill and decode, BERT,
# ViT, a Whisper encoder, ResNet, MobileNetV3; small and base sizes) on the CPU: smelt eager and
# compiled, ONNX Runtime with and without its graph optimizations and OpenVINO's CPU plugin, with
# cold and warm first calls; prints a table and writes bench/results/onnx_models.json (RESULTS_NAME changes the name).
#
#   THREADS=2 bench/onnx_models_bench.sh                       # every model, small and base, batch 1 and 8
#   SIZES=small BATCHES=1 MODELS=bert,vit bench/onnx_models_bench.sh
#   SMELT_BIN=build/release/tools/smelt/smelt bench/onnx_models_bench.sh   # time an existing build
#   bench/onnx_bench.sh runs it after the bundled models when ONNX_MODELS=1.
#
# Environment: THREADS (default all cores), MODELS (comma-separated, default all), SIZES (small,base),
# BATCHES (1,8), BASE_BATCHES (batches of the base sizes, default BATCHES), SEQ (tokens of GPT-2
# prefill and BERT, default 128; GPT-2 decode has a KV cache of SEQ - 1 tokens and one new token),
# FRAMES (Whisper mel frames, default 1000 = 10 s of audio; 3000 is Whisper's 30 s window),
# REPS / MIN_REPS / BUDGET_S (timed calls per system: up to REPS, at least MIN_REPS, stopping after
# BUDGET_S seconds; defaults 21 / 5 / 20).
#
# Method. Every system gets the same .npy inputs (seeded, made by export_models.make_inputs) and
# THREADS threads, one call at a time. smelt runs twice in new processes, each `smelt run --compile`
# (eager and compiled calls alternate in runs of 10, and the first compiled call's outputs are checked bit for bit
# against the eager ones): first with an empty SMELT_CACHE_DIR and no timed calls (the cold first
# call: every fused kernel goes through the C++ compiler), then with the cache that run filled and
# the timed calls (the warm first call: kernels load from the disk cache). ONNX Runtime runs once per
# optimization level; OpenVINO (float32 inference precision, static input shapes, one stream) runs
# first with an empty CACHE_DIR (cold) and then with the compiled model cached there (warm, timed).
# See bench/peers/models_peers.py. Medians are reported (the minimum is in the JSON); a first call
# is the model's loading, set-up and first call in a new process. Ratios are of medians; > 1: the
# system named second is faster. The geometric means are over the architectures of one size and
# batch (GPT-2 prefill and decode count as two).
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS="${THREADS:-$(nproc)}"
REPS="${REPS:-21}"
MIN_REPS="${MIN_REPS:-5}"
BUDGET_S="${BUDGET_S:-20}"
MODELS="${MODELS:-gpt2_prefill,gpt2_decode,bert,vit,whisper_encoder,resnet,mobilenetv3}"
SIZES="${SIZES:-small,base}"
BATCHES="${BATCHES:-1,8}"
BASE_BATCHES="${BASE_BATCHES:-$BATCHES}"
SEQ="${SEQ:-128}"
FRAMES="${FRAMES:-1000}"
if [ "$MIN_REPS" -lt 3 ] || [ "$REPS" -lt "$MIN_REPS" ]; then
  echo "onnx_models_bench.sh: needs 3 <= MIN_REPS <= REPS" >&2
  exit 2
fi
export SMELT_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS"

# shellcheck source=bench/common.sh
source bench/common.sh
bench_smelt_cli
# torch only exports the models (bench/models/export_models.py); its CPU-only wheels are smaller
# (pip install torch --index-url https://download.pytorch.org/whl/cpu) where that index is reachable.
bench_venv onnx_models_bench.sh "numpy, onnx, onnxruntime, openvino, torch" numpy onnx onnxruntime openvino torch

echo "== exporting the models (bench/models/out; an existing export of the same configuration is kept)"
"$PY" bench/models/export_models.py --only "$MODELS" --sizes "$SIZES"

NAME="${RESULTS_NAME:-onnx_models}"  # bench/results/NAME.json and NAME_raw/: a partial run can keep another's
RAW=bench/results/${NAME}_raw
rm -rf "$RAW"
mkdir -p "$RAW"
WORKS=()
IFS=, read -r -a model_list <<<"$MODELS"
IFS=, read -r -a size_list <<<"$SIZES"
# Size, then batch, then model: a run stopped early still has whole rows of architectures.
for size in "${size_list[@]}"; do
  batches="$BATCHES"
  [ "$size" = base ] && batches="$BASE_BATCHES"
  IFS=, read -r -a batch_list <<<"$batches"
  for batch in "${batch_list[@]}"; do
    for model in "${model_list[@]}"; do
      work="${model}_${size}_b${batch}"
      file="bench/models/out/${model}_${size}.onnx"
      WORKS+=("$work $file")
      # The inputs, one .npy file each; their names and files, as --input arguments.
      mapfile -t feed < <("$PY" - "$model" "$size" "$batch" "$SEQ" "$FRAMES" "$RAW/$work" <<'EOF'
import sys
import numpy as np
sys.path.insert(0, "bench/models")
import export_models
model, size, batch, seq, frames, prefix = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
for name, v in export_models.make_inputs(model, size, batch, seq=seq, past=seq - 1, frames=frames).items():
    np.save(f"{prefix}.{name}.npy", v)
    print(f"{name}={prefix}.{name}.npy")
EOF
)
      args=()
      for f in "${feed[@]}"; do args+=(--input "$f"); done

      cache="$(mktemp -d)"
      echo "== $work: smelt, cold kernel cache (first calls only)"
      SMELT_CACHE_DIR="$cache" "$SMELT" run "$file" "${args[@]}" --threads "$THREADS" --compile \
        --json "$RAW/$work.smelt-cold.json" | grep -E '^(segments|check|compile)' || echo "   smelt failed (exit status above)"
      # As many timed calls as fit in BUDGET_S (an eager and a compiled call each), within [MIN_REPS, REPS].
      reps=$("$PY" -c "import json,sys; c=json.load(open(sys.argv[1])); per=c['first_ms']+c['compile']['first_call_ms']-c['compile']['compile_ms']; print(max($MIN_REPS, min($REPS, int($BUDGET_S * 1000 / max(per, 1e-3)))))" "$RAW/$work.smelt-cold.json") || reps=$MIN_REPS
      echo "== $work: smelt, warm kernel cache, $reps timed eager and compiled calls"
      SMELT_CACHE_DIR="$cache" "$SMELT" run "$file" "${args[@]}" --threads "$THREADS" --compile --repeat "$reps" \
        --json "$RAW/$work.smelt-warm.json" | grep -E '^(check|time|payoff)|^ +compiled' || echo "   smelt failed"
      rm -rf "$cache"
      peer=("$PY" bench/peers/models_peers.py "$file" "${args[@]}" --threads "$THREADS" --reps "$REPS"
            --min-reps "$MIN_REPS" --budget-s "$BUDGET_S")
      echo "== $work: onnxruntime, onnxruntime without graph optimizations, openvino (cold, warm)"
      # A system that fails on a model leaves no JSON: the report says so and goes on.
      "${peer[@]}" --system ort >"$RAW/$work.ort.json" || rm -f "$RAW/$work.ort.json"
      "${peer[@]}" --system ort-noopt >"$RAW/$work.ort-noopt.json" || rm -f "$RAW/$work.ort-noopt.json"
      ov_cache="$(mktemp -d)"
      "${peer[@]}" --system openvino --cache-dir "$ov_cache" --first-only >"$RAW/$work.openvino-cold.json" ||
        rm -f "$RAW/$work.openvino-cold.json"
      "${peer[@]}" --system openvino --cache-dir "$ov_cache" >"$RAW/$work.openvino.json" || rm -f "$RAW/$work.openvino.json"
      rm -rf "$ov_cache"
    done
  done
done

"$PY" bench/models/report_models.py "$RAW" "bench/results/$NAME.json" "$THREADS" "$SMELT" "$SEQ" "$FRAMES" "${WORKS[@]}"
