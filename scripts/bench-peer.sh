#!/usr/bin/env bash
# Peer cache transfer benchmark (not run by CI): the throughput of a >= 1 GiB
# artifact over loopback through serve-artifacts and the client library
# (TLS 1.3 with mutual authentication, the server's verification cache, the
# client's SHA-256 of every byte against the manifest, written to a file),
# against a plain TCP copy of the same file on the same loopback in the same
# run (read/write in 1 MiB chunks on both sides, no TLS, no hashing, written
# to a file too); then 4 parts at once, both ways.
#
# Usage: scripts/bench-peer.sh
# Environment: SKIPPY_BENCH_PEER_DIR (default /tmp/skippy-bench-peer; must be
#   under /tmp), SKIPPY_BENCH_PEER_BIG (bytes of the single artifact, default
#   1 GiB), SKIPPY_BENCH_PEER_PART (bytes of each of the 4 parts, default
#   512 MiB), SKIPPY_BENCH_RUNS (timed runs after one warm-up, default 3;
#   medians), SKIPPY_BENCH_SKIP_DEPS=1, SKIPPY_BENCH_SKIP_BUILD=1.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build-bench
BIN=$BUILD/bin
CLI=$BIN/skippy-model-package
TOOL=$BIN/skippy-bench-peer
WORK=${SKIPPY_BENCH_PEER_DIR:-/tmp/skippy-bench-peer}
BIG=${SKIPPY_BENCH_PEER_BIG:-1073741824}
PART=${SKIPPY_BENCH_PEER_PART:-536870912}
RUNS=${SKIPPY_BENCH_RUNS:-3}
case "$WORK" in
  /tmp/?*) ;;
  *) echo "SKIPPY_BENCH_PEER_DIR must be under /tmp (got $WORK)" >&2; exit 2 ;;
esac

section() { printf '\n== %s\n' "$*"; }
note() { printf '   %s\n' "$*"; }

if [ "${SKIPPY_BENCH_SKIP_DEPS:-0}" != 1 ]; then
  section "dependencies"
  bash scripts/install-deps.sh
fi
mkdir -p "$WORK"
if [ "${SKIPPY_BENCH_SKIP_BUILD:-0}" != 1 ]; then
  section "build (Release, $BUILD)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSKIPPY_BUILD_TESTS=OFF -DSKIPPY_BUILD_BENCH=ON \
    >"$WORK/cmake.log" 2>&1 || { tail -n 30 "$WORK/cmake.log"; exit 1; }
  cmake --build "$BUILD" -j2 --target skippy-model-package skippy-bench-peer >"$WORK/build.log" 2>&1 ||
    { grep -E 'error|FAILED' "$WORK/build.log" | head -n 30; exit 1; }
  note ok
fi

PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

section "data ($WORK)"
rm -rf "$WORK/ids" "$WORK/hf" "$WORK/src-pkg" "$WORK/out" "$WORK/cache"
"$CLI" identity init-owner --dir "$WORK/ids/owner" >/dev/null 2>&1
"$CLI" identity issue-node --owner "$WORK/ids/owner" --out "$WORK/ids/coord" >/dev/null 2>&1
WORKER_ID=$("$CLI" identity issue-node --owner "$WORK/ids/owner" --out "$WORK/ids/worker" 2>/dev/null)
"$CLI" write-package tests/data/llama-tiny-q8_0.gguf --out-dir "$WORK/src-pkg" --model-id bench/tiny:Q8_0 \
  --source-revision 0123abc --source-file llama-tiny-q8_0.gguf >/dev/null
SNAP=$("$TOOL" prepare --from "$WORK/src-pkg" --hf "$WORK/hf" --node-id "$WORKER_ID" --topology "$WORK/topology.json" \
  --big "$BIG" --part "$PART" --parts 4)
FILES=()
for i in 0 1 2 3 4; do FILES+=("$SNAP/layers/layer-0000$i.gguf"); done
note "layer 0: $BIG bytes; layers 1-4: $PART bytes each (noise), in a Hugging Face cache layout"
sync                           # no writeback of the new data during the timed runs
cat "${FILES[@]}" >/dev/null  # page cache warm for both senders

section "servers (127.0.0.1)"
MESH_LLM_ARTIFACT_TRANSFER=trusted HF_HUB_CACHE="$WORK/hf" SKIPPY_CACHE_DIR="$WORK/cache" \
  "$CLI" serve-artifacts --listen 127.0.0.1:0 --topology "$WORK/topology.json" --identity "$WORK/ids/coord" \
  >"$WORK/server.out" 2>"$WORK/server.log" &
SERVER_PID=$!
PIDS+=($SERVER_PID)
"$TOOL" plain-serve "${FILES[@]}" >"$WORK/plain.out" 2>"$WORK/plain.log" &
PLAIN_PID=$!
PIDS+=($PLAIN_PID)
# serve-artifacts verifies the cached artifacts at start (once; afterwards
# every request is a verification-cache hit): wait for that to finish.
T0=$(date +%s)
for ((i = 0; i < 6000; i++)); do
  [ -s "$WORK/server.out" ] && [ -s "$WORK/plain.out" ] && grep -q preverified "$WORK/server.log" && break
  sleep 0.1
done
PEER_EP=$(head -n 1 "$WORK/server.out")
PLAIN_EP=$(head -n 1 "$WORK/plain.out")
note "serve-artifacts $PEER_EP ($(grep preverified "$WORK/server.log" | sed 's/^serve-artifacts: //') in $(($(date +%s) - T0)) s)"
note "plain TCP sender $PLAIN_EP"
[ -n "$PEER_EP" ] && [ -n "$PLAIN_EP" ] || { cat "$WORK/server.log"; exit 1; }

seconds() { sed -n 's/.*"seconds": \([0-9.e+-]*\).*/\1/p'; }
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
prep() { rm -rf "$WORK/out"; sync; }
cpu_of() { awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$1/stat"; }  # utime + stime, seconds
PEER_FETCH=("$TOOL" fetch --mode peer --endpoint "$PEER_EP" --identity "$WORK/ids/worker" --topology "$WORK/topology.json"
  --manifest "$SNAP/model-package.json" --out "$WORK/out")
PLAIN_FETCH=("$TOOL" fetch --mode plain --endpoint "$PLAIN_EP" --out "$WORK/out")

# measure NAME SERVER_PID CMD...: one warm-up, then $RUNS timed runs. M = median
# wall seconds of the transfers; MC / MS = median CPU seconds (user + system)
# of the receiving process and of the sending server during them.
measure() {
  local name=$1 pid=$2 i t c0 c1 walls=() ccpu=() scpu=()
  shift 2
  for ((i = 0; i <= RUNS; i++)); do
    prep
    c0=$(cpu_of "$pid")
    t=$(/usr/bin/time -f '%U %S' -o "$WORK/time.txt" "$@" | seconds)
    c1=$(cpu_of "$pid")
    [ -n "$t" ] || { echo "FAILED: $name" >&2; tail -n 5 "$WORK/server.log" >&2; exit 1; }
    ((i == 0)) && continue
    walls+=("$t")
    ccpu+=("$(awk '{ print $1 + $2 }' "$WORK/time.txt")")
    scpu+=("$(awk -v a="$c0" -v b="$c1" 'BEGIN { print b - a }')")
  done
  M=$(printf '%s\n' "${walls[@]}" | median)
  MC=$(printf '%s\n' "${ccpu[@]}" | median)
  MS=$(printf '%s\n' "${scpu[@]}" | median)
  note "$name: runs ${walls[*]} s, median $M s; CPU: receiver $MC s, sender $MS s"
}
gbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.2f GB/s", b / s / 1e9 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

section "crypto yardsticks (openssl speed, 16 KiB blocks, one core, now)"
speed() { openssl speed -seconds 2 -bytes 16384 -evp "$1" 2>/dev/null | awk 'tolower($1) ~ /^(aes|sha|chacha)/ { printf "%.2f", $NF / 1e6 }'; }
AES_GBPS=$(speed aes-128-gcm)
AES256_GBPS=$(speed aes-256-gcm)
CHACHA_GBPS=$(speed chacha20-poly1305)
SHA_GBPS=$(speed sha256)
note "AES-128-GCM $AES_GBPS GB/s (the suite both sides prefer; AES-256-GCM $AES256_GBPS, ChaCha20-Poly1305 $CHACHA_GBPS)"
note "SHA-256 $SHA_GBPS GB/s (a transfer costs one AES-GCM pass per side and one SHA-256 pass on the client)"

section "one artifact of $BIG bytes (median of $RUNS after a warm-up)"
measure "peer (TLS 1.3 + verification)" "$SERVER_PID" "${PEER_FETCH[@]}" --rel layers/layer-00000.gguf
PEER1=$M PEER1_CPU=$(awk -v a="$MC" -v b="$MS" 'BEGIN { print a + b }')
measure "plain TCP copy" "$PLAIN_PID" "${PLAIN_FETCH[@]}" --index 0
PLAIN1=$M PLAIN1_CPU=$(awk -v a="$MC" -v b="$MS" 'BEGIN { print a + b }')
measure "peer without the client's SHA-256 (for the breakdown)" "$SERVER_PID" "${PEER_FETCH[@]}" --rel layers/layer-00000.gguf --no-hash
NOHASH1=$M
R1=$(ratio "$PLAIN1" "$PEER1")
note "peer $(gbps "$BIG" "$PEER1"), plain $(gbps "$BIG" "$PLAIN1"): peer / plain throughput = $R1 (target >= 0.7)"
note "CPU seconds for the GiB, both processes: peer $PEER1_CPU, plain $PLAIN1_CPU (ratio $(ratio "$PLAIN1_CPU" "$PEER1_CPU"))"
RN=$(ratio "$PLAIN1" "$NOHASH1")
note "without the client's SHA-256: $(gbps "$BIG" "$NOHASH1"), / plain = $RN"

section "4 parts of $PART bytes at once"
measure "peer, 4 at once" "$SERVER_PID" "${PEER_FETCH[@]}" --rel layers/layer-00001.gguf --rel layers/layer-00002.gguf \
  --rel layers/layer-00003.gguf --rel layers/layer-00004.gguf
PEER4=$M
measure "plain TCP, 4 at once" "$PLAIN_PID" "${PLAIN_FETCH[@]}" --index 1 --index 2 --index 3 --index 4
PLAIN4=$M
R4=$(ratio "$PLAIN4" "$PEER4")
TOTAL4=$((PART * 4))
note "peer $(gbps "$TOTAL4" "$PEER4"), plain $(gbps "$TOTAL4" "$PLAIN4"): peer / plain throughput = $R4"
rm -rf "$WORK/out"

section "summary ($(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg))"
printf '   %-34s %-12s %-12s %-8s %s\n' figure peer plain ratio target
printf '   %-34s %-12s %-12s %-8s %s\n' "1 artifact, $BIG B" "$(gbps "$BIG" "$PEER1")" "$(gbps "$BIG" "$PLAIN1")" "$R1" ">= 0.7"
printf '   %-34s %-12s %-12s %-8s %s\n' "  CPU s, both processes" "$PEER1_CPU" "$PLAIN1_CPU" "$(ratio "$PLAIN1_CPU" "$PEER1_CPU")" "(breakdown)"
printf '   %-34s %-12s %-12s %-8s %s\n' "  same, no client SHA-256" "$(gbps "$BIG" "$NOHASH1")" "$(gbps "$BIG" "$PLAIN1")" "$RN" "(breakdown)"
printf '   %-34s %-12s %-12s %-8s %s\n' "4 parts at once, 4 x $PART B" "$(gbps "$TOTAL4" "$PEER4")" "$(gbps "$TOTAL4" "$PLAIN4")" "$R4" "-"

# What the peer path cannot avoid for one artifact: the kernel copies the
# plain copy makes too (its measured CPU: read + send, receive + write), one
# more memcpy on the client out of OpenSSL's record buffer (estimated as a
# quarter of those four copies), AES-GCM on each side and the client's
# SHA-256. Spread over every core, and never less than the client's hashing
# thread alone (SHA-256 plus its write), that is the best wall time.
section "CPU floor of the peer path for the $BIG-byte artifact (from the figures above)"
read -r F_COPY F_AES F_SHA FLOOR FLOOR_WALL BEST < <(awk -v p="$PLAIN1_CPU" -v b="$BIG" -v aes="$AES_GBPS" \
  -v sha="$SHA_GBPS" -v n="$(nproc)" -v pw="$PLAIN1" 'BEGIN {
    copy = p * 1.25; a = 2 * b / (aes * 1e9); s = b / (sha * 1e9); f = copy + a + s
    w = f / n; if (s + p / 4 > w) w = s + p / 4
    printf "%.2f %.2f %.2f %.2f %.2f %.2f\n", copy, a, s, f, w, pw / w }')
note "copies $F_COPY + AES-GCM both sides $F_AES + SHA-256 $F_SHA = $FLOOR CPU s; on $(nproc) free cores at best $FLOOR_WALL s"
note "best peer / plain ratio this machine allows: $BEST (measured $R1); the peer used $PEER1_CPU CPU s, $(ratio "$PEER1_CPU" "$FLOOR") x the floor"
