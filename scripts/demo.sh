#!/usr/bin/env bash
# Builds smelt and runs the main job on the bundled default (the README's first command).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)" --target smelt_cli
./build/release/tools/smelt/smelt demo
