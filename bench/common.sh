# Shared set-up of the ONNX benchmark scripts (sourced by bench/onnx_bench.sh and
# bench/onnx_models_bench.sh, from the repository root).
#
# bench_smelt_cli: sets SMELT to $SMELT_BIN when given (an already built CLI: no build here), else
# builds the CLI with the bench preset (Release, -march=native).
# bench_venv SCRIPT MODULES... PACKAGES...: makes bench/.venv when missing and pip-installs the
# packages when one of the modules does not import; sets PY. (The library never needs Python.)

bench_smelt_cli() {
  if [ -n "${SMELT_BIN:-}" ]; then
    SMELT="$SMELT_BIN"
    echo "== using $SMELT"
  else
    echo "== building smelt (bench preset: Release, -march=native)"
    cmake --preset bench >/dev/null
    cmake --build --preset bench --target smelt_cli -j "$(nproc)"
    SMELT=build/bench/tools/smelt/smelt
  fi
}

bench_venv() {  # bench_venv SCRIPT "import list" pip packages...
  local script=$1 imports=$2
  shift 2
  if [ ! -x bench/.venv/bin/python ]; then
    echo "== creating bench/.venv"
    python3 -m venv bench/.venv || { echo "$script: python3 -m venv failed (on Debian: apt-get install python3-venv)" >&2; exit 1; }
  fi
  PY=bench/.venv/bin/python
  if ! "$PY" -c "import $imports" 2>/dev/null; then
    echo "== installing $* into bench/.venv"
    bench/.venv/bin/pip install --quiet "$@"
  fi
}
