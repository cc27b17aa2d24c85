#!/usr/bin/env bash
# Builds smelt and runs every test (the README's test command; .ci/run calls it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
ctest --preset release
# The unit tests again on other CPU kernels, without a second build: OpenBLAS's AVX2 (Haswell)
# GEMM kernels and smelt's AVX2 math kernels, the paths an AVX2-only CPU (AMD EPYC Zen, older
# Xeons) takes. Results must stay within the tests' stated error bounds and must not depend on
# the thread count (issue #11; docs/arrays.md, "Threads and CPU kernels"). Only on a CPU with
# AVX2 and FMA: OpenBLAS does not check a forced core type, and would stop on an illegal
# instruction elsewhere.
if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo; then
  OPENBLAS_CORETYPE=Haswell SMELT_CPU_ISA=avx2 ctest --preset release -L unit
else
  echo "test.sh: no AVX2 on this CPU: the second pass (OPENBLAS_CORETYPE=Haswell SMELT_CPU_ISA=avx2) is skipped"
fi

# smelt as a package (issue #11): the built tree installed into a temporary prefix, and
# examples/consumer built and run against it (find_package, pkg-config) and with the source tree
# inside it (FetchContent / add_subdirectory). Fails the script on the first failed check.
scripts/consumer.sh build/release
