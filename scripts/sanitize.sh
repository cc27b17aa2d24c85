#!/usr/bin/env bash
# Builds the sanitizer presets and runs the unit tests under ASan+UBSan and the concurrency tests under TSan.
#
#   scripts/sanitize.sh [asan|tsan|all] [-j N] [--asan-targets "t1 t2"] [--asan-tests REGEX]
#
# asan: the `asan` preset (AddressSanitizer + UndefinedBehaviorSanitizer, -O1 -g, CPU only), every
#       unit test through ctest (label `unit`), or the targets/tests given.
# tsan: the `tsan` preset (ThreadSanitizer), the concurrency tests: 16 threads x 2,000 calls of one
#       compiled function, threads sharing lazy graphs, parallel_for callers, and concurrent calls of a
#       compiled and an eager ONNX model (tests/core/concurrency_test.cpp, tests/onnx/concurrency_test.cpp),
#       plus the worker pool's own tests.
#
# Generated fused kernels are compiled by smelt at run time with the system compiler (SMELT_CXX).
# They get the same sanitizer flags as the build, so that ASan checks their loads and stores and
# TSan sees their accesses; their own kernel cache folder (SMELT_CACHE_DIR under the build folder)
# keeps instrumented kernels apart from normal ones, since the cache key does not include flags
# passed through SMELT_CXX.
# OpenBLAS runs its own threads, which TSan cannot see synchronize: the tsan preset builds with
# SMELT_BLAS=OFF, so float GEMM is smelt's portable one, on smelt's (instrumented) thread pool.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

which="all"
jobs=2
asan_targets=""
asan_tests=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    asan|tsan|all) which="$1" ;;
    -j) jobs="$2"; shift ;;
    --asan-targets) asan_targets="$2"; shift ;;
    --asan-tests) asan_tests="$2"; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "sanitize.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

cxx="${SMELT_CXX:-c++}"
# TSan's runtime needs the low address space layout; newer kernels randomize more bits than
# GCC 12's runtime accepts, so tests run with randomization off when setarch is available.
norandom=()
if command -v setarch >/dev/null 2>&1; then norandom=(setarch "$(uname -m)" -R); fi

run_asan() {
  cmake --preset asan
  if [[ -n "$asan_targets" ]]; then
    # shellcheck disable=SC2086
    cmake --build --preset asan -j "$jobs" --target smelt $asan_targets
  else
    cmake --build --preset asan -j "$jobs"
  fi
  mkdir -p build/asan/kernel-cache
  local filter=(-L unit)
  [[ -n "$asan_tests" ]] && filter+=(-R "$asan_tests")
  SMELT_CXX="$cxx -fsanitize=address,undefined -fno-sanitize-recover=undefined" \
  SMELT_CACHE_DIR="$root/build/asan/kernel-cache" \
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    ctest --test-dir build/asan "${filter[@]}" -j "$jobs" --output-on-failure
}

run_tsan() {
  cmake --preset tsan
  local tests=(core_concurrency_test core_thread_pool_test)
  if grep -q 'SMELT_ONNX:BOOL=ON' build/tsan/CMakeCache.txt; then tests+=(onnx_concurrency_test); fi
  cmake --build --preset tsan -j "$jobs" --target smelt "${tests[@]}"
  mkdir -p build/tsan/kernel-cache
  local failed=0
  for t in "${tests[@]}"; do
    echo "== TSan: $t"
    if ! SMELT_DEFAULT_DEVICE=cpu SMELT_CXX="$cxx -fsanitize=thread" SMELT_CACHE_DIR="$root/build/tsan/kernel-cache" \
        TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4" \
        "${norandom[@]}" "build/tsan/tests/$t"; then
      failed=1
    fi
  done
  return "$failed"
}

case "$which" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  all) run_tsan && run_asan ;;
esac
