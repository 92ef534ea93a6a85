#!/usr/bin/env bash
# README command 2: install dependencies, build with warnings as errors, run
# every test, then install into a scratch prefix and build a C and a C++
# program against it. Usage: scripts/test.sh [--sanitize]   (clang, ASan +
# UBSan build in build-asan/ (scripts/sanitizer-build.sh), tests only; it
# also builds the fuzz targets that scripts/fuzz.sh --ci then runs)
#        scripts/test.sh --tsan   (clang, ThreadSanitizer build in build-tsan/, tests only)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

build=build
if [ "${1:-}" = "--tsan" ]; then
  source scripts/sanitizer-build.sh
  build=$TSAN_BUILD
  configure_tsan_build
  # second_deadlock_stack: both stacks of a lock-order report; halt at the
  # first report so a race fails the test that hit it.
  export TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$PWD/scripts/tsan.supp
elif [ "${1:-}" = "--sanitize" ]; then
  source scripts/sanitizer-build.sh
  build=$SANITIZER_BUILD
  configure_sanitizer_build
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
else
  # Release (-O2, no debug info): the tests need no debugger, and debug
  # info doubles the compile time of the header-heavy CLI and test files.
  cmake -S . -B "$build" -G Ninja -DSKIPPY_WERROR=ON -DCMAKE_BUILD_TYPE=Release \
    -DSKIPPY_BUILD_TESTS=ON -DSKIPPY_BUILD_BENCH=ON >/dev/null
fi
cmake --build "$build" -j2
# Which tests a tree runs is tests/CMakeLists.txt's to say: the sanitizer
# trees leave out the checks of text (docs, layering), and the TSan tree
# builds only the suites of the code that starts threads.
ctest --test-dir "$build" --output-on-failure -j2
refrt="${SKIPPY_REFRT_DIR:-../shared/refrt}"
if [ "$build" = build ] && [ ! -x "$refrt/bin/skippy-ref-stage" ]; then
  echo "note: no reference stage runtime at $refrt (shared/ beside the clone, or SKIPPY_REFRT_DIR):" \
       "its real-runtime tests were skipped" >&2
fi
if [ "$build" = build ]; then
  bash scripts/test-install.sh "$build"
  # (the README's tour runs in ctest: Docs.TheTourRunsAndLeavesTheShellAsItWas)
fi
