#!/usr/bin/env bash
# cmake --install into a fresh prefix, check the CLI (bin/, with its man
# page) runs from there, then build out of tree against that prefix only: a C
# program with the plain pkg-config line (the shared library), the same C
# program linked statically (pkg-config --static), and a C++ program
# (find_package(skippy)); run each on a package the installed CLI writes
# from a bundled fixture. The shared library exports the public API only.
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
version_mm=$(sed -n 's/^project(skippy_model_package VERSION \([0-9]*\.[0-9]*\)\..*/\1/p' CMakeLists.txt)
test -L "$prefix/lib/libskippy.so" && test -L "$prefix/lib/libskippy.so.$version_mm"
soname=$(objdump -p "$prefix/lib/libskippy.so" | awk '$1 == "SONAME" { print $2 }')
[ "$soname" = "libskippy.so.$version_mm" ] || { echo "install: libskippy.so's soname is \"$soname\", not libskippy.so.$version_mm" >&2; exit 1; }
# Only the public API is exported: the C API, and C++ symbols declared in the
# installed headers; nothing of the internal headers (src/util/file.h's
# write_file_atomic, src/util/sha256.h's sha256_file, src/util/env.h) nor of
# the *_detail namespaces.
exports=$(nm -D --defined-only -C "$prefix/lib/libskippy.so")
for want in "T skippy_stage_select" "T skippy_package_open" "skippy::open_package(" "skippy::select_stage(" "skippy::parse_manifest("; do
  grep -qF -- "$want" <<<"$exports" || { echo "install: libskippy.so does not export $want" >&2; exit 1; }
done
names=$(awk '{ $1 = ""; $2 = ""; sub(/^  /, ""); print }' <<<"$exports")  # the demangled names
internal=$(grep -E '^skippy::(detail|[a-z_]+_detail|env)::|^skippy::(write_file_atomic|sha256_file|read_small_file|clean_path)\(' \
  <<<"$names" || true)
if [ -n "$internal" ]; then
  echo "install: libskippy.so exports internal symbols:" >&2
  head -5 <<<"$internal" >&2
  exit 1
fi
# Every installed header is in the list, and no internal header is installed.
installed=$(cd "$prefix/include/skippy" && ls -1 | sort)
listed=$(sed -n '/^set(SKIPPY_PUBLIC_HEADERS/,/^)/p' cmake/public-headers.cmake | grep -E '^[[:space:]]+[a-z0-9_]+\.h$' | tr -d ' ' | sort)
[ "$installed" = "$listed" ] || { echo "install: the installed headers are not cmake/public-headers.cmake's list:" >&2; diff <(echo "$listed") <(echo "$installed") >&2; exit 1; }
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

# Every installed header compiles on its own (no internal header needed).
for h in $installed; do
  [ "$h" = skippy.h ] && continue
  echo "#include <skippy/$h>" | c++ -std=c++20 -fsyntax-only -I"$prefix/include" -x c++ - ||
    { echo "install: <skippy/$h> does not compile on its own against the installed headers" >&2; exit 1; }
done

# The C lines see only our .pc files: the C API needs no other package's.
export PKG_CONFIG_LIBDIR="$prefix/lib/pkgconfig"
c_flags=$(pkg-config --cflags skippy)
case "$c_flags" in *-D*) echo "install: pkg-config --cflags skippy leaks a dependency's defines: $c_flags" >&2; exit 1 ;; esac
# The ordinary line: the shared library.
cc -std=c99 -Wall -Wextra -Werror tests/install/consumer.c -o "$work/consumer-c" $(pkg-config --cflags --libs skippy)
ldd_out=$(LD_LIBRARY_PATH="$prefix/lib" ldd "$work/consumer-c")
grep -q "libskippy.so.$version_mm => $prefix/lib/" <<<"$ldd_out" ||
  { echo "install: the plain pkg-config build does not load $prefix/lib/libskippy.so.$version_mm:" >&2; echo "$ldd_out" >&2; exit 1; }
# The static way: pkg-config --static, with the archive named.
cc -std=c99 -Wall -Wextra -Werror $(pkg-config --cflags skippy) tests/install/consumer.c \
   -o "$work/consumer-c-static" $(pkg-config --static --libs skippy | sed 's/-lskippy\b/-l:libskippy.a/')
static_ldd=$(ldd "$work/consumer-c-static" || true)
if grep -q libskippy <<<"$static_ldd"; then echo "install: the static build loads libskippy.so" >&2; exit 1; fi

unset PKG_CONFIG_LIBDIR
# C++ with pkg-config: skippy-cxx (the system's nlohmann_json.pc beside ours).
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
c++ tests/install/consumer.cpp -o "$work/consumer-cxx-pc" $(pkg-config --cflags --libs skippy-cxx) -Wl,-rpath,"$prefix/lib"
cmake -S tests/install -B "$work/cxx" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/cxx" >/dev/null

pkg="$work/pkg"
"$cli" write-package tests/data/llama-tiny-q8_0.gguf --out-dir "$pkg" \
  --model-id org/llama-tiny:Q8_0 --source-revision 0123abc --source-file llama-tiny-q8_0.gguf >/dev/null
export SKIPPY_CACHE_DIR="$work/cache" HF_HUB_OFFLINE=1
LD_LIBRARY_PATH="$prefix/lib" "$work/consumer-c" "$pkg" 0 3
"$work/consumer-c-static" "$pkg" 0 3
"$work/cxx/consumer" "$pkg" 3..8   # CMake's build RPATH finds libskippy.so
"$work/consumer-cxx-pc" "$pkg" 3..8 >/dev/null
# The same C++ path opens a package schema 2.
"$cli" write-package tests/data/llama-tiny-q8_0.gguf --out-dir "$work/pkg2" --schema 2 \
  --model-id org/llama-tiny:Q8_0 --source-revision 0123abc --source-file llama-tiny-q8_0.gguf >/dev/null
said=$("$work/cxx/consumer" "$work/pkg2" 3..8)
grep -q "(schema 2), .* parts, verified yes" <<<"$said" ||
  { echo "install: the C++ consumer did not load a stage of a package schema 2" >&2; exit 1; }
# (captured first: with pipefail, grep -q leaving early could fail the pipe)
cxx_ldd=$(ldd "$work/cxx/consumer")
grep -q "libskippy.so.$version_mm => $prefix/lib/" <<<"$cxx_ldd" ||
  { echo "install: the find_package(skippy) build does not use the shared library" >&2; exit 1; }
echo "install: $version and its man page run from $prefix; C consumers built with pkg-config (shared, and static)" \
     "and a C++ consumer built with find_package(skippy) load a stage; libskippy.so exports the public API only"
