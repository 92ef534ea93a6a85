#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the main job on the
# bundled default model: inspect it, write a layer package, validate it, plan
# two stages and materialize the first one (derived cache).
# Usage: scripts/demo.sh [MODEL.gguf] [WORK_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --run-only  # the CLI's dependencies only (no test toolchain)
# One build tree with scripts/test.sh; without the test frameworks (a machine
# that ran only this script) the tests and benchmarks are not configured.
tests=ON
dpkg-query -W -f='${Status}' libgtest-dev 2>/dev/null | grep -q 'install ok installed' &&
  dpkg-query -W -f='${Status}' libbenchmark-dev 2>/dev/null | grep -q 'install ok installed' || tests=OFF
cmake -S . -B build -G Ninja -DSKIPPY_WERROR=ON -DCMAKE_BUILD_TYPE=Release \
  -DSKIPPY_BUILD_TESTS=$tests -DSKIPPY_BUILD_BENCH=$tests >/dev/null
cmake --build build -j2 --target skippy-model-package

cli=build/bin/skippy-model-package
model=${1:-tests/data/llama-tiny-q8_0.gguf}
work=${2:-/tmp/skippy-demo}
pkg="$work/package"
mkdir -p "$work"

echo "== inspect $model"
"$cli" inspect "$model"
echo
echo "== write-package -> $pkg"
"$cli" write-package "$model" --out-dir "$pkg" --force \
  --model-id "local/$(basename "$model" .gguf):default" \
  --source-revision "local" --source-file "$(basename "$model")"
echo
echo "== validate-package"
"$cli" validate-package "$model" "$pkg"
echo
echo "== plan --stages 2"
"$cli" plan "$pkg" --stages 2
echo
plan_json=$("$cli" plan "$pkg" --stages 2 --json)
start=$(printf '%s\n' "$plan_json" | grep -m1 '"layer_start"' | tr -dc '0-9')
end=$(printf '%s\n' "$plan_json" | grep -m1 '"layer_end"' | tr -dc '0-9')
first="$start..$end"
echo "== select + verify + materialize stage $first"
"$cli" select "$pkg" --layers "$first"
SKIPPY_CACHE_DIR="$work/cache" "$cli" verify "$pkg" --layers "$first"
SKIPPY_CACHE_DIR="$work/cache" "$cli" materialize "$pkg" --layers "$first"
