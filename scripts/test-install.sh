#!/usr/bin/env bash
# cmake --install into a fresh prefix, check the CLI (bin/, with its man
# page) runs from there, then build a C program (pkg-config --static) and a
# C++ program (find_package(skippy)) out of tree against that prefix only,
# and run both on a package the installed CLI writes from a bundled fixture.
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

# The CLI, on PATH as every --help example assumes, and its man page
# (help2man comes with scripts/install-deps.sh).
cli="$prefix/bin/skippy-model-package"
version="$(PATH="$prefix/bin:/usr/bin:/bin" skippy-model-package --version)"
[[ "$version" == "skippy-model-package "[0-9]* ]] || { echo "install: unexpected --version: $version" >&2; exit 1; }
man1="$prefix/share/man/man1/skippy-model-package.1"
grep -q '^\.TH SKIPPY-MODEL-PACKAGE "\?1' "$man1" || { echo "install: no man page at $man1" >&2; exit 1; }
grep -q '^\.SS write-package' "$man1" || { echo "install: the man page lacks the subcommands" >&2; exit 1; }

# The C API header compiles as C99 on its own.
echo '#include <skippy/skippy.h>' | cc -std=c99 -Wall -Wextra -Wpedantic -Werror -I"$prefix/include" -x c -c - -o /dev/null

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
cc -std=c99 -Wall -Wextra -Werror $(pkg-config --cflags skippy) tests/install/consumer.c \
   -o "$work/consumer-c" $(pkg-config --static --libs skippy)

cmake -S tests/install -B "$work/cxx" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cxx" >/dev/null

pkg="$work/pkg"
"$cli" write-package tests/data/llama-tiny-q8_0.gguf --out-dir "$pkg" \
  --model-id org/llama-tiny:Q8_0 --source-revision 0123abc --source-file llama-tiny-q8_0.gguf >/dev/null
export SKIPPY_CACHE_DIR="$work/cache" HF_HUB_OFFLINE=1
"$work/consumer-c" "$pkg" 0 3
"$work/cxx/consumer" "$pkg" 3..8
echo "install: $version and its man page run from $prefix; the C and C++ consumers built against it load a stage"
