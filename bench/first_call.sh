#!/usr/bin/env bash
# The first compiled call of the bundled models in a new process, with an empty kernel cache
# (cold) and with the cache the cold run filled (warm), tiered (the default) and synchronous
# (SMELT_TIERED=0, the behaviour before tiered execution); medians of RUNS processes each, and
# the compiled per-call median once the kernels are built (the steady state, REPS calls).
#
#   bench/first_call.sh                       5 processes per cell, 2 threads
#   RUNS=9 THREADS=4 SMELT_BIN=build/bench/tools/smelt/smelt bench/first_call.sh
#
# Each process is `smelt run MODEL --compile --repeat REPS --json`: one eager run (which warms the
# thread pool and BLAS, as a served model would be), then the timed first compiled call
# (onnx::compile included), then, when it ran on the interpreter tier, the wait for the
# background kernel builds, then REPS compiled calls. Cold runs get a fresh SMELT_CACHE_DIR each;
# warm runs reuse the folder a cold run filled. Prints one row per model and mode; the raw JSON
# stays in a temporary folder (printed).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS="${RUNS:-5}"
REPS="${REPS:-21}"
THREADS="${THREADS:-2}"
SMELT="${SMELT_BIN:-build/release/tools/smelt/smelt}"
export SMELT_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" SMELT_DEFAULT_DEVICE=cpu
RAW="$(mktemp -d /tmp/smelt-first-call-XXXXXX)"
echo "== raw results in $RAW"

for model in tiny_transformer tiny_cnn; do
  for mode in tiered sync; do
    tiered=1
    [ "$mode" = sync ] && tiered=0
    for i in $(seq 1 "$RUNS"); do
      cache="$RAW/cache-$model-$mode-$i"
      mkdir -p "$cache"
      for state in cold warm; do
        SMELT_TIERED="$tiered" SMELT_CACHE_DIR="$cache" "$SMELT" run "models/$model.onnx" --compile --repeat "$REPS" \
          --threads "$THREADS" --json "$RAW/$model.$mode.$state.$i.json" >/dev/null
      done
    done
  done
done

python3 - "$RAW" "$RUNS" <<'PY'
import json, statistics, sys, os
raw, runs = sys.argv[1], int(sys.argv[2])
print(f"{'model':<18}{'mode':<8}{'state':<6}{'first call ms':>14}{'kernels ready ms':>18}{'compiled ms':>13}{'first tier':>13}")
for model in ("tiny_transformer", "tiny_cnn"):
    for mode in ("tiered", "sync"):
        for state in ("cold", "warm"):
            rs = [json.load(open(os.path.join(raw, f"{model}.{mode}.{state}.{i}.json")))["compile"] for i in range(1, runs + 1)]
            first = statistics.median(r["first_call_ms"] for r in rs)
            # Full speed from: the first call, plus the wait for the background builds after it.
            ready = statistics.median(r["first_call_ms"] + r.get("kernels_wait_ms", 0.0) for r in rs)
            steady = statistics.median(r["median_ms"] for r in rs)
            tiers = sorted({r.get("first_call_tier", "fused") for r in rs})
            assert all(r["bit_equal"] for r in rs), f"{model} {mode} {state}: compiled differs from eager"
            print(f"{model:<18}{mode:<8}{state:<6}{first:>14.1f}{ready:>18.1f}{steady:>13.3f}{'/'.join(tiers):>13}")
print(f"medians of {runs} processes; 'kernels ready': first call + the wait for the background builds (sync: the first call)")
PY
