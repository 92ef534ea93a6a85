#!/usr/bin/env bash
# The memory-aware planning benchmark: builds Release into
# build-bench/, runs skippy-bench-plan (in-process: a 94-layer model over 8
# nodes at a 32k context, target < 20 ms), then times the whole
# `plan --context ... --budgets x8 --bandwidth x8 --json` process on a real
# 94-layer package written by write-package (median of 11, process start
# included). Usage: scripts/bench-plan.sh
# Environment: SKIPPY_BENCH_SKIP_DEPS=1, SKIPPY_BENCH_SKIP_BUILD=1,
#   SKIPPY_BENCH_DIR (default /tmp/skippy-bench-plan, must be under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-bench
WORK=${SKIPPY_BENCH_DIR:-/tmp/skippy-bench-plan}
case "$WORK" in /tmp/?*) ;; *) echo "SKIPPY_BENCH_DIR must be under /tmp" >&2; exit 2 ;; esac
if [ "${SKIPPY_BENCH_SKIP_DEPS:-0}" != 1 ]; then bash scripts/install-deps.sh; fi
if [ "${SKIPPY_BENCH_SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSKIPPY_BUILD_TESTS=OFF -DSKIPPY_BUILD_BENCH=ON >/dev/null
  cmake --build "$BUILD" -j2 --target skippy-bench-plan skippy-make-model skippy-model-package >/dev/null
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the cores slows every figure)"
"$BUILD/bin/skippy-bench-plan" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true

mkdir -p "$WORK"
"$BUILD/bin/skippy-make-model" "$WORK/m94.gguf" --size 96MiB --layers 94 --reuse -q >/dev/null
rm -rf "$WORK/pkg"
"$BUILD/bin/skippy-model-package" write-package "$WORK/m94.gguf" --out-dir "$WORK/pkg" --model-id bench/m94:Q8_0 \
  --source-revision r --source-file m94.gguf >/dev/null
args=(plan "$WORK/pkg" --context 32768 --budgets 512MiB,512MiB,512MiB,512MiB,640MiB,640MiB,768MiB,768MiB
      --headroom-cap 1MiB --bandwidth 400GB/s,400GB/s,273GB/s,273GB/s,546GB/s,546GB/s,800GB/s,800GB/s --json)
"$BUILD/bin/skippy-model-package" "${args[@]}" >/dev/null  # warm-up; fails loudly if it does not fit
times=()
for _ in $(seq 11); do
  s=$(date +%s%N)
  "$BUILD/bin/skippy-model-package" "${args[@]}" >/dev/null
  times+=($(( ($(date +%s%N) - s) / 1000 )))
done
median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n 6p)
awk -v us="$median" 'BEGIN { printf "plan process, 94-layer package, 8 nodes, --context 32768 --bandwidth: %.1f ms (median of 11, process start included; target < 20 ms)\n", us / 1000 }'
rm -rf "$WORK/pkg"
