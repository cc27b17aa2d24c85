#!/usr/bin/env bash
# Builds smelt and runs every test (the README's test command; .ci/run calls it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
ctest --preset release
