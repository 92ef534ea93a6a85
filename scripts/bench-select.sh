#!/usr/bin/env bash
# Opening and selecting a stage of a schema 2 package: a 94-layer,
# ~850-tensor model with a 152k-token vocabulary (a ~3.5 MB metadata
# carrier, as a real model's), written by write-package --schema 2 under
# /tmp. Prints the in-process open + select (skippy-bench-catalog, target
# < 10 ms), then the whole `select --json` process (target < 20 ms) beside
# `--version` (process start alone: the floor), minimum and median of 21.
# Usage: scripts/bench-select.sh
# Environment: SKIPPY_BENCH_SKIP_DEPS=1, SKIPPY_BENCH_SKIP_BUILD=1,
#   SKIPPY_BENCH_BUILD (default build-bench), SKIPPY_BENCH_DIR (default
#   /tmp/skippy-bench-select, must be under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${SKIPPY_BENCH_BUILD:-build-bench}
WORK=${SKIPPY_BENCH_DIR:-/tmp/skippy-bench-select}
case "$WORK" in /tmp/?*) ;; *) echo "SKIPPY_BENCH_DIR must be under /tmp" >&2; exit 2 ;; esac
if [ "${SKIPPY_BENCH_SKIP_DEPS:-0}" != 1 ]; then bash scripts/install-deps.sh; fi
if [ "${SKIPPY_BENCH_SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSKIPPY_BUILD_TESTS=OFF -DSKIPPY_BUILD_BENCH=ON >/dev/null
  cmake --build "$BUILD" -j2 --target skippy-bench-catalog skippy-make-model skippy-model-package >/dev/null
fi
CLI="$BUILD/bin/skippy-model-package"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the cores slows every figure)"

mkdir -p "$WORK"
"$BUILD/bin/skippy-make-model" "$WORK/m94.gguf" --size 160MiB --layers 94 --vocab 151936 --reuse -q >/dev/null
if [ ! -f "$WORK/pkg/model-package.json" ] || [ "$WORK/m94.gguf" -nt "$WORK/pkg/model-package.json" ]; then
  rm -rf "$WORK/pkg"
  "$CLI" write-package "$WORK/m94.gguf" --schema 2 --out-dir "$WORK/pkg" --model-id bench/m94:Q8_0 \
    --source-revision r --source-file m94.gguf >/dev/null
fi
# Scratch caches: the first run below is the one that may record the carrier.
export SKIPPY_CACHE_DIR="$WORK/cache" HF_HOME="$WORK/hf" HF_HUB_OFFLINE=1
echo "carrier: $(stat -c %s "$WORK/pkg/shared/metadata.gguf") bytes"
"$BUILD/bin/skippy-bench-catalog" "$WORK/pkg" 21

# min and median wall time (ms) of 21 runs of a command, after one warm-up.
wall() {
  "$@" >/dev/null
  local times=() s
  for _ in $(seq 21); do
    s=$(date +%s%N)
    "$@" >/dev/null
    times+=($(( ($(date +%s%N) - s) / 1000 )))
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END { printf "min %6.2f ms  median %6.2f ms", a[1] / 1000, a[11] / 1000 }'
}
echo "process --version (the floor)       $(wall "$CLI" --version)"
echo "process select --layers 0..47 --json $(wall "$CLI" select "$WORK/pkg" --layers 0..47 --json) (target < 20 ms)"
