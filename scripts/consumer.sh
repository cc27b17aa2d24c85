#!/usr/bin/env bash
# smelt as a package for other projects (scripts/test.sh runs this after the tests): installs an
# already built tree into a temporary prefix and checks what lands there (headers, the versioned
# libsmelt, the CLI, the CMake package, smelt.pc); builds and runs examples/consumer against it
# with find_package and with pkg-config, then with this source tree built inside it (FetchContent,
# that is add_subdirectory); and configures the tree with -DSMELT_ONNX=OFF and -DSMELT_CUDA=OFF.
#
# Usage: scripts/consumer.sh [BUILD]   (BUILD: a built smelt tree, default build/release)
# Environment: SMELT_CONSUMER_BUILD (the FetchContent build, default build/consumer; kept so
# that a second run rebuilds nothing). Exit status: non-zero on the first failed check.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "${1:-$ROOT/build/release}" && pwd)
SUBDIR_BUILD=${SMELT_CONSUMER_BUILD:-$ROOT/build/consumer}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export SMELT_CACHE_DIR=$TMP/kernel-cache  # the consumers' fused kernels stay out of the user's cache
JOBS=$(nproc)
LAUNCHER=()
if command -v ccache >/dev/null; then LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

say() { printf '== consumer: %s\n' "$*"; }
fail() { printf 'consumer: FAILED: %s\n' "$*" >&2; exit 1; }
# Runs a command quietly, showing its output only when it fails.
quiet() { "$@" >"$TMP/step.log" 2>&1 || { cat "$TMP/step.log" >&2; fail "$*"; }; }

PREFIX=$TMP/prefix
say "cmake --install $BUILD --prefix $PREFIX"
quiet cmake --install "$BUILD" --prefix "$PREFIX"

# The CLI runs from the prefix without LD_LIBRARY_PATH (its RPATH is relative) and gives the version.
[ -x "$PREFIX/bin/smelt" ] || fail "no bin/smelt under the prefix"
VERSION=$(env -u LD_LIBRARY_PATH "$PREFIX/bin/smelt" --version | sed -n 's/^smelt \([0-9][0-9.]*\).*/\1/p')
[ -n "$VERSION" ] || fail "bin/smelt --version printed no version"
MAJOR_MINOR=$(echo "$VERSION" | cut -d. -f1,2)

# Headers: include/smelt only, none of them reaching into src/.
[ "$(ls "$PREFIX/include")" = smelt ] || fail "include/ holds more than smelt/: $(ls "$PREFIX/include")"
[ -f "$PREFIX/include/smelt/smelt.h" ] || fail "no include/smelt/smelt.h"
if grep -l '#include "src/' "$PREFIX"/include/smelt/*.h; then fail "public headers include src/ headers"; fi

# libsmelt.so -> libsmelt.so.X.Y -> libsmelt.so.X.Y.Z, SONAME libsmelt.so.X.Y.
LIBDIR=$(dirname "$(find "$PREFIX" -name libsmelt.so | head -1)")
[ -f "$LIBDIR/libsmelt.so.$VERSION" ] || fail "no libsmelt.so.$VERSION in $LIBDIR"
SONAME=$(objdump -p "$LIBDIR/libsmelt.so.$VERSION" | sed -n 's/^ *SONAME *//p')
[ "$SONAME" = "libsmelt.so.$MAJOR_MINOR" ] || fail "SONAME is '$SONAME', expected libsmelt.so.$MAJOR_MINOR"
[ -L "$LIBDIR/$SONAME" ] || fail "no $SONAME link"
# Nothing installed looks in the build tree for libraries (the CLI's RUNPATH is $ORIGIN-relative).
for bin in "$PREFIX/bin/smelt" "$LIBDIR/libsmelt.so.$VERSION"; do
  if objdump -p "$bin" | grep -E '^ *R(UN)?PATH' | grep -F "$BUILD"; then fail "$bin has a build-tree RUNPATH"; fi
done

# The CMake package: relocatable (no build or source paths) and free of libsmelt's private
# dependencies, so that a consumer needs neither the CUDA toolkit nor protobuf.
PKGDIR=$LIBDIR/cmake/smelt
for f in smeltConfig.cmake smeltConfigVersion.cmake smeltTargets.cmake; do
  [ -f "$PKGDIR/$f" ] || fail "no $f in $PKGDIR"
done
if grep -il 'cuda\|protobuf\|openblas\|blas' "$PKGDIR"/smeltTargets*.cmake; then fail "the CMake package names a private dependency"; fi
if grep -l "$ROOT\|$BUILD" "$PKGDIR"/*.cmake "$LIBDIR/pkgconfig/smelt.pc"; then fail "installed package files name the build or source tree"; fi

say "find_package(smelt) consumer"
quiet cmake -S "$ROOT/examples/consumer" -B "$TMP/find" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$PREFIX" "${LAUNCHER[@]}"
quiet cmake --build "$TMP/find" -j "$JOBS"
"$TMP/find/consumer" || fail "the find_package consumer"

say "pkg-config consumer"
export PKG_CONFIG_PATH=$LIBDIR/pkgconfig
[ "$(pkg-config --modversion smelt)" = "$VERSION" ] || fail "pkg-config --modversion smelt is not $VERSION"
# shellcheck disable=SC2046  # pkg-config's flags are meant to be split
quiet ${CXX:-c++} -std=c++20 "$ROOT/examples/consumer/main.cpp" -o "$TMP/pc_consumer" $(pkg-config --cflags --libs smelt)
LD_LIBRARY_PATH=$LIBDIR "$TMP/pc_consumer" || fail "the pkg-config consumer"

# FetchContent / add_subdirectory: smelt's tests, tools and examples stay out of the
# consumer's build. CUDA is left off here: the GPU code is built by the main tree.
say "FetchContent (add_subdirectory) consumer ($SUBDIR_BUILD)"
quiet cmake -S "$ROOT/examples/consumer" -B "$SUBDIR_BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DSMELT_CONSUMER_SOURCE_DIR="$ROOT" -DSMELT_CUDA=OFF "${LAUNCHER[@]}"
if ninja -C "$SUBDIR_BUILD" -t targets all | grep -E '^(smelt_cli|quickstart|bench_gpu|[a-z_]+_test):'; then
  fail "smelt's own programs are built inside the consumer"
fi
quiet cmake --build "$SUBDIR_BUILD" -j "$JOBS"
"$SUBDIR_BUILD/consumer" || fail "the FetchContent (add_subdirectory) consumer"

# The optional layers still configure when switched off (configure only).
for opt in SMELT_ONNX SMELT_CUDA; do
  say "configure -D$opt=OFF"
  quiet cmake -S "$ROOT" -B "$TMP/no-$opt" -G Ninja -D$opt=OFF
done
say "all checks passed"
