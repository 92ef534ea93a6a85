#!/usr/bin/env bash
# cmake --install into a fresh prefix, then build a C program (pkg-config
# --static) and a C++ program (find_package(skippy)) out of tree against that
# prefix only, and run both on a package written from a bundled fixture.
#   usage: scripts/test-install.sh [BUILD_DIR]   (default: build, already built)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-build}"
work="$(mktemp -d /tmp/skippy-install-test.XXXXXX)"
trap 'rm -rf "$work"' EXIT
prefix="$work/prefix"

cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix/include/skippy/skippy.h"
test -f "$prefix/lib/libskippy.a"
test -f "$prefix/lib/cmake/skippy/skippyConfig.cmake"
test -f "$prefix/lib/pkgconfig/skippy.pc"

# The C API header compiles as C99 on its own.
echo '#include <skippy/skippy.h>' | cc -std=c99 -Wall -Wextra -Wpedantic -Werror -I"$prefix/include" -x c -c - -o /dev/null

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -std=c99 -Wall -Wextra -Werror $(pkg-config --cflags skippy) tests/install/consumer.c \
   -o "$work/consumer-c" $(pkg-config --static --libs skippy)

cmake -S tests/install -B "$work/cxx" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cxx" >/dev/null

pkg="$work/pkg"
"$build/bin/skippy-model-package" write-package tests/data/llama-tiny-q8_0.gguf --out-dir "$pkg" \
  --model-id org/llama-tiny:Q8_0 --source-revision 0123abc --source-file llama-tiny-q8_0.gguf >/dev/null
export SKIPPY_CACHE_DIR="$work/cache" HF_HUB_OFFLINE=1
"$work/consumer-c" "$pkg" 0 3
"$work/cxx/consumer" "$pkg" 3..8
echo "install: the C and C++ consumers built against $prefix load a stage"
