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
# instruction elsewhere. ONEDNN_MAX_CPU_ISA=AVX2 does the same for oneDNN's convolutions and
# GEMM (other kernels, other blockings: docs/cpu-kernels.md).
if grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo; then
  OPENBLAS_CORETYPE=Haswell SMELT_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 ctest --preset release -L unit
else
  echo "test.sh: no AVX2 on this CPU: the second pass (OPENBLAS_CORETYPE=Haswell SMELT_CPU_ISA=avx2) is skipped"
fi

# The build without oneDNN (-DSMELT_DNNL=OFF: smelt's own convolution and GEMM kernels) must keep
# configuring and compiling: its only differences are src/backend/cpu/dnnl.cpp's stand-ins and
# the thread pool's own workers (src/core/thread_pool.cpp; with oneDNN it runs on OpenMP's team),
# built here (the whole OFF build takes as long as the main one; the GPU machine's build, which
# has no oneDNN, runs the tests on that pool).
cmake -S . -B build/nodnnl -G Ninja -DCMAKE_BUILD_TYPE=Release -DSMELT_DNNL=OFF -DSMELT_CUDA=OFF >/dev/null
cmake --build build/nodnnl --target CMakeFiles/smelt.dir/src/backend/cpu/dnnl.cpp.o CMakeFiles/smelt.dir/src/core/thread_pool.cpp.o

# smelt as a package (issue #11): the built tree installed into a temporary prefix, and
# examples/consumer built and run against it (find_package, pkg-config) and with the source tree
# inside it (FetchContent / add_subdirectory). Fails the script on the first failed check.
scripts/consumer.sh build/release
