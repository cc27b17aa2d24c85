#!/usr/bin/env bash
# Runs the array benchmarks (smelt through Google Benchmark, NumPy as the peer) side by side,
# writes bench/results/latest.json and prints the table last. Method: ../shared/bench/SUITE.md.
#
#   bench/run.sh                 all workloads, every core, 21 runs each (median reported)
#   THREADS=1 REPS=30 bench/run.sh
#
# NumPy lives in bench/.venv (created here); the library and its tests never need Python.
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS="${THREADS:-$(nproc)}"
REPS="${REPS:-21}"
if [ "$REPS" -lt 20 ]; then echo "run.sh: REPS must be at least 20 (SUITE.md)" >&2; exit 2; fi
# The same thread count for every system: smelt's kernels and every BLAS.
export SMELT_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS" \
       MKL_NUM_THREADS="$THREADS"

echo "== building the bench preset (Release, -march=native)"
cmake --preset bench >/dev/null
cmake --build --preset bench --target bench_arrays bench_matmul bench_compile bench_train -j "$(nproc)"

if [ ! -x bench/.venv/bin/python ]; then
  echo "== creating bench/.venv"
  python3 -m venv bench/.venv || { echo "run.sh: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2; exit 1; }
fi
if ! bench/.venv/bin/python -c "import numpy" 2>/dev/null; then
  echo "== installing numpy into bench/.venv"
  bench/.venv/bin/pip install --quiet numpy
fi

mkdir -p bench/results
echo "== smelt ($THREADS threads, $REPS runs per workload)"
build/bench/bench/bench_arrays --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
  --benchmark_out=bench/results/smelt_raw.json --benchmark_out_format=json

echo "== smelt matmul + bias + GELU, eager and compiled"
build/bench/bench/bench_matmul --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
  --benchmark_out=bench/results/smelt_matmul_raw.json --benchmark_out_format=json

echo "== smelt compile: W8 (host time per call) and W12 (first call in a fresh process, cold and warm cache)"
build/bench/bench/bench_compile --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
  --benchmark_out=bench/results/smelt_compile_raw.json --benchmark_out_format=json

echo "== smelt training step: the char-GPT example, eager and compiled (steps per second)"
build/bench/bench/bench_train --benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true \
  --benchmark_out=bench/results/smelt_train_raw.json --benchmark_out_format=json

echo "== numpy"
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE may be set on these machines to steer the system
# OpenBLAS that smelt links. NumPy's wheel bundles its own OpenBLAS build, which must detect the
# CPU itself, so both are unset for this command only (smelt's run above keeps them).
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
  bench/.venv/bin/python bench/peers/numpy_bench.py --reps "$REPS" --threads "$THREADS" \
  --out bench/results/numpy_raw.json
bench/.venv/bin/python bench/peers/numpy_dispatch_bench.py --reps "$REPS" --out bench/results/numpy_dispatch_raw.json

bench/.venv/bin/python bench/report.py --smelt bench/results/smelt_raw.json bench/results/smelt_matmul_raw.json bench/results/smelt_compile_raw.json bench/results/smelt_train_raw.json \
  --peers bench/results/numpy_raw.json bench/results/numpy_dispatch_raw.json --threads "$THREADS" --reps "$REPS" \
  --out bench/results/latest.json
