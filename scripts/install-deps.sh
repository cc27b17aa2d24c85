#!/usr/bin/env bash
# Installs the Debian packages smelt needs to build and test (idempotent; skips apt when all are present).
set -euo pipefail

PACKAGES=(
  build-essential   # g++ 12 (C++20) and make
  cmake             # the build (presets need >= 3.25)
  ninja-build       # the generator the presets use
  ccache            # faster rebuilds (optional at build time)
  libopenblas-dev   # GEMM for float64 matmul and convolution (float32 too when built without oneDNN)
  libdnnl-dev       # oneDNN: float32 convolutions and GEMM tiles, 3-10x faster here (docs/cpu-kernels.md)
  ocl-icd-opencl-dev # oneDNN's CMake config calls find_package(OpenCL REQUIRED) (a Recommends apt skips here)
  libprotobuf-dev   # ONNX: reading .onnx models (protobuf runtime and headers)
  protobuf-compiler # ONNX: protoc generates the C++ classes of src/onnx/proto/onnx.proto
  libre2-dev        # ONNX: RegexFullMatch (RE2 syntax, linear-time matching without recursion)
  pkg-config        # finds libre2-dev
  libgtest-dev      # unit tests
  libgmock-dev      # unit tests (matchers)
  libbenchmark-dev  # benchmarks in bench/
  pkgconf           # scripts/consumer.sh checks the installed smelt.pc with pkg-config
  python3           # fixture and benchmark scripts; the doc-snippet tests (scripts/sync_doc_snippets.py)
  python3-venv      # bench/run.sh installs NumPy into bench/.venv (benchmarks only)
  chromium          # the graph view's tests load the HTML page in headless Chromium (they skip without it)
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
