#!/usr/bin/env bash
# The N-gram proposer benchmark: builds Release into build-bench/
# and runs skippy-bench-ngram. Targets, per committed token at an 8k-token
# context: < 1 us for ngram-cache, < 5 us for ngram-suffix.
# Usage: scripts/bench-generation.sh [google-benchmark flags, e.g. --benchmark_repetitions=5]
# Environment: SKIPPY_BENCH_SKIP_DEPS=1, SKIPPY_BENCH_SKIP_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-bench
if [ "${SKIPPY_BENCH_SKIP_DEPS:-0}" != 1 ]; then bash scripts/install-deps.sh; fi
if [ "${SKIPPY_BENCH_SKIP_BUILD:-0}" != 1 ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSKIPPY_BUILD_TESTS=OFF -DSKIPPY_BUILD_BENCH=ON >/dev/null
  cmake --build "$BUILD" -j2 --target skippy-bench-ngram >/dev/null
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the cores slows every figure)"
exec "$BUILD/bin/skippy-bench-ngram" --benchmark_repetitions=3 --benchmark_report_aggregates_only=true "$@"
