#!/usr/bin/env bash
# Fuzzes the ONNX loader and runner with libFuzzer: builds the `fuzz` preset, seeds a corpus from the node suite, runs.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
#   SECONDS  how long each target runs (default 600)
#   TARGET   onnx_loader_fuzz (bytes as models through load_from_memory), onnx_value_fuzz (test-data
#            values through parse_value) and/or onnx_model_fuzz (structure-aware: the suite's models
#            mutated as models, loaded and run with a deadline and a memory budget); default all
#            three, one after the other.
# Environment: SMELT_ONNX_SUITE (default ../shared/onnx-tests/node beside the repo), FUZZ_JOBS
# (build parallelism, default 2), FUZZ_BIN_DIR (run the fuzz binaries found there instead of
# building the preset, e.g. ones linked by hand against an existing libsmelt), FUZZ_LIB_DIR (a
# build folder holding libsmelt.so, e.g. build/release: only the targets are compiled, with
# clang's fuzzer, ASan and UBSan, and linked against it. Far cheaper than the preset's
# instrumented library, at the price of coverage feedback from the library: the structure-aware
# target then works as a generator of mutated models, and the sanitizers check the targets only,
# though ASan's allocator still catches double and invalid frees anywhere).
# Outputs (not committed): build/fuzz/corpus/TARGET (the seeds plus what libFuzzer finds),
# build/fuzz/crashes/TARGET-* (inputs that crashed, hung or leaked), build/fuzz/TARGET.log.
# Replay a crash: build/fuzz/fuzz/TARGET build/fuzz/crashes/FILE (the binary alone runs the inputs given)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-600}"
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(onnx_loader_fuzz onnx_value_fuzz onnx_model_fuzz)
suite="${SMELT_ONNX_SUITE:-$root/../shared/onnx-tests/node}"
build="$root/build/fuzz"

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (libFuzzer needs clang)" >&2
  exit 1
fi
[ -d "$suite" ] || { echo "fuzz.sh: node suite '$suite' not found (set SMELT_ONNX_SUITE)" >&2; exit 1; }

cd "$root"
bin_dir="${FUZZ_BIN_DIR:-$build/fuzz}"
if [ -n "${FUZZ_LIB_DIR:-}" ]; then
  lib="$(cd "$FUZZ_LIB_DIR" && pwd)"
  bin_dir="$build/lite"
  mkdir -p "$bin_dir"
  for t in "${targets[@]}"; do
    clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      -I"$root" -I"$root/include" -isystem "$lib/generated" "$root/fuzz/$t.cpp" \
      -L"$lib" -lsmelt -lprotobuf -Wl,-rpath,"$lib" -o "$bin_dir/$t"
  done
elif [ -z "${FUZZ_BIN_DIR:-}" ]; then
  cmake --preset fuzz >/dev/null
  ninja -C "$build" -j"${FUZZ_JOBS:-2}" "${targets[@]}"
fi

mkdir -p "$build/crashes"
# Seeds: every model (loader, model) or every input tensor (values) of the suite, plus truncated
# and bit-flipped variants of a sample, which reach the error paths for malformed files at once
# (not for the model target, whose mutator needs well-formed models), and the committed corpus
# (fuzz/corpus/TARGET: inputs that found bugs).
seed() {
  local target="$1" dir="$build/corpus/$1"
  mkdir -p "$dir"
  python3 - "$target" "$suite" "$dir" <<'PY'
import hashlib, os, random, sys
target, suite, out = sys.argv[1:]
rng = random.Random(1234)
def put(data):
    with open(os.path.join(out, "seed-" + hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)
seeds = []
for case in sorted(os.listdir(suite)):
    path = os.path.join(suite, case)
    if target in ("onnx_loader_fuzz", "onnx_model_fuzz"):
        f = os.path.join(path, "model.onnx")
        if os.path.isfile(f):
            seeds.append(open(f, "rb").read())
        continue
    # onnx_value_fuzz: the first byte picks the expected kind (0 tensor, 2 sequence, 3
    # optional, 4 optional sequence, 5 map); the suite's sequence/optional cases get those.
    kinds = [0]
    if "seq" in case or "split_to_sequence" in case: kinds.append(2)
    if "optional" in case: kinds += [3, 4]
    for ds in sorted(os.listdir(path)):
        d = os.path.join(path, ds)
        if not (ds.startswith("test_data_set") and os.path.isdir(d)):
            continue
        for name in sorted(os.listdir(d)):
            if name.startswith("input_") and name.endswith(".pb"):
                data = open(os.path.join(d, name), "rb").read()
                if len(data) <= 65536:  # large tensors add time, not coverage
                    seeds += [bytes([k]) + data for k in kinds]
for s in seeds:
    put(s)
for s in rng.sample(seeds, min(300, len(seeds)) if target != "onnx_model_fuzz" else 0):
    put(s[: rng.randrange(1, len(s))] if len(s) > 1 else s)  # truncated
    b = bytearray(s)
    for _ in range(rng.randrange(1, 4)):
        if b:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    put(bytes(b))  # bit-flipped
print(max(len(s) for s in seeds))
PY
  if [ -d "$root/fuzz/corpus/$target" ]; then cp "$root/fuzz/corpus/$target"/* "$dir"/ 2>/dev/null || true; fi
}

for target in "${targets[@]}"; do
  max_len="$(seed "$target")"
  echo "fuzz.sh: $target for ${seconds}s, corpus $build/corpus/$target ($(ls "$build/corpus/$target" | wc -l) files), max_len $max_len"
  # -rss_limit_mb also caps single allocations (malloc_limit_mb defaults to it): a length field
  # that makes the loader allocate gigabytes is a reported bug, as is any input taking > 10 s.
  set +e
  "$bin_dir/$target" "$build/corpus/$target" \
    -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=4096 \
    -artifact_prefix="$build/crashes/$target-" -print_final_stats=1 >"$build/$target.log" 2>&1
  status=$?
  set -e
  grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|ERROR|SUMMARY|stat::|Test unit written' "$build/$target.log" || true
  if [ "$status" -ne 0 ]; then
    echo "fuzz.sh: $target found a problem (exit $status); see $build/$target.log and $build/crashes/" >&2
    exit "$status"
  fi
done
