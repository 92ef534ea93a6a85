# Sourced by scripts/test.sh --sanitize and scripts/fuzz.sh --ci: the one
# sanitizer build tree, so the fuzz run reuses what the sanitizer tests
# built. clang, AddressSanitizer + UndefinedBehaviorSanitizer, libFuzzer
# coverage in every library (SKIPPY_BUILD_FUZZ), warnings as errors.
# -O1 with line tables only: ASan's own advice (-O0 runs the suite 1.4x
# slower), and stack traces still name file and line.
SANITIZER_BUILD=build-asan
configure_sanitizer_build() {
  local opt="-O1 -gline-tables-only"
  cmake -S . -B "$SANITIZER_BUILD" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt" \
    -DSKIPPY_WERROR=ON -DSKIPPY_SANITIZE=ON -DSKIPPY_BUILD_FUZZ=ON -DSKIPPY_BUILD_TESTS=ON -DSKIPPY_BUILD_BENCH=OFF >/dev/null
}

# ThreadSanitizer (scripts/test.sh --tsan): its own tree, clang, the same
# -O1 line tables. Tests and the CLI they run are built with it, so the
# threads of serve-artifacts, fetch --peer, write-package's pipeline and the
# parallel hashing run checked.
TSAN_BUILD=build-tsan
configure_tsan_build() {
  local opt="-O1 -gline-tables-only"
  cmake -S . -B "$TSAN_BUILD" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$opt" -DCMAKE_C_FLAGS_RELWITHDEBINFO="$opt" \
    -DSKIPPY_WERROR=ON -DSKIPPY_TSAN=ON -DSKIPPY_BUILD_TESTS=ON -DSKIPPY_BUILD_BENCH=OFF >/dev/null
}
