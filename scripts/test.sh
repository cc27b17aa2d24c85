#!/usr/bin/env bash
# Builds smelt and runs every test (the README's test command; .ci/run calls it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)"
ctest --preset release

# smelt as a package (issue #11): the built tree installed into a temporary prefix, and
# examples/consumer built and run against it (find_package, pkg-config) and with the source tree
# inside it (FetchContent / add_subdirectory). Fails the script on the first failed check.
scripts/consumer.sh build/release
