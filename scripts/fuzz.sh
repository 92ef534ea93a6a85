#!/usr/bin/env bash
# Fuzzes the GGUF reader with libFuzzer (Debian's clang; ASan + UBSan), seeded
# with fuzz/corpus/ (made from the fixtures in tests/data) and fuzz/gguf.dict,
# then the package-level text parsers (manifest, hf:// refs, coordinates,
# etags) seeded with fuzz/corpus-inputs/, then the peer-transfer frame parser
# seeded with fuzz/corpus-peer/ (written by fuzz/peer_seeds.py), then the Xet
# xorb, chunk-range and shard readers seeded with fuzz/corpus-xet/ (written by
# fuzz/xet_seeds.cpp).
#
#   scripts/fuzz.sh --ci     about 60 s (CI: the reader 40 s beside the others 20 s each); fails on any crash, leak,
#                            oversized allocation or timeout
#   scripts/fuzz.sh          the long run: FUZZ_RUNS executions (10,000,000) of the
#                            reader, FUZZ_INPUTS_RUNS (2,000,000) of the text parsers,
#                            FUZZ_PEER_RUNS (5,000,000) of the peer frame parser,
#                            FUZZ_XET_RUNS (2,000,000) of the Xet format readers
#   scripts/fuzz.sh --seeds  regenerates the committed seed corpora fuzz/corpus/ and fuzz/corpus-xet/
#   scripts/fuzz.sh --coverage  replays fuzz/corpus and fuzz/corpus-work through
#                            a source-coverage build (build-fuzz-cov/) and prints
#                            the line and branch coverage of the GGUF reader
#
# Extra arguments go to libFuzzer. Inputs the fuzzer finds go to
# fuzz/corpus-work/ (git-ignored); crashing inputs to build-fuzz/artifacts/
# (build-asan/artifacts/ with --ci, which uses the tree of test.sh --sanitize).
# Reproduce one: build-fuzz/bin/gguf_reader_fuzz build-fuzz/artifacts/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh

mode=long
case "${1:-}" in
  --ci) mode=ci; shift ;;
  --seeds) mode=seeds; shift ;;
  --coverage) mode=coverage; shift ;;
esac

if [ "$mode" = coverage ]; then
  build=build-fuzz-cov
  cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS="-fprofile-instr-generate -fcoverage-mapping" \
    -DCMAKE_EXE_LINKER_FLAGS="-fprofile-instr-generate" \
    -DSKIPPY_BUILD_FUZZ=ON -DSKIPPY_BUILD_TESTS=OFF -DSKIPPY_BUILD_BENCH=OFF >/dev/null
  cmake --build "$build" -j2 --target gguf_reader_fuzz
  rm -f "$build"/*.profraw
  mkdir -p fuzz/corpus-work
  # Given files, libFuzzer runs each once and does not fuzz.
  find fuzz/corpus fuzz/corpus-work -type f -print0 |
    LLVM_PROFILE_FILE="$build/%p.profraw" xargs -0 -n 500 "$build/bin/gguf_reader_fuzz" >/dev/null 2>&1
  llvm-profdata merge -sparse "$build"/*.profraw -o "$build/fuzz.profdata"
  echo "inputs replayed: $(find fuzz/corpus fuzz/corpus-work -type f | wc -l)"
  llvm-cov report "$build/bin/gguf_reader_fuzz" -instr-profile="$build/fuzz.profdata" \
    src/gguf/gguf_reader.cpp src/gguf/ggml_types.cpp
  exit 0
fi

if [ "$mode" = ci ]; then
  # The sanitizer tree of scripts/test.sh --sanitize (CI runs that first):
  # the fuzz targets are built there already.
  source scripts/sanitizer-build.sh
  build=$SANITIZER_BUILD
  configure_sanitizer_build
else
  build=build-fuzz
  cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DSKIPPY_BUILD_FUZZ=ON -DSKIPPY_BUILD_TESTS=OFF -DSKIPPY_BUILD_BENCH=OFF >/dev/null
fi

if [ "$mode" = seeds ]; then
  cmake --build "$build" -j2 --target gguf_fuzz_seeds xet_fuzz_seeds
  rm -rf fuzz/corpus fuzz/corpus-xet
  "$build/bin/gguf_fuzz_seeds" tests/data fuzz/corpus
  "$build/bin/xet_fuzz_seeds" fuzz/corpus-xet
  du -sh fuzz/corpus fuzz/corpus-xet
  exit 0
fi

cmake --build "$build" -j2 --target gguf_reader_fuzz package_inputs_fuzz peer_frames_fuzz xet_formats_fuzz
mkdir -p fuzz/corpus-work fuzz/corpus-inputs-work fuzz/corpus-peer-work fuzz/corpus-xet-work "$build/artifacts"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# -malloc_limit_mb: inputs are at most 64 KiB, so any single allocation over
# 64 MiB means a count was trusted before it was checked.
common=(
  -max_len=65536
  -timeout=10
  -rss_limit_mb=2048
  -malloc_limit_mb=64
  -artifact_prefix="$build/artifacts/"
  -print_final_stats=1
)
flags=(-dict=fuzz/gguf.dict "${common[@]}")
inputs_flags=("${common[@]}")
peer_flags=("${common[@]}")
xet_flags=("${common[@]}")
if [ "$mode" = ci ]; then
  flags+=(-max_total_time="${FUZZ_SECONDS:-40}")
  inputs_flags+=(-max_total_time="${FUZZ_INPUTS_SECONDS:-20}")
  peer_flags+=(-max_total_time="${FUZZ_PEER_SECONDS:-20}")
  xet_flags+=(-max_total_time="${FUZZ_XET_SECONDS:-20}")
else
  flags+=(-runs="${FUZZ_RUNS:-10000000}")
  inputs_flags+=(-runs="${FUZZ_INPUTS_RUNS:-2000000}")
  peer_flags+=(-runs="${FUZZ_PEER_RUNS:-5000000}")
  xet_flags+=(-runs="${FUZZ_XET_RUNS:-2000000}")
fi
# The first corpus directory receives new inputs; fuzz/corpus* only seed.
reader() { "$build/bin/gguf_reader_fuzz" "${flags[@]}" "$@" fuzz/corpus-work fuzz/corpus; }
# The package-level text parsers: model-package.json, hf:// refs, Hub
# coordinates and file names, etags, the schema 2 root and carrier, the
# signature sidecar (fuzz/package_inputs_fuzz.cpp). The peer-transfer frame
# parser: what a server reads from any peer (fuzz/peer_frames_fuzz.cpp). The
# Xet formats a client reads from the CAS: whole xorbs, chunk ranges, upload
# and dedupe shards (fuzz/xet_formats_fuzz.cpp).
others() {
  "$build/bin/package_inputs_fuzz" "${inputs_flags[@]}" "$@" fuzz/corpus-inputs-work fuzz/corpus-inputs &&
    "$build/bin/peer_frames_fuzz" "${peer_flags[@]}" "$@" fuzz/corpus-peer-work fuzz/corpus-peer &&
    "$build/bin/xet_formats_fuzz" "${xet_flags[@]}" "$@" fuzz/corpus-xet-work fuzz/corpus-xet
}
if [ "$mode" = ci ]; then
  # A libFuzzer run uses one core: the reader on one, the other three one
  # after another on the second (40 and 60 s instead of 100 s in a row).
  # Each lane's log is printed whole when it ends.
  lane="$build/artifacts/fuzz-lane-2.log"
  others "$@" > "$lane" 2>&1 &
  pid=$!
  rc_reader=0
  reader "$@" || rc_reader=$?
  rc_others=0
  wait "$pid" || rc_others=$?
  cat "$lane"
  if [ "$rc_reader" != 0 ] || [ "$rc_others" != 0 ]; then
    echo "fuzz: the reader's run exited $rc_reader, the other targets' $rc_others" >&2
    exit 1
  fi
else
  set -x
  reader "$@"
  others "$@"
fi
