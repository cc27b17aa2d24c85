#!/usr/bin/env bash
# Builds smelt and runs the main job: the bundled transformer through `smelt run` (the README's first command).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
cmake --preset release
cmake --build --preset release -j "$(nproc)" --target smelt_cli
# models/tiny_transformer.onnx: 2 encoder layers, d_model 128, 4 heads, seeded weights
# (scripts/make_models.py). Random input_ids of shape [batch=1, seq=32], 20 timed runs.
./build/release/tools/smelt/smelt run models/tiny_transformer.onnx --repeat 20
