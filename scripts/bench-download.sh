#!/usr/bin/env bash
# Download benchmark (not run by CI): `fetch` of a stage dominated
# by one large file from the local Hub stand-in (tests/hub, Node on
# 127.0.0.1, LFS files redirected to its storage listener) into an empty
# Hugging Face cache (SHA-256 verified, fsynced, linked), against curl
# fetching the same files from the same stand-in over one connection, in
# the same run:
#   1. storage capped at 40 MB/s per connection (a CDN edge): target >= 4x curl;
#   2. no cap: target >= 0.9x curl (the machinery costs nothing); beside it,
#      without targets, the same fetch against curl followed by what fetch
#      also does (openssl dgst -sha256 of the files, then sync of them), and
#      against fetch --connections 1 (the ranged engine against one stream).
# It builds Release into build-bench/, makes a synthetic llama GGUF whose
# embeddings table is >= 100 MB (a large vocabulary), writes its layer
# package, and reports medians.
#
# Usage: scripts/bench-download.sh
# Environment: SKIPPY_BENCH_DL_DIR (default /tmp/skippy-bench-dl; must be
#   under /tmp), SKIPPY_BENCH_RUNS (timed runs after one warm-up, default 3),
#   SKIPPY_BENCH_CAP (bytes/s per connection, default 40000000),
#   SKIPPY_BENCH_CONNECTIONS (fetch --connections, default: fetch's own),
#   SKIPPY_BENCH_SKIP_DEPS=1, SKIPPY_BENCH_SKIP_BUILD=1 (with
#   SKIPPY_BENCH_BUILD_DIR: use the binaries of an existing optimized build).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${SKIPPY_BENCH_BUILD_DIR:-$ROOT/build-bench}
BIN=$BUILD/bin
CLI=$BIN/skippy-model-package
WORK=${SKIPPY_BENCH_DL_DIR:-/tmp/skippy-bench-dl}
RUNS=${SKIPPY_BENCH_RUNS:-3}
CAP=${SKIPPY_BENCH_CAP:-40000000}
CONN_ARGS=()
[ -n "${SKIPPY_BENCH_CONNECTIONS:-}" ] && CONN_ARGS=(--connections "$SKIPPY_BENCH_CONNECTIONS")
case "$WORK" in
  /tmp/?*) ;;
  *) echo "SKIPPY_BENCH_DL_DIR must be under /tmp (got $WORK)" >&2; exit 2 ;;
esac
mkdir -p "$WORK/logs"

section() { printf '\n== %s\n' "$*"; }
note() { printf '   %s\n' "$*"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
mbps() { awk -v b="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.0f MB/s", b / s / 1e6; else print "n/a" }'; }

if [ "${SKIPPY_BENCH_SKIP_DEPS:-0}" != 1 ]; then
  section "dependencies"
  bash scripts/install-deps.sh
fi
if [ "${SKIPPY_BENCH_SKIP_BUILD:-0}" != 1 ]; then
  section "build (Release, $BUILD)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSKIPPY_BUILD_TESTS=OFF -DSKIPPY_BUILD_BENCH=ON \
    >"$WORK/cmake.log" 2>&1 || { tail -n 30 "$WORK/cmake.log"; exit 1; }
  cmake --build "$BUILD" -j2 --target skippy-model-package skippy-make-model >"$WORK/build.log" 2>&1 ||
    { grep -E 'error|FAILED' "$WORK/build.log" | head -n 30; exit 1; }
  note ok
fi
command -v node >/dev/null || { echo "needs node (the Hub stand-in)" >&2; exit 1; }
command -v curl >/dev/null || { echo "needs curl (the yardstick)" >&2; exit 1; }

section "data ($WORK)"
# Vocabulary 65536 x width 2048 in Q8_0: a 142 MB embeddings table; eight
# small layers. Stage 0..1 is the metadata, the embeddings and layer 0.
MODEL=$WORK/model.gguf
"$BIN/skippy-make-model" "$MODEL" --size 360MiB --layers 8 --embd 2048 --vocab 65536 --reuse -q >/dev/null
PKG=$WORK/pkg
if [ ! -f "$PKG/model-package.json" ] || [ "$MODEL" -nt "$PKG/model-package.json" ]; then
  rm -rf "$PKG"
  "$CLI" write-package "$MODEL" --out-dir "$PKG" --model-id bench/dl:Q8_0 --source-revision r \
    --source-file model.gguf >/dev/null
fi

HUB_PID=""
stop_hub() { exec 7>&- 2>/dev/null || true; [ -n "$HUB_PID" ] && wait "$HUB_PID" 2>/dev/null || true; HUB_PID=""; }
trap stop_hub EXIT
fifo=$WORK/hub.fifo
rm -f "$fifo" "$WORK/logs/hub.out" && mkfifo "$fifo"
node tests/hub/hub_standin.mjs <"$fifo" >"$WORK/logs/hub.out" 2>"$WORK/logs/hub.err" &
HUB_PID=$!
exec 7>"$fifo"
for ((i = 0; i < 100; i++)); do [ -s "$WORK/logs/hub.out" ] && break; sleep 0.1; done
EP=$(sed -n 's/.*"endpoint":"\([^"]*\)".*/\1/p' "$WORK/logs/hub.out")
[ -n "$EP" ] || { echo "the stand-in did not start: $(cat "$WORK/logs/hub.err")" >&2; exit 1; }
COMMIT=$(curl -sf -X POST "$EP/_admin/repos" -d "{\"repo\":\"bench/dl\",\"dir\":\"$PKG\"}" |
  sed -n 's/.*"commit":"\([0-9a-f]*\)".*/\1/p')
[ -n "$COMMIT" ] || { echo "publishing to the stand-in failed" >&2; exit 1; }
configure() { curl -sf -X POST "$EP/_admin/config" -d "$1" >/dev/null; }

HF=$WORK/hf
CURL_DIR=$WORK/curl
export SKIPPY_CACHE_DIR=$WORK/cache
# What the stage downloads (the fetch's own list), for curl to fetch too.
rm -rf "$HF" "$SKIPPY_CACHE_DIR"
env HF_ENDPOINT="$EP" HF_HUB_CACHE="$HF" HF_TOKEN= "$CLI" fetch "hf://bench/dl@$COMMIT" --layers 0..1 --json \
  >"$WORK/logs/list.json" 2>"$WORK/logs/list.err" || { cat "$WORK/logs/list.err" >&2; exit 1; }
mapfile -t FILES < <(python3 -c 'import json,sys; [print(p) for p in json.load(open(sys.argv[1]))["downloaded"]]' \
  "$WORK/logs/list.json")
URLS=()
BYTES=0
for rel in "${FILES[@]}"; do
  URLS+=(-o "$CURL_DIR/${rel//\//_}" "$EP/bench/dl/resolve/$COMMIT/$rel")
  BYTES=$((BYTES + $(stat -c %s "$PKG/$rel")))
done
BIGGEST=$(for rel in "${FILES[@]}"; do stat -c '%s %n' "$PKG/$rel"; done | sort -n | tail -n 1)
note "load average: $(cut -d' ' -f1-3 /proc/loadavg) (other work on these cores shows in every figure)"
note "stage 0..1: ${#FILES[@]} files, $BYTES bytes; the largest: ${BIGGEST#*"$PKG/"} (${BIGGEST%% *} bytes)"

# median SECONDS... -> the middle one
median() { printf '%s\n' "$@" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
timed() {  # CMD...: T = wall seconds
  local s e
  s=$(date +%s%N)
  "$@" >"$WORK/logs/last.out" 2>"$WORK/logs/last.err" || { note "FAILED: $*"; tail -n 5 "$WORK/logs/last.err"; return 1; }
  e=$(date +%s%N)
  T=$(awk -v a="$s" -v b="$e" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
}
run_fetch() {
  rm -rf "$HF" "$SKIPPY_CACHE_DIR"
  sync
  timed env HF_ENDPOINT="$EP" HF_HUB_CACHE="$HF" HF_TOKEN= "$CLI" fetch "hf://bench/dl@$COMMIT" --layers 0..1 \
    "${CONN_ARGS[@]}" --json
}
# curl: the same files, one after another over one connection (-L follows
# the Hub's redirect to storage), written to files.
run_curl() {
  rm -rf "$CURL_DIR" && mkdir -p "$CURL_DIR"
  sync
  timed curl -sfL --no-progress-meter "${URLS[@]}"
}
# curl, then the SHA-256 of what it wrote and an fsync of it: what fetch does
# beyond downloading (it checks every byte and makes the blobs durable).
run_curl_checked() {
  rm -rf "$CURL_DIR" && mkdir -p "$CURL_DIR"
  sync
  timed bash -c 'curl -sfL --no-progress-meter "$@" && openssl dgst -sha256 "'"$CURL_DIR"'"/* >/dev/null &&
    sync "'"$CURL_DIR"'"/*' _ "${URLS[@]}"
}
run_fetch_one() {
  rm -rf "$HF" "$SKIPPY_CACHE_DIR"
  sync
  timed env HF_ENDPOINT="$EP" HF_HUB_CACHE="$HF" HF_TOKEN= "$CLI" fetch "hf://bench/dl@$COMMIT" --layers 0..1 \
    --connections 1 --json
}
# compare LABEL A B: medians of two commands' times (interleaved runs), A_T, B_T.
compare() {
  local i a=() b=()
  for ((i = 0; i <= RUNS; i++)); do
    "$2" || return 1
    ((i > 0)) && a+=("$T")
    "$3" || return 1
    ((i > 0)) && b+=("$T")
  done
  A_T=$(median "${a[@]}")
  B_T=$(median "${b[@]}")
  note "$1: ${A_T} s ($(mbps "$BYTES" "$A_T")) vs ${B_T} s ($(mbps "$BYTES" "$B_T")); runs: ${a[*]} vs ${b[*]}"
}

ROWS=()
check() {  # FIGURE VALUE TARGET
  local st=MISS
  awk -v a="$2" -v b="$3" 'BEGIN { exit !(a >= b) }' && st=ok
  ROWS+=("$(printf '%-52s %8s   >= %-5s %s' "$1" "$2" "$3" "$st")")
}

section "storage capped at $CAP bytes/s per connection (median of $RUNS after a warm-up)"
configure "{\"storage_conn_bytes_per_sec\":$CAP}"
compare "fetch vs curl" run_fetch run_curl
R_CAP=$(ratio "$B_T" "$A_T")
note "fetch throughput / curl (one connection) = $R_CAP"
check "fetch / curl, $((CAP / 1000000)) MB/s per connection" "$R_CAP" 4

section "no cap (median of $RUNS after a warm-up)"
configure '{"storage_conn_bytes_per_sec":0}'
compare "fetch vs curl" run_fetch run_curl
R_FREE=$(ratio "$B_T" "$A_T")
note "fetch throughput / curl (one connection) = $R_FREE"
check "fetch / curl, no cap" "$R_FREE" 0.9
compare "fetch vs curl + openssl dgst + sync" run_fetch run_curl_checked
note "fetch throughput / (curl + dgst + sync) = $(ratio "$B_T" "$A_T") (no target)"
compare "fetch vs fetch --connections 1" run_fetch run_fetch_one
note "fetch throughput / fetch --connections 1 = $(ratio "$B_T" "$A_T") (no target)"

section "summary"
printf '   %-52s %8s   %-8s %s\n' figure value target status
for r in "${ROWS[@]}"; do printf '   %s\n' "$r"; done
rm -rf "$HF" "$CURL_DIR" "$SKIPPY_CACHE_DIR"
