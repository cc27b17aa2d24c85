#!/usr/bin/env bash
# One command for the GPU: builds smelt with CUDA, runs the GPU tests, then the GPU benchmark
# (SUITE.md's W1-W9, W12 of W3 and of W9, and the copy floor; W11 with the ONNX layer) with PyTorch and
# JAX in the same run, and the concurrent-calls benchmark (threads and streams). docs/cuda.md explains it.
#
# Needs an NVIDIA GPU with its driver, the CUDA toolkit, cmake, ninja, a C++20 compiler; for the
# tests GoogleTest (Debian/Ubuntu libgtest-dev, or a source tree in /usr/src/googletest); for the
# peers python3 with torch. Needs none of Debian's other -dev packages and no network: ONNX is off
# unless SMELT_DEVKIT names a folder made by scripts/devkit.sh on a Debian machine (protobuf and RE2
# headers and libraries), and, without OpenBLAS's headers, the CPU GEMM is smelt's portable one.
#
# Environment: SMELT_GPU_BUILD (build folder, default build/gpu), OUT (reports, default
# $SMELT_GPU_BUILD/report), SMELT_GPU_REPS (benchmark repetitions, default 50), SMELT_GPU_TESTS
# (a regular expression picking test binaries, default all), SMELT_GPU_TEST_TIMEOUT (seconds a test
# binary may run, default 1800),
# SMELT_GPU_SKIP_BENCH=1 (tests only), SMELT_DEVKIT (build the ONNX layer too, see above), SMELT_NODE_SUITE
# (the ONNX node suite to check on the GPU with the ONNX layer; SMELT_GPU_SKIP_SUITE=1 skips it),
# SMELT_GPU_MODELS=1 (also the real-architecture benchmark: $OUT/gpu_models.txt and .json). Exit
# status: non-zero when a build, a test or a node-suite case failed.
set -uo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${SMELT_GPU_BUILD:-$ROOT/build/gpu}
OUT=${OUT:-$BUILD/report}
REPS=${SMELT_GPU_REPS:-50}
mkdir -p "$BUILD" "$OUT"
# Kernels built by NVRTC are cached with the build: a second run builds none.
export SMELT_CACHE_DIR=${SMELT_CACHE_DIR:-$BUILD/kernel-cache}

say() { printf '\n== %s\n' "$*"; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not found"

# GoogleTest: the system's, else a source tree built in this build folder.
GTEST_ARGS=()
if [ ! -e /usr/include/gtest/gtest.h ] && [ -d /usr/src/googletest ]; then
  say "building GoogleTest from /usr/src/googletest"
  cmake -S /usr/src/googletest -B "$BUILD/googletest" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_INSTALL_PREFIX="$BUILD/gtest-install" -DBUILD_GMOCK=OFF >/dev/null &&
    cmake --build "$BUILD/googletest" --target install >/dev/null &&
    GTEST_ARGS=(-DCMAKE_PREFIX_PATH="$BUILD/gtest-install")
fi
TESTS=ON
if [ ! -e /usr/include/gtest/gtest.h ] && [ ${#GTEST_ARGS[@]} -eq 0 ]; then
  echo "GoogleTest not found: building without the tests"
  TESTS=OFF
fi

ONNX=OFF
if [ -n "${SMELT_DEVKIT:-}" ]; then
  # shellcheck disable=SC1091
  source "$SMELT_DEVKIT/env.sh"
  ONNX=ON
fi

say "configure ($BUILD, ONNX $ONNX)"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSMELT_CUDA=ON -DSMELT_ONNX=$ONNX \
  -DSMELT_TESTS=$TESTS "${GTEST_ARGS[@]}" >"$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
grep -E "smelt:" "$OUT/configure.log"

TARGETS=(smelt bench_gpu bench_concurrency)
# With ONNX, the CLI too: `smelt check ../shared/onnx-tests/node --device cuda` runs the node suite on the GPU.
# W11 (an ONNX model) on the GPU too.
[ "$ONNX" = ON ] && TARGETS+=(smelt_cli bench_w11_gpu)
if [ "$TESTS" = ON ]; then
  mapfile -t GPU_TESTS < <(ninja -C "$BUILD" -t targets all | sed -n 's/^\(backend_cuda_[a-z_]*_test\): .*/\1/p' |
    grep -E "${SMELT_GPU_TESTS:-.}" | sort -u)
  TARGETS+=("${GPU_TESTS[@]}")
fi
say "build: ${TARGETS[*]}"
ninja -C "$BUILD" -k 0 -j"$(nproc)" "${TARGETS[@]}" >"$OUT/build.log" 2>&1 || { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -60; exit 1; }

STATUS=0
if [ "$TESTS" = ON ]; then
  say "GPU tests"
  # Tests make their reference arrays on the CPU; they move to the GPU explicitly.
  export SMELT_DEFAULT_DEVICE=cpu
  # The binaries run side by side (most of their time is NVRTC building kernels on the CPU);
  # each writes its own log, and the kernel cache takes concurrent writers.
  mkdir -p "$OUT/tests"
  for t in "${GPU_TESTS[@]}"; do
    (
      start=$(date +%s%N)
      if timeout "${SMELT_GPU_TEST_TIMEOUT:-1800}" "$BUILD/tests/$t" --gtest_brief=1 >"$OUT/tests/$t.log" 2>&1; then result=ok; else result=FAILED; fi
      echo "$result $((($(date +%s%N) - start) / 1000000))" >"$OUT/tests/$t.status"
    ) &
    while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do sleep 0.2; done
  done
  wait
  : >"$OUT/gpu_tests.log"
  total=0
  failed=0
  for t in "${GPU_TESTS[@]}"; do
    read -r result ms <"$OUT/tests/$t.status"
    cat "$OUT/tests/$t.log" >>"$OUT/gpu_tests.log"
    n=$("$BUILD/tests/$t" --gtest_list_tests | grep -c '^  ')
    total=$((total + n))
    if [ "$result" = FAILED ]; then failed=$((failed + 1)); STATUS=1; fi
    printf '%-34s %3d tests  %-6s %6d ms\n' "$t" "$n" "$result" "$ms"
  done
  echo "total: $total tests in ${#GPU_TESTS[@]} binaries, $failed binaries failed; skipped lines: $(grep -c SKIPPED "$OUT/gpu_tests.log" || true)"
  [ $STATUS -ne 0 ] && grep -E "Failure|FAILED|error" -A6 "$OUT/gpu_tests.log" | head -80
fi

# The ONNX node suite on the GPU, eager and compiled (compiled bit-equal to eager), with the repo's
# skip list (its `[cuda]` lines are the expected failures there): SMELT_NODE_SUITE names the suite,
# default ../shared/onnx-tests/node or shared/onnx-tests/node beside the checkout.
NODE_SUITE=${SMELT_NODE_SUITE:-}
for d in "$ROOT/../shared/onnx-tests/node" "$ROOT/shared/onnx-tests/node"; do
  [ -z "$NODE_SUITE" ] && [ -d "$d" ] && NODE_SUITE=$d
done
if [ "$ONNX" = ON ] && [ -n "$NODE_SUITE" ] && [ "${SMELT_GPU_SKIP_SUITE:-0}" != 1 ]; then
  say "ONNX node suite on cuda ($NODE_SUITE, --compile)"
  "$BUILD/tools/smelt/smelt" check "$NODE_SUITE" --device cuda --compile \
    --skip-list "$ROOT/tests/conformance/onnx_node_skips.txt" >"$OUT/node_suite_cuda.txt" 2>&1 || STATUS=1
  grep -E "^FAIL" "$OUT/node_suite_cuda.txt" | head -40
  tail -1 "$OUT/node_suite_cuda.txt"
fi

if [ "${SMELT_GPU_SKIP_BENCH:-0}" != 1 ]; then
  say "GPU benchmark (median of $REPS)"
  "$BUILD/bench_gpu" "$OUT/smelt_gpu.json" "$REPS" || STATUS=1
  # W12: the first call of compiled W3 in new processes, three with an empty kernel cache, then
  # three with the cache the first one filled.
  : >"$OUT/w12.jsonl"
  for i in 1 2 3; do
    rm -rf "$BUILD/w12-cache-$i"
    SMELT_CACHE_DIR="$BUILD/w12-cache-$i" "$BUILD/bench_gpu" --w12 empty_cache >>"$OUT/w12.jsonl" || STATUS=1
  done
  for i in 1 2 3; do
    SMELT_CACHE_DIR="$BUILD/w12-cache-1" "$BUILD/bench_gpu" --w12 warm_disk_cache >>"$OUT/w12.jsonl" || STATUS=1
  done
  # The same for the W9 block (a GPT-2-small block: matmuls, attention, norms, GELU).
  for i in 1 2 3; do
    rm -rf "$BUILD/w12-w9-cache-$i"
    SMELT_CACHE_DIR="$BUILD/w12-w9-cache-$i" "$BUILD/bench_gpu" --w12-w9 empty_cache >>"$OUT/w12.jsonl" || STATUS=1
  done
  for i in 1 2 3; do
    SMELT_CACHE_DIR="$BUILD/w12-w9-cache-1" "$BUILD/bench_gpu" --w12-w9 warm_disk_cache >>"$OUT/w12.jsonl" || STATUS=1
  done
  # W9's host time per call, compiled, with CUDA graphs and without (SMELT_CUDA_GRAPHS, docs/cuda.md).
  SMELT_CUDA_GRAPHS=1 "$BUILD/bench_gpu" --w9-host graphs >>"$OUT/w12.jsonl" || STATUS=1
  SMELT_CUDA_GRAPHS=0 "$BUILD/bench_gpu" --w9-host no_graphs >>"$OUT/w12.jsonl" || STATUS=1
  cat "$OUT/w12.jsonl"
  # W11: the ONNX graph-break model with a new box count on every call, eager and compiled
  # (bench_w11_gpu), then PyTorch eager and torch.compile(dynamic=True) on the same counts.
  if [ "$ONNX" = ON ]; then
    say "W11 on the GPU (bench_w11_gpu)"
    "$BUILD/bench_w11_gpu" "$OUT/w11_smelt.json" 100 || STATUS=1
    if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
      python3 "$ROOT/bench/gpu/peers_w11.py" "$OUT/w11_smelt.json" "$OUT/w11.json" "$OUT/w11.txt" || STATUS=1
    fi
  fi
  # Concurrent calls: one compiled function and one compiled MLP block from 1-4 threads, on the
  # default stream and then on one smelt::Stream per thread (the CPU rows come first).
  say "concurrent calls (bench_concurrency)"
  "$BUILD/bench_concurrency" --threads 1,2,4,8 --seconds 0.5 --json "$OUT/concurrency.json" || STATUS=1
  if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
    python3 "$ROOT/bench/gpu/peers_gpu.py" "$OUT/smelt_gpu.json" "$OUT/gpu_bench.json" "$REPS" "$OUT/gpu_bench.txt" "$OUT/w12.jsonl" || STATUS=1
  else
    echo "python3 with CUDA torch not found: smelt's rows only ($OUT/smelt_gpu.json)"
  fi
fi
if [ "${SMELT_GPU_MODELS:-0}" = 1 ]; then
  # Real architectures (GPT-2 small prefill and decode, BERT-base, ViT-B/16, ResNet-50, Whisper-base
  # encoder) exported from bench/models/export_models.py: smelt against PyTorch eager and torch.compile,
  # within about 5 minutes. smelt's rows need the CLI, which needs the ONNX layer (SMELT_DEVKIT).
  say "real architectures (bench/gpu/onnx_models_gpu.py)"
  if python3 -c "import torch, onnx; assert torch.cuda.is_available()" 2>/dev/null; then
    [ "$ONNX" = ON ] || echo "ONNX is off (SMELT_DEVKIT unset): no smelt CLI, PyTorch's rows only"
    python3 "$ROOT/bench/gpu/onnx_models_gpu.py" --smelt "$BUILD/tools/smelt/smelt" --out "$OUT" || STATUS=1
  else
    echo "python3 with CUDA torch and onnx not found: no real-architecture benchmark"
  fi
fi
say "reports in $OUT"
exit $STATUS
