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
# BUDGET_S seconds; defaults 99 / 5 / 20: a sub-millisecond model needs tens of calls, its first few
# after a process starts run slower, ONNX Runtime's by up to 1.5x), ROUNDS (default 3: the timed calls of every system are
# split over this many rounds, the systems in turn within each).
#
# Method. Every system gets the same .npy inputs (seeded, made by export_models.make_inputs) and
# THREADS threads, one call at a time. smelt runs in new processes, each `smelt run --compile`
# (eager and compiled calls alternate in runs of 10, and the first compiled call's outputs are checked bit for bit
# against the eager ones): first with an empty SMELT_CACHE_DIR and no timed calls (the cold first
# call: every fused kernel goes through the C++ compiler), then with the cache that run filled and
# the timed calls (the warm first call: kernels load from the disk cache). OpenVINO (float32
# inference precision, static input shapes, one stream) first runs with an empty CACHE_DIR (cold,
# no timed calls). Then, in each of ROUNDS rounds, smelt (warm), ONNX Runtime at each optimization
# level and OpenVINO (its compiled model cached) run in turn, each in a new process with its share
# of the timed calls: on a shared machine whose speed drifts over minutes (this VM's does by up to
# 2x), a slow minute falls on every system rather than on the one that ran then. Each system's
# calls are pooled over the rounds (bench/merge_rounds.py; the first-call figures are the
# median round's). See bench/peers/models_peers.py. Medians are reported (the minimum and each
# round's median are in the JSON); a first call is the model's loading, set-up and first call in a
# new process. Ratios are of medians; > 1: the
# system named second is faster. The geometric means are over the architectures of one size and
# batch (GPT-2 prefill and decode count as two).
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS="${THREADS:-$(nproc)}"
REPS="${REPS:-99}"
MIN_REPS="${MIN_REPS:-5}"
BUDGET_S="${BUDGET_S:-20}"
MODELS="${MODELS:-gpt2_prefill,gpt2_decode,bert,vit,whisper_encoder,resnet,mobilenetv3}"
SIZES="${SIZES:-small,base}"
BATCHES="${BATCHES:-1,8}"
BASE_BATCHES="${BASE_BATCHES:-$BATCHES}"
SEQ="${SEQ:-128}"
FRAMES="${FRAMES:-1000}"
ROUNDS="${ROUNDS:-3}"
if [ "$MIN_REPS" -lt 3 ] || [ "$REPS" -lt "$MIN_REPS" ] || [ "$ROUNDS" -lt 1 ]; then
  echo "onnx_models_bench.sh: needs 3 <= MIN_REPS <= REPS and ROUNDS >= 1" >&2
  exit 2
fi
# Per round: the calls and the time budget shared out, at least 3 timed calls of each system.
R_REPS=$(( (REPS + ROUNDS - 1) / ROUNDS ))
R_MIN_REPS=$(( (MIN_REPS + ROUNDS - 1) / ROUNDS )); [ "$R_MIN_REPS" -ge 3 ] || R_MIN_REPS=3
R_BUDGET_S=$(awk -v b="$BUDGET_S" -v r="$ROUNDS" 'BEGIN {print b / r}')
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
      # As many timed calls as fit in BUDGET_S (an eager and a compiled call each), within [MIN_REPS, REPS],
      # spread over the rounds.
      reps=$("$PY" -c "import json,sys; c=json.load(open(sys.argv[1])); per=c['first_ms']+c['compile']['first_call_ms']-c['compile']['compile_ms']; print(max($R_MIN_REPS, min($R_REPS, int($R_BUDGET_S * 1000 / max(per, 1e-3)))))" "$RAW/$work.smelt-cold.json") || reps=$R_MIN_REPS
      peer=("$PY" bench/peers/models_peers.py "$file" "${args[@]}" --threads "$THREADS" --reps "$R_REPS"
            --min-reps "$R_MIN_REPS" --budget-s "$R_BUDGET_S")
      ov_cache="$(mktemp -d)"
      echo "== $work: openvino, cold model cache (first call only)"
      # A system that fails on a model leaves no JSON: the report says so and goes on.
      "${peer[@]}" --system openvino --cache-dir "$ov_cache" --first-only >"$RAW/$work.openvino-cold.json" ||
        rm -f "$RAW/$work.openvino-cold.json"
      # The timed calls: every system in each round, in turn (smelt with its warm kernel cache,
      # OpenVINO with its cached model), pooled over the rounds by merge_rounds.py.
      for round in $(seq "$ROUNDS"); do
        echo "== $work, round $round of $ROUNDS: smelt ($reps eager and compiled calls, warm kernel cache), onnxruntime, onnxruntime without graph optimizations, openvino"
        SMELT_CACHE_DIR="$cache" "$SMELT" run "$file" "${args[@]}" --threads "$THREADS" --compile --repeat "$reps" \
          --json "$RAW/$work.smelt-warm.r$round.json" | grep -E '^(check|time|payoff)|^ +compiled' || echo "   smelt failed"
        "${peer[@]}" --system ort >"$RAW/$work.ort.r$round.json" || rm -f "$RAW/$work.ort.r$round.json"
        "${peer[@]}" --system ort-noopt >"$RAW/$work.ort-noopt.r$round.json" || rm -f "$RAW/$work.ort-noopt.r$round.json"
        "${peer[@]}" --system openvino --cache-dir "$ov_cache" >"$RAW/$work.openvino.r$round.json" ||
          rm -f "$RAW/$work.openvino.r$round.json"
      done
      for system in smelt-warm ort ort-noopt openvino; do
        "$PY" bench/merge_rounds.py "$RAW/$work.$system.json" "$RAW/$work.$system".r*.json
      done
      rm -rf "$cache" "$ov_cache"
    done
  done
done

"$PY" bench/models/report_models.py "$RAW" "bench/results/$NAME.json" "$THREADS" "$SMELT" "$SEQ" "$FRAMES" "${WORKS[@]}"
