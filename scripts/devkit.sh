#!/usr/bin/env bash
# Packs the ONNX layer's build dependencies (protobuf headers, runtime and protoc; RE2) from this machine's Debian packages into one relocatable prefix.
#
#   scripts/devkit.sh [DIR]      (default .devkit, ignored by git)
#
# For a GPU machine that has the CUDA toolkit, cmake and a C++ compiler but none of Debian's -dev
# packages and no network: copy DIR there beside the checkout, then
#   source DIR/env.sh      (sets CMAKE_PREFIX_PATH, PKG_CONFIG_PATH, LD_LIBRARY_PATH and PATH)
# and configure as usual: FindProtobuf and the RE2 lookup find everything under DIR, and programs
# linked against it run with LD_LIBRARY_PATH. scripts/gpu.sh does this when SMELT_DEVKIT=DIR is set.
# The libraries keep their Debian SONAMEs (libprotobuf.so.32, libprotoc.so.32, libre2.so.9); they need
# only the C and C++ runtimes and zlib, which every such machine has.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/.devkit}"
multiarch="$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)"
libdir="/usr/lib/$multiarch"

for f in /usr/include/google/protobuf/message.h /usr/include/re2/re2.h /usr/bin/protoc \
         "$libdir/libprotobuf.so" "$libdir/libre2.so"; do
  [ -e "$f" ] || { echo "devkit.sh: $f not found (run scripts/install-deps.sh)" >&2; exit 1; }
done

rm -rf "$dir"
mkdir -p "$dir/include/google" "$dir/lib/pkgconfig" "$dir/bin"
cp -a /usr/include/google/protobuf "$dir/include/google/"
cp -a /usr/include/re2 "$dir/include/"
# The libraries with their SONAME and development links, resolved to plain files.
for lib in libprotobuf libprotoc libre2; do
  # libprotoc has no development link (protoc needs only its runtime): take the SONAME file.
  real="$(readlink -f "$(ls "$libdir/$lib.so" "$libdir/$lib".so.[0-9]* 2>/dev/null | head -1)")"
  soname="$(objdump -p "$real" | awk '/SONAME/ {print $2}')"
  cp "$real" "$dir/lib/$soname"
  [ "$lib" = libprotoc ] || ln -sf "$soname" "$dir/lib/$lib.so"
done
cp /usr/bin/protoc "$dir/bin/protoc"
# pkg-config files with the prefix rewritten (used where pkg-config exists).
for pc in protobuf re2; do
  { echo "prefix=\${pcfiledir}/../.."
    sed -e "/^prefix=/d" -e "s#^includedir=.*#includedir=\${prefix}/include#" \
        -e "s#^libdir=.*#libdir=\${prefix}/lib#" "$libdir/pkgconfig/$pc.pc"; } >"$dir/lib/pkgconfig/$pc.pc"
done
cat >"$dir/env.sh" <<'ENV'
# Source this file to build and run smelt's ONNX layer against this folder's protobuf and RE2.
_devkit="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export CMAKE_PREFIX_PATH="$_devkit${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export PKG_CONFIG_PATH="$_devkit/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$_devkit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$_devkit/bin:$PATH"
ENV
echo "devkit.sh: $(du -sh "$dir" | cut -f1) in $dir (source $dir/env.sh)"
