#!/usr/bin/env bash
# The benchmark command (not run by CI): installs dependencies, builds Release
# into build-bench/, generates a >= 2 GiB synthetic llama GGUF under
# /tmp/skippy-bench (reused when present and valid), warms the page cache, then
# prints, from this one run on the same data:
#   - the reader's open time (Google Benchmark) beside the model's size;
#   - the yardsticks: cp and openssl dgst -sha256 of the model (medians);
#   - one section per skippy-model-package subcommand that --help lists, with
#     wall time, peak RSS and its ratio against the yardstick for the same bytes;
#   - a summary table against the targets. See bench/README.md.
#
# Usage: scripts/bench.sh
# Environment: SKIPPY_BENCH_DIR (default /tmp/skippy-bench; must be under /tmp),
#   SKIPPY_BENCH_SIZE (default 2GiB), SKIPPY_BENCH_RUNS (timed runs per figure,
#   after one warm-up; default 3), SKIPPY_BENCH_SKIP_DEPS=1, SKIPPY_BENCH_SKIP_BUILD=1,
#   SKIPPY_BENCH_ONLY (sections to run, e.g. "write_package push"),
#   SKIPPY_BENCH_RSS_SIZES (validate-package RSS sizes, default "1GiB 4GiB 16GiB").
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=$ROOT/build-bench
BIN=$BUILD/bin
CLI=$BIN/skippy-model-package
WORK=${SKIPPY_BENCH_DIR:-/tmp/skippy-bench}
SIZE=${SKIPPY_BENCH_SIZE:-2GiB}
SMALL_SIZE=1GiB      # second model for the RSS-flatness check
RSS_SIZES=${SKIPPY_BENCH_RSS_SIZES:-1GiB 4GiB 16GiB}  # validate-package RSS by model size
LAYERS=32
RUNS=${SKIPPY_BENCH_RUNS:-3}
MAT_LAYERS=0..16     # materialize: half the layers (START..END, half-open)

case "$WORK" in
  /tmp/?*) ;;
  *) echo "SKIPPY_BENCH_DIR must be under /tmp (got $WORK)" >&2; exit 2 ;;
esac
mkdir -p "$WORK/logs"
MODEL=$WORK/model-$SIZE.gguf
MODEL_SMALL=$WORK/model-$SMALL_SIZE.gguf
SPLIT_PREFIX=$WORK/split-$SIZE/model
SPLIT_FIRST=$SPLIT_PREFIX-00001-of-00003.gguf
PKG=$WORK/pkg               # write-package output, reused by later sections
# The CLI's caches (verification records, stage files) live here, not in ~/.cache,
# and are cleared before each timed run that must do the full work.
export SKIPPY_CACHE_DIR=$WORK/cache
SCRATCH=$WORK/scratch       # copies and other throw-away outputs
T_START=$(date +%s)

# ---------------------------------------------------------------- helpers

section() { printf '\n== %s\n' "$*"; }
note() { printf '   %s\n' "$*"; }
mib() { awk -v k="$1" 'BEGIN { printf "%.1f MiB", k / 1024 }'; }       # KiB -> MiB
gib() { awk -v b="$1" 'BEGIN { printf "%.2f GiB", b / 1073741824 }'; }  # bytes -> GiB
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
sum() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a + b }'; }
bytes_of() { stat -c %s "$@" | awk '{ s += $1 } END { printf "%.0f\n", s }'; }

# Summary rows: figure | value | target | status.
SUM_FIG=() SUM_VAL=() SUM_TGT=() SUM_ST=()
row() { SUM_FIG+=("$1") SUM_VAL+=("$2") SUM_TGT+=("$3") SUM_ST+=("$4"); }
# check FIGURE VALUE OP LIMIT [UNIT]: a row with status from VALUE OP LIMIT (<=, < or >=).
check() {
  local st=MISS
  awk -v a="$2" -v b="$4" -v op="$3" 'BEGIN { exit !(op == "<" ? a < b : op == ">=" ? a >= b : a <= b) }' && st=ok
  row "$1" "$2${5:-}" "$3 $4${5:-}" "$st"
}

# run_timed CMD...: one run; T_WALL (seconds, ms precision), T_RSS (peak
# KiB, /usr/bin/time %M) and T_CPU (user + system seconds). Output goes to $WORK/logs/last.{out,err}.
run_timed() {
  local start end
  start=$(date +%s%N)
  if ! /usr/bin/time -f '%e %M %U %S' -o "$WORK/logs/time" "$@" >"$WORK/logs/last.out" 2>"$WORK/logs/last.err"; then
    note "FAILED: $*"
    tail -n 5 "$WORK/logs/last.err" | sed 's/^/     /'
    return 1
  fi
  end=$(date +%s%N)
  T_WALL=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  T_RSS=$(tail -n 1 "$WORK/logs/time" | awk '{ print $2 }')
  T_CPU=$(tail -n 1 "$WORK/logs/time" | awk '{ printf "%.2f", $3 + $4 }')
}

# measure PREP CMD...: one warm-up run, then $RUNS timed runs, each after
# PREP (a function: clean outputs, flush dirty pages). M_WALL = median wall,
# M_RSS = largest peak RSS (KiB), M_CPU = median CPU seconds (user + system).
measure() {
  local prep=$1 i walls=() cpus=() rss=0
  shift
  for ((i = 0; i <= RUNS; i++)); do
    "$prep"
    run_timed "$@" || return 1
    ((i == 0)) && continue
    walls+=("$T_WALL")
    cpus+=("$T_CPU")
    ((T_RSS > rss)) && rss=$T_RSS
  done
  M_WALL=$(printf '%s\n' "${walls[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  M_CPU=$(printf '%s\n' "${cpus[@]}" | sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
  M_RSS=$rss
}

prep_none() { :; }
prep_scratch() { rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"; sync; }
prep_pkg() { rm -rf "$PKG"; sync; }
prep_cache() { rm -rf "$SKIPPY_CACHE_DIR"; }

# Yardsticks for any file set (medians): cp of each file, one openssl dgst
# over all of them (sequential, as a checker would read them).
yard_cp() { measure prep_scratch cp --reflink=never "$@" "$SCRATCH/"; Y_CP=$M_WALL; }
yard_dgst() { measure prep_none openssl dgst -sha256 "$@"; Y_DGST=$M_WALL; }

HELP=""
has_cmd() { grep -qE "^[[:space:]]+$1([[:space:]]|$)" <<<"$HELP"; }
skip_section() {  # NAME FIGURE...: print a note, add skipped rows
  local name=$1
  shift
  note "skipped: '$name' is not in skippy-model-package --help yet"
  local f
  for f in "$@"; do row "$f" "-" "${TARGET[$f]}" skipped; done
}
declare -A TARGET=(
  ["write-package / (cp + dgst)"]="<= 0.8"
  ["write-package, cached Hub source / (cp + dgst)"]="<= 0.5"
  ["write-package peak RSS, cached Hub source"]="< 100 MiB"
  ["write-package peak RSS, $SMALL_SIZE model"]="< 100 MiB"
  ["write-package peak RSS, $SIZE model"]="< 100 MiB"
  ["validate-package / dgst(source + package)"]="<= 0.6"
  ["verify / dgst(package)"]="<= 0.6"
  ["materialize / cp(output)"]="<= 1.1"
  ["materialize --as-source / (cp + dgst)"]="<= 0.8"
  ["fetch / curl (same files, same server)"]=">= 0.9"
  ["write-package --schema 2 / write-package"]="<= 1.1"
  ["convert-package --to 2: carrier + root"]="< 1 s"
  ["convert-package --to 2 --source / validate-package"]="<= 1.0"
)

# ---------------------------------------------------------------- setup

if [ "${SKIPPY_BENCH_SKIP_DEPS:-0}" != 1 ]; then
  section "dependencies"
  bash scripts/install-deps.sh
fi
if [ "${SKIPPY_BENCH_SKIP_BUILD:-0}" != 1 ]; then
  section "build (Release, $BUILD)"
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSKIPPY_BUILD_TESTS=OFF -DSKIPPY_BUILD_BENCH=ON \
    >"$WORK/logs/cmake.log" 2>&1 || { tail -n 30 "$WORK/logs/cmake.log"; exit 1; }
  cmake --build "$BUILD" -j2 >"$WORK/logs/build.log" 2>&1 || { grep -E 'error|FAILED' "$WORK/logs/build.log" | head -n 30; exit 1; }
  note "ok"
fi
HELP=$("$CLI" --help 2>&1 || true)

section "models ($WORK)"
note "load average at start: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine slows every figure)"
"$BIN/skippy-make-model" "$MODEL" --size "$SIZE" --layers "$LAYERS" --reuse
"$BIN/skippy-make-model" "$SPLIT_PREFIX" --size "$SIZE" --layers "$LAYERS" --split 3 --reuse
SPLIT_FILES=("$SPLIT_PREFIX"-0000?-of-00003.gguf)
MODEL_BYTES=$(bytes_of "$MODEL")
note "warming the page cache"
cat "$MODEL" "${SPLIT_FILES[@]}" >/dev/null

# ---------------------------------------------------------------- reader

section "reader open (Google Benchmark, header only)"
SKIPPY_BENCH_MODEL=$MODEL SKIPPY_BENCH_SPLIT_MODEL=$SPLIT_FIRST "$BIN/skippy-bench-gguf" \
  --benchmark_out="$WORK/logs/gguf_bench.json" --benchmark_out_format=json 2>/dev/null
bench_ms() {
  awk -v want="$1" -F': ' '
    /"name":/ { n = $2; gsub(/[",]/, "", n) }
    /"real_time":/ && n == want { v = $2; gsub(/,/, "", v); printf "%.3f", v; exit }' "$WORK/logs/gguf_bench.json"
}
OPEN_MS=$(bench_ms gguf_file_open/single)
SRC_MS=$(bench_ms model_source_open/single)
SPLIT_MS=$(bench_ms model_source_open/split)
note "model: $MODEL ($MODEL_BYTES bytes, $(gib "$MODEL_BYTES"))"
note "GgufFile::open ${OPEN_MS} ms, ModelSource::open ${SRC_MS} ms, split (3 shards) ${SPLIT_MS} ms"

# ---------------------------------------------------------------- yardsticks

section "yardsticks on the model (median of $RUNS after a warm-up)"
yard_cp "$MODEL"
CP_MODEL=$Y_CP CP_CPU=$M_CPU
start=$(date +%s%N)
sync "$SCRATCH/$(basename "$MODEL")"
FSYNC_COPY=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
rm -rf "$SCRATCH"
yard_dgst "$MODEL"
DGST_MODEL=$Y_DGST DGST_CPU=$M_CPU
note "cp                 ${CP_MODEL} s  ($(awk -v b="$MODEL_BYTES" -v s="$CP_MODEL" 'BEGIN { printf "%.2f GB/s", b / s / 1e9 }'), CPU ${CP_CPU} s)"
note "                   (then fsync of the copy: ${FSYNC_COPY} s; not part of the yardstick)"
note "openssl dgst       ${DGST_MODEL} s  ($(awk -v b="$MODEL_BYTES" -v s="$DGST_MODEL" 'BEGIN { printf "%.2f GB/s", b / s / 1e9 }'), CPU ${DGST_CPU} s)"
note "reader open / cp = $(awk -v o="$OPEN_MS" -v c="$CP_MODEL" 'BEGIN { printf "%.6f", o / 1000 / c }')"
row "GgufFile::open, $SIZE model" "$OPEN_MS ms" "ms (header only)" info
row "ModelSource::open, 3-shard split" "$SPLIT_MS ms" "ms (header only)" info
row "cp of the model" "$CP_MODEL s" "yardstick" info
row "openssl dgst -sha256 of the model" "$DGST_MODEL s" "yardstick" info

# ---------------------------------------------------------------- commands
# One function per subcommand; each skips itself when --help lacks it.

bench_inspect() {
  section "inspect"
  if ! has_cmd inspect; then skip_section inspect; return 0; fi
  measure prep_none "$CLI" inspect "$MODEL" || return 0
  local r
  r=$(awk -v a="$M_WALL" -v b="$CP_MODEL" 'BEGIN { printf "%.4f", a / b }')
  note "inspect $(basename "$MODEL"): ${M_WALL} s wall, peak RSS $(mib "$M_RSS"); / cp = $r"
  row "inspect wall (/ cp)" "${M_WALL} s ($r)" "header only" info
  row "inspect peak RSS" "$(mib "$M_RSS")" "-" info
}

WRITE_OK=0
# write_floor N: the least time a pass that copies the model and hashes it
# N times can take here: max((cp + N x dgst) / cores, cp + fsync of the copy).
write_floor() {
  awk -v c="$CP_MODEL" -v d="$DGST_MODEL" -v k="$1" -v s="$FSYNC_COPY" -v n="$(nproc)" \
    'BEGIN { a = (c + k * d) / n; b = c + s; printf "%.3f", (a > b ? a : b) }'
}

bench_write_package() {
  section "write-package"
  if ! has_cmd write-package; then
    skip_section write-package "write-package / (cp + dgst)" "write-package peak RSS, $SMALL_SIZE model" \
      "write-package peak RSS, $SIZE model"
    return 0
  fi
  local args=(--model-id bench/synthetic:Q8_0 --source-revision r --source-file "$(basename "$MODEL")")
  measure prep_pkg "$CLI" write-package "$MODEL" --out-dir "$PKG" "${args[@]}" || {
    row "write-package / (cp + dgst)" failed "<= 0.8" MISS
    return 0
  }
  WRITE_OK=1
  WRITE_WALL=$M_WALL WRITE_CPU=$M_CPU
  local wall=$M_WALL rss_big=$M_RSS cpu=$M_CPU yard r floor
  yard=$(sum "$CP_MODEL" "$DGST_MODEL")
  r=$(ratio "$wall" "$yard")
  PKG_FILES=()
  mapfile -t PKG_FILES < <(find "$PKG" -type f | sort)
  note "package: ${#PKG_FILES[@]} files, $(gib "$(bytes_of "${PKG_FILES[@]}")")"
  note "write-package ${wall} s (CPU ${cpu} s), peak RSS $(mib "$rss_big"); cp + dgst = ${yard} s; ratio $r"
  # The floor: cp's copy and two SHA-256 streams (the shard's and the
  # fragments'), each as costly as dgst, spread perfectly over the cores,
  # or the copy made durable (cp + fsync), whichever is longer.
  floor=$(write_floor 2)
  note "floor: max((cp + 2 x dgst) / $(nproc) cores, cp + fsync) = ${floor} s; write-package / floor = $(ratio "$wall" "$floor")"
  check "write-package / (cp + dgst)" "$r" "<=" 0.8
  check "write-package / floor" "$(ratio "$wall" "$floor")" "<=" 1.2

  # RSS flatness: the same command on a model half the size.
  "$BIN/skippy-make-model" "$MODEL_SMALL" --size "$SMALL_SIZE" --layers "$LAYERS" --reuse -q >/dev/null
  cat "$MODEL_SMALL" >/dev/null
  rm -rf "$SCRATCH" && mkdir -p "$SCRATCH" && sync
  if run_timed "$CLI" write-package "$MODEL_SMALL" --out-dir "$SCRATCH/pkg-small" \
      --model-id bench/synthetic-small:Q8_0 --source-revision r --source-file "$(basename "$MODEL_SMALL")"; then
    note "RSS flatness: peak RSS $(mib "$T_RSS") on $SMALL_SIZE, $(mib "$rss_big") on $SIZE"
    check "write-package peak RSS, $SMALL_SIZE model" "$(awk -v k="$T_RSS" 'BEGIN { printf "%.1f", k / 1024 }')" "<" 100 " MiB"
  fi
  rm -rf "$SCRATCH"
  check "write-package peak RSS, $SIZE model" "$(awk -v k="$rss_big" 'BEGIN { printf "%.1f", k / 1024 }')" "<" 100 " MiB"
}

bench_validate_package() {
  section "validate-package"
  local fig="validate-package / dgst(source + package)"
  if ! has_cmd validate-package; then skip_section validate-package "$fig"; return 0; fi
  if ((!WRITE_OK)); then note "skipped: needs a package from write-package"; row "$fig" - "<= 0.6" skipped; return 0; fi
  measure prep_none "$CLI" validate-package "$MODEL" "$PKG" || { row "$fig" failed "<= 0.6" MISS; return 0; }
  local wall=$M_WALL rss=$M_RSS r
  yard_dgst "$MODEL" "${PKG_FILES[@]}"
  r=$(ratio "$wall" "$Y_DGST")
  note "validate-package ${wall} s, peak RSS $(mib "$rss"); openssl dgst of source + package = ${Y_DGST} s; ratio $r"
  check "$fig" "$r" "<=" 0.6
}

# validate-package's peak RSS at 1, 4 and 16 GiB (SKIPPY_BENCH_RSS_SIZES):
# it must not grow with the model. Each model and its package are made,
# measured once and deleted (16 GiB needs about 33 GiB free under $WORK).
bench_validate_rss() {
  section "validate-package peak RSS by model size"
  local fig="validate-package peak RSS growth, ${RSS_SIZES// /, }"
  if ! has_cmd validate-package; then skip_section validate-package "$fig"; return 0; fi
  local s first="" last="" rss_list=""
  for s in $RSS_SIZES; do
    local model=$WORK/rss-model-$s.gguf pkg=$WORK/rss-pkg-$s
    "$BIN/skippy-make-model" "$model" --size "$s" --layers "$LAYERS" --reuse -q >/dev/null
    rm -rf "$pkg"
    "$CLI" write-package "$model" --out-dir "$pkg" --model-id bench/rss:Q8_0 --source-revision r \
      --source-file "$(basename "$model")" >/dev/null 2>&1 || { row "$fig" failed "< 16 MiB" MISS; return 0; }
    if run_timed "$CLI" validate-package "$model" "$pkg"; then
      note "$s: validate-package peak RSS $(mib "$T_RSS"), ${T_WALL} s"
      rss_list+="$(mib "$T_RSS") "
      [ -z "$first" ] && first=$T_RSS
      last=$T_RSS
    fi
    rm -rf "$pkg" "$model"
  done
  [ -n "$first" ] || { row "$fig" failed "< 16 MiB" MISS; return 0; }
  check "$fig" "$(awk -v a="$first" -v b="$last" 'BEGIN { printf "%.1f", (b - a) / 1024 }')" "<" 16 " MiB"
  row "validate-package peak RSS at $RSS_SIZES" "$rss_list" "-" info
}

bench_verify() {
  section "verify (SKIPPY_VERIFY_PACKAGE_SHA=1)"
  local fig="verify / dgst(package)"
  if ! has_cmd verify; then skip_section verify "$fig"; return 0; fi
  if ((!WRITE_OK)); then note "skipped: needs a package from write-package"; row "$fig" - "<= 0.6" skipped; return 0; fi
  # Without verification records (cleared before each run): every byte hashed.
  measure prep_cache env SKIPPY_VERIFY_PACKAGE_SHA=1 "$CLI" verify "$PKG" || { row "$fig" failed "<= 0.6" MISS; return 0; }
  local wall=$M_WALL rss=$M_RSS r
  yard_dgst "${PKG_FILES[@]}"
  r=$(ratio "$wall" "$Y_DGST")
  note "verify ${wall} s, peak RSS $(mib "$rss"); openssl dgst of the package files = ${Y_DGST} s; ratio $r"
  check "$fig" "$r" "<=" 0.6
  # Again, with the records the last run left (unchanged files are not re-hashed).
  if run_timed env SKIPPY_VERIFY_PACKAGE_SHA=1 "$CLI" verify "$PKG"; then
    note "verify with its cache of verified files: ${T_WALL} s"
    row "verify, cached records" "${T_WALL} s" "-" info
  fi
}

bench_materialize() {
  section "materialize (layers $MAT_LAYERS)"
  local fig="materialize / cp(output)"
  if ! has_cmd materialize; then skip_section materialize "$fig"; return 0; fi
  if ((!WRITE_OK)); then note "skipped: needs a package from write-package"; row "$fig" - "<= 1.1" skipped; return 0; fi
  local out=$WORK/materialized.gguf
  prep_mat() { rm -f "$out"; prep_cache; sync; }
  measure prep_mat "$CLI" materialize "$PKG" --layers "$MAT_LAYERS" --out "$out" || {
    row "$fig" failed "<= 1.1" MISS
    return 0
  }
  local wall=$M_WALL rss=$M_RSS r
  yard_cp "$out"
  rm -rf "$SCRATCH"
  r=$(ratio "$wall" "$Y_CP")
  note "materialize ${wall} s, peak RSS $(mib "$rss"), $(gib "$(bytes_of "$out")") out; cp of the output = ${Y_CP} s; ratio $r"
  check "$fig" "$r" "<=" 1.1
  rm -f "$out"
}

# materialize --as-source: the model rebuilt from its package (every byte
# read from the fragments, hashed and written once) against copying it and
# hashing it once; the split model's three shards for information.
bench_materialize_source() {
  section "materialize --as-source"
  local fig="materialize --as-source / (cp + dgst)"
  if ! has_cmd materialize; then skip_section materialize "$fig"; return 0; fi
  if ((!WRITE_OK)); then note "skipped: needs a package from write-package"; row "$fig" - "<= 0.8" skipped; return 0; fi
  local out=$WORK/rebuilt
  prep_src() { rm -rf "$out"; sync; }
  measure prep_src "$CLI" materialize "$PKG" --as-source --out "$out" || { row "$fig" failed "<= 0.8" MISS; return 0; }
  local wall=$M_WALL rss=$M_RSS cpu=$M_CPU yard r
  cmp -s "$out" "$MODEL" || { note "FAILED: the rebuilt file differs from the model"; row "$fig" differs "<= 0.8" MISS; return 0; }
  yard=$(sum "$CP_MODEL" "$DGST_MODEL")
  r=$(ratio "$wall" "$yard")
  note "materialize --as-source ${wall} s (CPU ${cpu} s), peak RSS $(mib "$rss"); cp + dgst of the model = ${yard} s; ratio $r"
  check "$fig" "$r" "<=" 0.8
  rm -rf "$out" "$SCRATCH"
  mkdir -p "$SCRATCH"
  if "$CLI" write-package "$SPLIT_FIRST" --out-dir "$SCRATCH/split-pkg" --model-id bench/split:Q8_0 --source-revision r \
      --source-file "$(basename "$SPLIT_FIRST")" >/dev/null 2>&1 &&
     measure prep_src "$CLI" materialize "$SCRATCH/split-pkg" --as-source --out "$out"; then
    note "split (3 shards): materialize --as-source ${M_WALL} s, peak RSS $(mib "$M_RSS")"
    row "materialize --as-source, 3-shard split" "${M_WALL} s" "-" info
  fi
  rm -rf "$out" "$SCRATCH"
}

# select + consumer validation on a 94-layer package (the issue's size):
# the whole command, process start included, in milliseconds.
bench_select94() {
  section "select on a 94-layer package"
  local fig="select 94-layer package (ms)"
  if ! has_cmd select; then skip_section select "$fig"; return 0; fi
  local model=$WORK/model-94layers.gguf pkg=$WORK/pkg94
  "$BIN/skippy-make-model" "$model" --size 96MiB --layers 94 --reuse -q >/dev/null
  rm -rf "$pkg"
  "$CLI" write-package "$model" --out-dir "$pkg" --model-id bench/m94:Q8_0 --source-revision r \
    --source-file m94.gguf >/dev/null
  measure prep_none "$CLI" select "$pkg" --layers 40..60 --json || { row "$fig" failed "< 50" MISS; return 0; }
  local ms
  ms=$(awk -v s="$M_WALL" 'BEGIN { printf "%.1f", s * 1000 }')
  note "select --layers 40..60 of 94: ${ms} ms wall (median, process start included), peak RSS $(mib "$M_RSS")"
  check "$fig" "$ms" "<" 50 " ms"
  rm -rf "$pkg"
}

# The local Hub stand-in (tests/hub, Node on 127.0.0.1): start_hub sets
# HUB_EP; it exits when stop_hub closes fd 7.
start_hub() {
  local fifo=$WORK/hub.fifo out=$WORK/logs/hub.out i
  HUB_EP=""
  command -v node >/dev/null || return 1
  rm -f "$fifo" "$out" && mkfifo "$fifo"  # no stale endpoint from an earlier run
  node tests/hub/hub_standin.mjs <"$fifo" >"$out" 2>"$WORK/logs/hub.err" &
  exec 7>"$fifo"
  for ((i = 0; i < 100; i++)); do [ -s "$out" ] && break; sleep 0.1; done
  HUB_EP=$(sed -n 's/.*"endpoint":"\([^"]*\)".*/\1/p' "$out")
  [ -n "$HUB_EP" ]
}
stop_hub() { exec 7>&-; }
# hub_publish REPO DIR: prints the commit.
hub_publish() {
  { curl -sf -X POST "$HUB_EP/_admin/repos" -d "{\"repo\":\"$1\",\"dir\":\"$2\"}" || true; } |
    sed -n 's/.*"commit":"\([0-9a-f]*\)".*/\1/p'
}

# write-package from an org/repo:distribution source already in the Hugging
# Face cache: the shards were verified while they downloaded (the
# verification cache says so), so only the fragments are hashed.
bench_write_package_hub() {
  section "write-package from a cached Hub source"
  local fig="write-package, cached Hub source / (cp + dgst)" fig_rss="write-package peak RSS, cached Hub source"
  if ! has_cmd write-package; then skip_section write-package "$fig" "$fig_rss"; return 0; fi
  if ! start_hub; then note "skipped: needs node and the stand-in"; row "$fig" - "<= 0.5" skipped; return 0; fi
  local repo_dir=$WORK/hub-model hf=$WORK/hf-src cache=$WORK/cache-src out=$WORK/pkg-hub commit
  rm -rf "$repo_dir" "$hf" "$cache" && mkdir -p "$repo_dir"
  ln "$MODEL" "$repo_dir/Synthetic-Q8_0.gguf" 2>/dev/null || cp "$MODEL" "$repo_dir/Synthetic-Q8_0.gguf"
  commit=$(hub_publish bench/Synthetic-GGUF "$repo_dir")
  local env_hub=(env HF_ENDPOINT="$HUB_EP" HF_HUB_CACHE="$hf" HF_TOKEN= SKIPPY_CACHE_DIR="$cache")
  # Not timed: the download, which verifies and records the shard.
  if [ -z "$commit" ] || ! "${env_hub[@]}" "$CLI" write-package bench/Synthetic-GGUF:Q8_0 --out-dir "$out" \
      >"$WORK/logs/hub-write.out" 2>"$WORK/logs/hub-write.err"; then
    note "FAILED: $(tail -n 3 "$WORK/logs/hub-write.err")"
    row "$fig" failed "<= 0.5" MISS
    stop_hub
    return 0
  fi
  stop_hub
  prep_out() { rm -rf "$out"; sync; }
  measure prep_out "${env_hub[@]}" HF_HUB_OFFLINE=1 "$CLI" write-package bench/Synthetic-GGUF:Q8_0 --out-dir "$out" --json || {
    row "$fig" failed "<= 0.5" MISS
    return 0
  }
  local hashed yard r
  hashed=$(sed -n 's/.*"source_bytes_hashed": *\([0-9]*\).*/\1/p' "$WORK/logs/last.out")
  yard=$(sum "$CP_MODEL" "$DGST_MODEL")
  r=$(ratio "$M_WALL" "$yard")
  note "write-package ${M_WALL} s (CPU ${M_CPU} s), peak RSS $(mib "$M_RSS"), source bytes hashed: ${hashed:-?}; cp + dgst = ${yard} s; ratio $r"
  # The floor: the same work as cp and dgst (copy every byte, hash every
  # byte once) spread perfectly over the cores, or the copy made durable.
  local floor
  floor=$(write_floor 1)
  note "floor: max((cp + dgst) / $(nproc) cores, cp + fsync) = ${floor} s; write-package / floor = $(ratio "$M_WALL" "$floor")"
  check "$fig" "$r" "<=" 0.5
  check "write-package, cached Hub source / floor" "$(ratio "$M_WALL" "$floor")" "<=" 1.2
  check "$fig_rss" "$(awk -v k="$M_RSS" 'BEGIN { printf "%.1f", k / 1024 }')" "<" 100 " MiB"
  rm -rf "$out" "$hf" "$cache" "$repo_dir"
}

# fetch of the whole package from the local Hub stand-in (tests/hub, Node on
# 127.0.0.1, LFS files redirected to its storage listener) into an empty
# Hugging Face cache, SHA-256 verification included, against curl fetching
# the same files from the same server with the same parallelism (4).
bench_fetch() {
  section "fetch (hf:// from the local Hub stand-in)"
  local fig="fetch / curl (same files, same server)"
  if ! has_cmd fetch; then skip_section fetch "$fig"; return 0; fi
  if ((!WRITE_OK)); then note "skipped: needs a package from write-package"; row "$fig" - ">= 0.9" skipped; return 0; fi
  if ! start_hub; then note "skipped: needs node and the stand-in"; row "$fig" - ">= 0.9" skipped; return 0; fi
  local ep=$HUB_EP commit
  commit=$(hub_publish bench/pkg "$PKG")
  if [ -z "$commit" ]; then note "FAILED: the stand-in did not start"; row "$fig" failed ">= 0.9" MISS; stop_hub; return 0; fi
  local hf=$WORK/hf curl_dir=$WORK/curl urls=() rel
  for f in "${PKG_FILES[@]}"; do
    rel=${f#"$PKG"/}
    [ "$rel" = README.md ] && continue
    urls+=(-o "$curl_dir/${rel//\//_}" "$ep/bench/pkg/resolve/$commit/$rel")
  done
  prep_hf() { rm -rf "$hf" "$SKIPPY_CACHE_DIR"; sync; }
  prep_curl() { rm -rf "$curl_dir"; mkdir -p "$curl_dir"; sync; }
  measure prep_hf env HF_ENDPOINT="$ep" HF_HUB_CACHE="$hf" HF_TOKEN= "$CLI" fetch "hf://bench/pkg@$commit" --json || {
    row "$fig" failed ">= 0.9" MISS
    stop_hub
    return 0
  }
  local wall=$M_WALL rss=$M_RSS bytes r
  measure prep_curl curl -sfL --no-progress-meter --parallel --parallel-max 4 "${urls[@]}" || {
    row "$fig" "curl failed" ">= 0.9" MISS
    stop_hub
    return 0
  }
  bytes=$(bytes_of "$curl_dir"/*)
  r=$(ratio "$M_WALL" "$wall")
  note "fetch ${wall} s ($(awk -v b="$bytes" -v s="$wall" 'BEGIN { printf "%.2f GB/s", b / s / 1e9 }')), peak RSS $(mib "$rss"), verified;" \
    "curl ${M_WALL} s for the same $(gib "$bytes"); fetch throughput / curl = $r"
  check "$fig" "$r" ">=" 0.9
  rm -rf "$hf" "$curl_dir"
  stop_hub
}

# write-package --push of the model to the local Hub stand-in (uploads
# overlapping the write), against write-package alone (its time above) plus
# curl PUTting the same files to the same stand-in's storage afterwards, 4 at
# a time, on URLs from the stand-in's LFS batch. Then --max-disk on the
# smaller model, with the output directory's size sampled while it runs.
bench_push() {
  section "write-package --push (to the local Hub stand-in)"
  local fig="write-package --push / (write-package + curl upload)" fig2="--push --max-disk 256M: sampled peak of the dir"
  if ((!WRITE_OK)); then note "skipped: needs write-package"; row "$fig" - "<= 0.7" skipped; return 0; fi
  if ! command -v node >/dev/null; then note "skipped: needs node"; row "$fig" - "<= 0.7" skipped; return 0; fi
  local fifo=$WORK/hub-push.fifo out=$WORK/logs/hub-push.out ep i
  rm -f "$fifo" "$out" && mkfifo "$fifo"
  HUB_STANDIN_DATA_DIR=$WORK node tests/hub/hub_standin.mjs <"$fifo" >"$out" 2>"$WORK/logs/hub-push.err" &
  local node_pid=$!
  exec 8>"$fifo"
  # The stand-in's CPU seconds so far (it shares the cores with the client).
  node_cpu() { awk -v t="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$node_pid/stat"; }
  for ((i = 0; i < 100; i++)); do [ -s "$out" ] && break; sleep 0.1; done
  ep=$(sed -n 's/.*"endpoint":"\([^"]*\)".*/\1/p' "$out")
  if [ -z "$ep" ]; then note "FAILED: the stand-in did not start"; row "$fig" failed "<= 0.7" MISS; exec 8>&-; return 0; fi
  # Basic PUTs for both sides (one request per file, as curl -T does).
  curl -sf -X POST "$ep/_admin/config" -d '{"multipart_threshold":1099511627776}' >/dev/null
  local auth="Authorization: Bearer hf_test"
  curl -sf -H "$auth" -X POST "$ep/api/repos/create" -d '{"name":"curl","organization":"bench"}' >/dev/null || true
  local pushdir=$WORK/pushed curlcfg=$WORK/curl-upload.cfg
  prep_push() { curl -sf -X DELETE "$ep/_admin/uploads" >/dev/null; rm -rf "$pushdir"; sync; }
  prep_curl_up() {
    curl -sf -X DELETE "$ep/_admin/uploads" >/dev/null
    # The batch gives each file's signed storage URL (not timed: the upload is).
    local objs="" f sha size first=1
    : >"$curlcfg"
    declare -A file_of=()
    for f in "${PKG_FILES[@]}"; do
      sha=$(sha256sum "$f" | cut -d' ' -f1)
      size=$(stat -c %s "$f")
      file_of[$sha]=$f
      ((first)) || objs+=","
      objs+="{\"oid\":\"$sha\",\"size\":$size}"
      first=0
    done
    curl -sf -H "$auth" -X POST "$ep/bench/curl.git/info/lfs/objects/batch" \
      -d "{\"operation\":\"upload\",\"transfers\":[\"basic\"],\"objects\":[$objs]}" |
      node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const o of JSON.parse(s).objects)
        if(o.actions)console.log(o.oid+" "+o.actions.upload.href)})' |
      while read -r sha href; do printf 'upload-file = "%s"\nurl = "%s"\noutput = /dev/null\n' "${file_of[$sha]}" "$href"; done >"$curlcfg"
    sync
  }
  local n0 n1 n2
  n0=$(node_cpu)
  measure prep_push env HF_ENDPOINT="$ep" HF_TOKEN=hf_test "$CLI" write-package "$MODEL" --out-dir "$pushdir" \
    --model-id bench/synthetic:Q8_0 --source-revision r --source-file "$(basename "$MODEL")" \
    --push hf://bench/pushed --create --json || { row "$fig" failed "<= 0.7" MISS; exec 8>&-; return 0; }
  local push_wall=$M_WALL push_rss=$M_RSS push_cpu=$M_CPU
  n1=$(node_cpu)
  measure prep_curl_up curl -sf --no-progress-meter --parallel --parallel-max 4 -K "$curlcfg" ||
    { row "$fig" "curl failed" "<= 0.7" MISS; exec 8>&-; return 0; }
  local curl_wall=$M_WALL curl_cpu=$M_CPU yard r
  n2=$(node_cpu)
  yard=$(sum "$WRITE_WALL" "$curl_wall")
  r=$(ratio "$push_wall" "$yard")
  note "write-package --push ${push_wall} s (peak RSS $(mib "$push_rss")); write-package ${WRITE_WALL} s + curl upload ${curl_wall} s = ${yard} s; ratio $r"
  # CPU per run: the client, and the stand-in's share (all runs of each
  # measure, warm-up included, divided evenly).
  local runs=$((RUNS + 1))
  note "CPU per run: --push ${push_cpu} s + stand-in $(awk -v a="$n0" -v b="$n1" -v r="$runs" 'BEGIN { printf "%.2f", (b - a) / r }') s;" \
    "write-package ${WRITE_CPU} s; curl ${curl_cpu} s + stand-in $(awk -v a="$n1" -v b="$n2" -v r="$runs" 'BEGIN { printf "%.2f", (b - a) / r }') s"
  check "$fig" "$r" "<=" 0.7

  # --max-disk: the output directory sampled every 20 ms while it runs.
  local limit=$((256 * 1024 * 1024)) peak=0 n pid
  prep_push
  env HF_ENDPOINT="$ep" HF_TOKEN=hf_test "$CLI" write-package "$MODEL_SMALL" --out-dir "$pushdir" \
    --model-id bench/synthetic-small:Q8_0 --source-revision r --source-file "$(basename "$MODEL_SMALL")" \
    --push hf://bench/pushed-small --create --max-disk 256M --json >"$WORK/logs/push-maxdisk.json" 2>"$WORK/logs/push-maxdisk.err" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    n=$({ find "$pushdir" -type f -printf '%s\n' 2>/dev/null || true; } | awk '{ s += $1 } END { printf "%.0f", s }')
    ((n > peak)) && peak=$n
    sleep 0.02
  done
  if wait "$pid"; then
    note "--max-disk 256M on the $SMALL_SIZE model: sampled peak $(mib $((peak / 1024))) of the output directory"
    check "$fig2" "$(awk -v b="$peak" 'BEGIN { printf "%.1f", b / 1048576 }')" "<=" 256 " MiB"
  else
    row "$fig2" failed "<= 256 MiB" MISS
  fi
  rm -rf "$pushdir" "$curlcfg"
  curl -sf -X DELETE "$ep/_admin/uploads" >/dev/null || true
  exec 8>&-
}

# Package schema 2: write-package --schema 2 against schema 1 on
# the same model (the same single pass: the ratio to the floor must match),
# and convert-package --to 2 of the schema 1 package: the carrier + root time
# (the payload is hard-linked) and, with --source, the certification against
# validate-package on the same source.
bench_schema2() {
  section "write-package --schema 2, convert-package"
  local f_w="write-package --schema 2 / write-package" f_c="convert-package --to 2: carrier + root"
  local f_s="convert-package --to 2 --source / validate-package"
  if ! has_cmd convert-package; then skip_section convert-package "$f_w" "$f_c" "$f_s"; return 0; fi
  if ((!WRITE_OK)); then
    note "skipped: needs write-package's timing and package"
    row "$f_w" - "<= 1.1" skipped; row "$f_c" - "< 1 s" skipped; row "$f_s" - "<= 1.0" skipped
    return 0
  fi
  prep_v2() { rm -rf "$SCRATCH"; mkdir -p "$SCRATCH"; sync; }
  measure prep_v2 "$CLI" write-package "$MODEL" --schema 2 --out-dir "$SCRATCH/pkg-v2" \
      --model-id bench/synthetic:Q8_0 --source-revision r --source-file "$(basename "$MODEL")" || {
    row "$f_w" failed "<= 1.1" MISS; return 0; }
  local r
  r=$(ratio "$M_WALL" "$WRITE_WALL")
  note "write-package --schema 2 ${M_WALL} s (CPU ${M_CPU} s), peak RSS $(mib "$M_RSS"); schema 1 ${WRITE_WALL} s; ratio $r"
  check "$f_w" "$r" "<=" 1.1
  # Conversion of the schema 1 package: uncertified (carrier + root only), then certified.
  prep_conv() { rm -rf "$SCRATCH/conv"; sync; }
  measure prep_conv "$CLI" convert-package "$PKG" --to 2 --out-dir "$SCRATCH/conv" --uncertified --json || {
    row "$f_c" failed "< 1 s" MISS; return 0; }
  local cr
  cr=$(python3 -c 'import json,sys; print("%.3f" % json.load(open(sys.argv[1]))["carrier_root_seconds"])' "$WORK/logs/last.out")
  note "convert-package --to 2 (uncertified): ${M_WALL} s wall, carrier + root ${cr} s, peak RSS $(mib "$M_RSS")"
  check "$f_c" "$cr" "<" 1 " s"
  measure prep_none "$CLI" validate-package "$MODEL" "$PKG" || return 0
  local vwall=$M_WALL
  measure prep_conv "$CLI" convert-package "$PKG" --to 2 --out-dir "$SCRATCH/conv" --source "$MODEL" --json || {
    row "$f_s" failed "<= 1.0" MISS; return 0; }
  r=$(ratio "$M_WALL" "$vwall")
  note "convert-package --to 2 --source ${M_WALL} s (CPU ${M_CPU} s), peak RSS $(mib "$M_RSS"); validate-package ${vwall} s; ratio $r"
  check "$f_s" "$r" "<=" 1.0
  rm -rf "$SCRATCH"
}

# Xet: our chunking + hashing per core against xet-core's own chunker (its
# wasm build in @huggingface/hub, tests/js/xet_oracle.mjs --bench) on the
# same file in the same run; then write-package of a model the Hub holds
# Xet-backed, from the Hugging Face cache, without and with --push through
# Xet (the package dedupes against the source's chunks), against the floor
# max((cp + 2 x dgst + xet-core's chunk+hash CPU) / cores, cp + fsync).
XET_SIZE=${SKIPPY_BENCH_XET_SIZE:-1536MiB}
bench_xet() {
  section "Xet: chunk + hash per core, write-package --push through Xet ($XET_SIZE model)"
  local f_core="Xet chunk+hash per core / xet-core's" f_mibs="Xet chunk+blake3 per core" f_push="write-package --push (Xet) / floor"
  if ! has_cmd write-package || ! command -v node >/dev/null || [ ! -d tests/js/node_modules/@huggingface/hub ]; then
    note "skipped: needs write-package, node and tests/js/node_modules (scripts/install-deps.sh)"
    row "$f_core" - ">= 1.0" skipped; row "$f_mibs" - ">= 500 MiB/s" skipped; row "$f_push" - "<= 1.3" skipped
    return 0
  fi
  local model=$WORK/model-xet-$XET_SIZE.gguf
  "$BIN/skippy-make-model" "$model" --size "$XET_SIZE" --layers "$LAYERS" --reuse -q >/dev/null
  cat "$model" >/dev/null
  local bytes
  bytes=$(bytes_of "$model")
  # The yardsticks on this model.
  yard_cp "$model"
  local cp=$Y_CP start fsync dgst
  start=$(date +%s%N)
  sync "$SCRATCH/$(basename "$model")"
  fsync=$(awk -v a="$start" -v b="$(date +%s%N)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }')
  rm -rf "$SCRATCH"
  yard_dgst "$model"
  dgst=$Y_DGST
  note "$(gib "$bytes"): cp ${cp} s (then fsync ${fsync} s), openssl dgst ${dgst} s"

  # Chunk + hash on one core: MiB per CPU second (wall time also counts other work).
  "$BIN/skippy-bench-xet" "$model" "$RUNS" >"$WORK/logs/xet-ours.json" || { row "$f_core" failed ">= 1.0" MISS; return 0; }
  node tests/js/xet_oracle.mjs --bench "$model" >"$WORK/logs/xet-core.json" || { row "$f_core" failed ">= 1.0" MISS; return 0; }
  local ours_cpu ours_chunk ours_sha core_cpu ours_mibs core_mibs
  field() { sed -n "/\"way\":\"$2\"/s/.*\"$3\":\([0-9.]*\).*/\1/p" "$1"; }
  ours_chunk=$(field "$WORK/logs/xet-ours.json" chunk cpu_seconds)
  ours_cpu=$(field "$WORK/logs/xet-ours.json" chunk+blake3 cpu_seconds)
  ours_sha=$(field "$WORK/logs/xet-ours.json" chunk+blake3+sha256 cpu_seconds)
  core_cpu=$(sed -n 's/.*"cpu_seconds":\([0-9.]*\).*/\1/p' "$WORK/logs/xet-core.json")
  ours_mibs=$(awk -v b="$bytes" -v s="$ours_cpu" 'BEGIN { printf "%.0f", b / 1048576 / s }')
  core_mibs=$(awk -v b="$bytes" -v s="$core_cpu" 'BEGIN { printf "%.0f", b / 1048576 / s }')
  note "CPU seconds on one core: chunk ${ours_chunk}, chunk + BLAKE3 chunk and file hashes ${ours_cpu}" \
       "(${ours_mibs} MiB/s), + SHA-256 ${ours_sha}; xet-core (wasm) chunk + chunk hashes ${core_cpu} (${core_mibs} MiB/s)"
  check "$f_core" "$(ratio "$core_cpu" "$ours_cpu")" ">=" 1.0
  check "$f_mibs" "$ours_mibs" ">=" 500 " MiB/s"

  # The client's own cost: the write pass with every fragment cut into Xet
  # chunks, and with the source chunked too (dedupe against the source), no Hub.
  local xw=$WORK/xet-write wx_plain wx_chunks wx_source
  prep_xw() { rm -rf "$xw"; sync; }
  measure prep_xw "$CLI" write-package "$model" --out-dir "$xw" --model-id bench/Xet-GGUF:Q8_0 \
    --source-revision 0000000000000000000000000000000000000000 --source-file model.gguf >/dev/null &&
    wx_plain=$M_WALL && wx_plain_cpu=$M_CPU
  measure prep_xw "$BIN/skippy-bench-xet-write" "$model" "$xw" >/dev/null && wx_chunks=$M_WALL && wx_chunks_cpu=$M_CPU
  measure prep_xw "$BIN/skippy-bench-xet-write" "$model" "$xw" --source-chunks >/dev/null &&
    wx_source=$M_WALL && wx_source_cpu=$M_CPU
  rm -rf "$xw"

  # The model on the stand-in, Xet-backed (not timed), then in the cache.
  if ! start_hub; then note "skipped: the stand-in did not start"; row "$f_push" - "<= 1.3" skipped; return 0; fi
  local repo_dir=$WORK/xet-model hf=$WORK/xet-hf cache=$WORK/xet-cache out=$WORK/xet-pkg commit
  rm -rf "$repo_dir" "$hf" "$cache" "$out" && mkdir -p "$repo_dir"
  ln "$model" "$repo_dir/Synthetic-Q8_0.gguf" 2>/dev/null || cp "$model" "$repo_dir/Synthetic-Q8_0.gguf"
  commit=$(curl -sf -X POST "$HUB_EP/_admin/repos" \
    -d "{\"repo\":\"bench/Xet-GGUF\",\"dir\":\"$repo_dir\",\"xet\":{\"compression\":\"none\"}}" |
    sed -n 's/.*"commit":"\([0-9a-f]*\)".*/\1/p')
  local env_hub=(env HF_ENDPOINT="$HUB_EP" HF_HUB_CACHE="$hf" HF_TOKEN=hf_test SKIPPY_CACHE_DIR="$cache")
  if [ -z "$commit" ] || ! "${env_hub[@]}" "$CLI" write-package bench/Xet-GGUF:Q8_0 --out-dir "$out" \
      >"$WORK/logs/xet-first.out" 2>"$WORK/logs/xet-first.err"; then
    note "FAILED: $(tail -n 3 "$WORK/logs/xet-first.err")"
    row "$f_push" failed "<= 1.3" MISS; stop_hub; return 0
  fi
  prep_out() { rm -rf "$out"; sync; }
  measure prep_out "${env_hub[@]}" "$CLI" write-package bench/Xet-GGUF:Q8_0 --out-dir "$out" ||
    { row "$f_push" failed "<= 1.3" MISS; stop_hub; return 0; }
  local plain=$M_WALL plain_cpu=$M_CPU
  # The first push's figures (not timed): only the source is on the Hub. The
  # timed runs each push to a new repository (they also find this one's chunks).
  rm -rf "$out"
  "${env_hub[@]}" "$CLI" write-package bench/Xet-GGUF:Q8_0 --out-dir "$out" --push hf://bench/xet-pkg-first --create --json \
    >"$WORK/logs/xet-push-first.json" 2>"$WORK/logs/xet-push-first.err" ||
    { note "FAILED: $(tail -n 3 "$WORK/logs/xet-push-first.err")"; row "$f_push" failed "<= 1.3" MISS; stop_hub; return 0; }
  local node_pid n0 n1
  node_pid=$(pgrep -f -n "node tests/hub/hub_standin.mjs" || true)
  n0=$(awk -v t="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$node_pid/stat" 2>/dev/null || echo 0)
  measure prep_out "${env_hub[@]}" bash -c '"$@" --push "hf://bench/xet-pkg-$(date +%s%N)" --create --json' _ \
    "$CLI" write-package bench/Xet-GGUF:Q8_0 --out-dir "$out" ||
    { row "$f_push" failed "<= 1.3" MISS; stop_hub; return 0; }
  n1=$(awk -v t="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / t }' "/proc/$node_pid/stat" 2>/dev/null || echo 0)
  local push=$M_WALL push_cpu=$M_CPU floor
  floor=$(awk -v c="$cp" -v d="$dgst" -v x="$core_cpu" -v s="$fsync" -v n="$(nproc)" \
    'BEGIN { a = (c + 2 * d + x) / n; b = c + s; printf "%.3f", (a > b ? a : b) }')
  note "write-package from the cache ${plain} s (CPU ${plain_cpu} s); with --push through Xet ${push} s (CPU ${push_cpu} s," \
       "the stand-in's $(awk -v a="$n0" -v b="$n1" -v r=$((RUNS + 1)) 'BEGIN { printf "%.2f", (b - a) / r }') s per run)"
  note "floor: max((cp + 2 x dgst + xet-core chunk+hash) / $(nproc) cores, cp + fsync) = ${floor} s;" \
       "write-package / floor $(ratio "$plain" "$floor"), --push / floor $(ratio "$push" "$floor")"
  stop_hub
  python3 - "$WORK/logs/xet-push-first.json" <<'PY' || true
import json, sys
x = json.load(open(sys.argv[1])).get("publish", {}).get("xet") or {}
keys = ["bytes_chunked", "deduped_in_run", "deduped_global", "deduped_source", "new_bytes", "bytes_read", "xorb_bytes_uploaded", "shard_bytes_uploaded"]
print("   first push's Xet figures (bytes): " + ", ".join(f"{k} {x[k]:,}" for k in keys if k in x))
PY
  note "write pass alone (no Hub): plain ${wx_plain:-?} s (CPU ${wx_plain_cpu:-?} s), with Xet chunks of every fragment" \
       "${wx_chunks:-?} s (CPU ${wx_chunks_cpu:-?} s), and of the source too ${wx_source:-?} s (CPU ${wx_source_cpu:-?} s)"
  note "the push's wall time holds the stand-in's own CPU on the same cores (its one node thread rebuilds and" \
       "SHA-256s every file it registers: the Hub's work, not the client's)"
  check "write pass + Xet chunks (no Hub) / floor" "$(ratio "${wx_chunks:-0}" "$floor")" "<=" 1.3
  check "write pass + Xet chunks of source too / floor" "$(ratio "${wx_source:-0}" "$floor")" "<=" 1.3
  row "$f_push (stand-in on the same cores)" "$(ratio "$push" "$floor")" "info" info
  row "write-package (cached Hub source) / same floor" "$(ratio "$plain" "$floor")" "info" info
  rm -rf "$repo_dir" "$hf" "$cache" "$out"
}

# SKIPPY_BENCH_ONLY="write_package push" runs just those sections.
only() { [ -z "${SKIPPY_BENCH_ONLY:-}" ] || [[ " $SKIPPY_BENCH_ONLY " == *" $1 "* ]]; }
only inspect && bench_inspect
only select94 && bench_select94
only write_package && bench_write_package
only write_package_hub && bench_write_package_hub
only validate_package && bench_validate_package
only schema2 && bench_schema2
only validate_rss && bench_validate_rss
only verify && bench_verify
only materialize && bench_materialize
only materialize_source && bench_materialize_source
only fetch && bench_fetch
only push && bench_push
only xet && bench_xet
rm -rf "$PKG" "$SCRATCH" "$SKIPPY_CACHE_DIR"

# ---------------------------------------------------------------- summary

section "summary ($(gib "$MODEL_BYTES") model, $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg), $(($(date +%s) - T_START)) s total)"
printf '   %-44s %-22s %-18s %s\n' figure value target status
for i in "${!SUM_FIG[@]}"; do
  printf '   %-44s %-22s %-18s %s\n' "${SUM_FIG[$i]}" "${SUM_VAL[$i]}" "${SUM_TGT[$i]}" "${SUM_ST[$i]}"
done
