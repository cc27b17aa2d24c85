#!/usr/bin/env bash
# Encodes the hand-written regression models (fuzz/corpus/textproto/*.textproto) into the replayed corpus.
#
# Usage: fuzz/corpus/make_regressions.sh   (needs protoc, from protobuf-compiler)
# Each NAME.textproto becomes fuzz/corpus/onnx_model_fuzz/regression-NAME.onnx, which the fuzzer
# starts from (scripts/fuzz.sh copies the folder into its corpus) and fuzz_corpus_replay_test
# loads and runs: an endless Loop (2^62 trips, a scan output), functions that call each other,
# RegexFullMatch patterns that backtrack exponentially in a backtracking engine.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
proto="$here/../../src/onnx/proto"
mkdir -p "$here/onnx_model_fuzz"
for f in "$here"/textproto/*.textproto; do
  name="$(basename "$f" .textproto)"
  protoc --encode=onnx.ModelProto -I "$proto" "$proto/onnx.proto" <"$f" >"$here/onnx_model_fuzz/regression-$name.onnx"
done
