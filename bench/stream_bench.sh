#!/usr/bin/env bash
# write-package --stream against the local Hub stand-in, in one command:
#
#   bench/stream_bench.sh [SIZE]     # SIZE: the model, e.g. 4GiB (default 1GiB: a quick run)
#
# Generates a split synthetic model (skippy-make-model --split), publishes it
# to the stand-in with every storage connection throttled (like a CDN edge),
# and prints side by side, from the same run:
#   - the streamed split (org/repo:DIST --stream --push --max-disk 5% of the
#     model): wall time, and the peak bytes on disk (output directory +
#     source headers + Hugging Face cache) sampled every 50 ms, against
#     --max-disk;
#   - the floor: max(parallel curl download of the source, curl upload of the
#     package, write-package --stream's CPU time);
#   - today's path: write-package of the same Hub source without --stream
#     (the whole source into the cache, then the write, uploads overlapping
#     it) with the same --max-disk, and its peak disk.
#
# Environment: SKIPPY_STREAM_BENCH_SIZE (the SIZE argument's default), _SHARDS (4), _LAYERS
# (64: a fragment about 1.5% of the model, as a 61-layer model's),
# _BUDGET_PCT (--max-disk as a percentage of the model, default 5),
# _CONN_RATE (per storage connection, bytes/s, default 33554432),
# _CONNECTIONS (8), _DIR (default /tmp/skippy-stream-bench, under /tmp),
# SKIPPY_CLI / SKIPPY_MAKE_MODEL (default build/bin/...), SKIPPY_STREAM_BENCH_RT=1
# (the timed runs under chrt -f 50: less noise from other work on the machine;
# needs the right to use SCHED_FIFO).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
case "${1:-}" in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
SIZE=${1:-${SKIPPY_STREAM_BENCH_SIZE:-1GiB}}
RT=()
[ "${SKIPPY_STREAM_BENCH_RT:-0}" = 1 ] && RT=(chrt -f 50)
SHARDS=${SKIPPY_STREAM_BENCH_SHARDS:-4}
LAYERS=${SKIPPY_STREAM_BENCH_LAYERS:-64}
RATE=${SKIPPY_STREAM_BENCH_CONN_RATE:-33554432}
CONNS=${SKIPPY_STREAM_BENCH_CONNECTIONS:-8}
WORK=${SKIPPY_STREAM_BENCH_DIR:-/tmp/skippy-stream-bench}
CLI=${SKIPPY_CLI:-$here/build/bin/skippy-model-package}
MAKE=${SKIPPY_MAKE_MODEL:-$here/build/bin/skippy-make-model}
case "$WORK" in /tmp/*) ;; *) echo "stream-bench: SKIPPY_STREAM_BENCH_DIR must be under /tmp" >&2; exit 1 ;; esac
for t in "$CLI" "$MAKE"; do [ -x "$t" ] || { echo "stream-bench: build first ($t missing)" >&2; exit 1; }; done
command -v node >/dev/null || { echo "stream-bench: needs node" >&2; exit 1; }

mkdir -p "$WORK/model" "$WORK/logs"
say() { printf '%s\n' "$*"; }
gib() { awk -v b="$1" 'BEGIN { printf "%.2f GiB", b / 1073741824 }'; }
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

# The model: PREFIX-Q8_0-0000i-of-0000N.gguf (the distribution tag in the name).
"$MAKE" "$WORK/model/model-Q8_0" --size "$SIZE" --split "$SHARDS" --layers "$LAYERS" --reuse -q >/dev/null
MODEL_FILES=("$WORK"/model/model-Q8_0-*-of-*.gguf)
MODEL_BYTES=$(stat -c %s "${MODEL_FILES[@]}" | awk '{ s += $1 } END { printf "%.0f", s }')
PCT=${SKIPPY_STREAM_BENCH_BUDGET_PCT:-5}
BUDGET=$((MODEL_BYTES * PCT / 100))

# The stand-in, its uploads under $WORK (not the tests' tmpfs).
mkdir -p "$WORK/hub"
fifo=$WORK/hub.fifo
rm -f "$fifo" && mkfifo "$fifo"
HUB_STANDIN_DATA_DIR=$WORK/hub node "$here/tests/hub/hub_standin.mjs" <"$fifo" >"$WORK/logs/hub.out" 2>"$WORK/logs/hub.err" &
hub_pid=$!
exec 8>"$fifo"
trap 'exec 8>&-; wait "$hub_pid" 2>/dev/null || true' EXIT
for ((i = 0; i < 300; i++)); do grep -q "storage" "$WORK/logs/hub.out" 2>/dev/null && break; sleep 0.1; done
EP=$(sed -n 's/.*"endpoint":"\([^"]*\)".*/\1/p' "$WORK/logs/hub.out")
[ -n "$EP" ] || { echo "stream-bench: the stand-in did not start" >&2; exit 1; }
curl -sf -X POST "$EP/_admin/config" -d '{"token":"hf_test","url_ttl_secs":86400,"multipart_threshold":1099511627776}' >/dev/null
curl -sf -X POST "$EP/_admin/repos" -H 'content-type: application/json' \
  -d "{\"repo\":\"bench/model-GGUF\",\"dir\":\"$WORK/model\",\"branch\":\"main\"}" >/dev/null
curl -sf -X POST "$EP/_admin/config" -d "{\"storage_conn_bytes_per_sec\":$RATE}" >/dev/null
export HF_ENDPOINT=$EP HF_TOKEN=hf_test SKIPPY_HF_CONNECTIONS=$CONNS HF_HUB_CACHE=$WORK/hf HF_HUB_OFFLINE=

say "== write-package --stream against the local Hub stand-in"
say "   model: $(gib "$MODEL_BYTES") in $SHARDS shards; storage throttled to $(mib "$RATE")/s per connection, $CONNS connections;"
say "   --max-disk $BUDGET bytes ($(mib "$BUDGET"), $PCT% of the model); $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)${RT[*]:+; timed runs under ${RT[*]}}"

# CPU seconds (user + sys) the stand-in has used so far: it serves every
# byte on these same cores, so the machine's floor counts it too.
hub_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$hub_pid/stat"; }
minus() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a - b }'; }

# Runs "$@" in the background, sampling the bytes held under the watched
# directories every 50 ms (a placeholder's blocks, not its apparent size).
# Sets RUN_WALL, RUN_CPU (user + sys), RUN_HUB_CPU (the stand-in's), RUN_PEAK, RUN_OK.
sample_run() {
  local watch=("${WATCH[@]}") start pid n hub0
  RUN_PEAK=0
  hub0=$(hub_cpu)
  start=$(now)
  ${RT[@]+"${RT[@]}"} /usr/bin/time -o "$WORK/logs/time" -f '%e %U %S' "$@" >"$WORK/logs/run.json" 2>"$WORK/logs/run.err" &
  pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    n=$({ find "${watch[@]}" -type f -printf '%s %b\n' 2>/dev/null || true; } |
      awk '{ a = $1; b = $2 * 512; s += (a < b ? a : b) } END { printf "%.0f", s }')
    ((n > RUN_PEAK)) && RUN_PEAK=$n
    sleep 0.05
  done
  RUN_OK=1
  wait "$pid" || RUN_OK=0
  RUN_WALL=$(elapsed "$start")
  RUN_HUB_CPU=$(minus "$(hub_cpu)" "$hub0")
  RUN_CPU=$(tail -n 1 "$WORK/logs/time" | awk '{ printf "%.2f", $2 + $3 }')
}
forget_uploads() { curl -sf -X DELETE "$EP/_admin/uploads" >/dev/null; }

# 1. The streamed split.
rm -rf "$WORK/streamed" "$WORK/hf" "$WORK/.streamed.stream-headers"
forget_uploads
sync
WATCH=("$WORK/streamed" "$WORK/.streamed.stream-headers" "$WORK/hf")
sample_run "$CLI" write-package bench/model-GGUF:Q8_0 --stream --out-dir "$WORK/streamed" \
  --push hf://bench/streamed --create --max-disk "$BUDGET" --json
if ((!RUN_OK)); then cat "$WORK/logs/run.err" >&2; exit 1; fi
cp "$WORK/logs/run.err" "$WORK/logs/stream.err"
cp "$WORK/logs/run.json" "$WORK/logs/stream.json"
S_WALL=$RUN_WALL S_CPU=$RUN_CPU S_PEAK=$RUN_PEAK S_HUB_CPU=$RUN_HUB_CPU
S_JSON_PEAK=$(node -e 'const j=JSON.parse(require("fs").readFileSync(process.argv[1]));console.log(j.disk_peak)' "$WORK/logs/run.json")
S_RATES=$(node -e 'const s=JSON.parse(require("fs").readFileSync(process.argv[1])).stream;
  console.log((s.download_bytes_per_sec/1048576).toFixed(1)+" MiB/s down, "+(s.upload_bytes_per_sec/1048576).toFixed(1)+" MiB/s up")' "$WORK/logs/run.json")

# 2. The floor's download: every shard in ranges over $CONNS parallel curl
# connections (the same range size fetch uses: about four per connection).
cfg=$WORK/curl-down.cfg
: >"$cfg"
for f in "${MODEL_FILES[@]}"; do
  size=$(stat -c %s "$f")
  step=$(((size + CONNS * 4 - 1) / (CONNS * 4)))
  for ((off = 0; off < size; off += step)); do
    end=$((off + step < size ? off + step - 1 : size - 1))
    printf 'url = "%s/bench/model-GGUF/resolve/main/%s"\nrange = "%d-%d"\noutput = /dev/null\n' \
      "$EP" "$(basename "$f")" "$off" "$end" >>"$cfg"
  done
done
hub0=$(hub_cpu)
start=$(now)
${RT[@]+"${RT[@]}"} curl -sfL --no-progress-meter --parallel --parallel-max "$CONNS" -K "$cfg"
C_DOWN=$(elapsed "$start")
C_DOWN_HUB_CPU=$(minus "$(hub_cpu)" "$hub0")

# 3. The floor's upload: the package (written locally, untimed) PUT by curl,
# 4 at a time, on the URLs of the stand-in's LFS batch.
rm -rf "$WORK/local-pkg"
"$CLI" write-package "${MODEL_FILES[0]}" --out-dir "$WORK/local-pkg" --model-id bench/model-GGUF:Q8_0 \
  --source-revision r --source-file "$(basename "${MODEL_FILES[0]}")" --json >/dev/null
forget_uploads
auth="Authorization: Bearer hf_test"
curl -sf -H "$auth" -X POST "$EP/api/repos/create" -d '{"name":"curl","organization":"bench"}' >/dev/null || true
declare -A file_of=()
objs="" first=1
while IFS= read -r f; do
  sha=$(sha256sum "$f" | cut -d' ' -f1)
  file_of[$sha]=$f
  ((first)) || objs+=","
  objs+="{\"oid\":\"$sha\",\"size\":$(stat -c %s "$f")}"
  first=0
done < <(find "$WORK/local-pkg" -name '*.gguf' -type f)
ucfg=$WORK/curl-up.cfg
curl -sf -H "$auth" -X POST "$EP/bench/curl.git/info/lfs/objects/batch" \
  -d "{\"operation\":\"upload\",\"transfers\":[\"basic\"],\"objects\":[$objs]}" |
  node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const o of JSON.parse(s).objects)
    if(o.actions)console.log(o.oid+" "+o.actions.upload.href)})' |
  while read -r sha href; do printf 'upload-file = "%s"\nurl = "%s"\noutput = /dev/null\n' "${file_of[$sha]}" "$href"; done >"$ucfg"
sync
hub0=$(hub_cpu)
start=$(now)
${RT[@]+"${RT[@]}"} curl -sf --no-progress-meter --parallel --parallel-max 4 -K "$ucfg"
C_UP=$(elapsed "$start")
C_UP_HUB_CPU=$(minus "$(hub_cpu)" "$hub0")
# The two at once, as the streamed run overlaps them: the stand-in serves
# both from one event loop on these same cores, so each slows the other.
forget_uploads
sync
start=$(now)
${RT[@]+"${RT[@]}"} curl -sfL --no-progress-meter --parallel --parallel-max "$CONNS" -K "$cfg" &
down_pid=$!
${RT[@]+"${RT[@]}"} curl -sf --no-progress-meter --parallel --parallel-max 4 -K "$ucfg"
wait "$down_pid"
C_BOTH=$(elapsed "$start")
rm -rf "$WORK/local-pkg"
FLOOR=$(printf '%s\n' "$C_DOWN" "$C_UP" "$S_CPU" | sort -g | tail -n 1)
# The machine's floor: the stand-in shares these cores, so the streamed run
# needs at least (its CPU + the stand-in's CPU serving it) / cores of wall.
SHARED=$(awk -v a="$S_CPU" -v b="$S_HUB_CPU" -v c="$(nproc)" 'BEGIN { printf "%.2f", (a + b) / c }')
MACHINE_FLOOR=$(printf '%s\n' "$C_BOTH" "$S_CPU" "$SHARED" | sort -g | tail -n 1)

# 4. Today: the whole source into the cache, then the write (uploads overlapping it).
rm -rf "$WORK/cached" "$WORK/hf"
forget_uploads
sync
WATCH=("$WORK/cached" "$WORK/hf")
sample_run "$CLI" write-package bench/model-GGUF:Q8_0 --out-dir "$WORK/cached" \
  --push hf://bench/cached --create --max-disk "$BUDGET" --json
O_WALL=$RUN_WALL O_CPU=$RUN_CPU O_PEAK=$RUN_PEAK O_OK=$RUN_OK
rm -rf "$WORK/cached" "$WORK/hf" "$WORK/streamed"
forget_uploads

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
say ""
printf '   %-46s %12s %14s %16s\n' "" "wall (s)" "peak disk" "vs --max-disk"
printf '   %-46s %12s %14s %16s\n' "write-package --stream --push --max-disk" "$S_WALL" "$(mib "$S_PEAK")" \
  "$( ((S_PEAK <= BUDGET)) && echo "within" || echo "OVER")"
if ((O_OK)); then
  printf '   %-46s %12s %14s %16s\n' "download, then write-package --push --max-disk" "$O_WALL" "$(mib "$O_PEAK")" \
    "$( ((O_PEAK <= BUDGET)) && echo "within" || echo "OVER")"
else
  printf '   %-46s %12s\n' "download, then write-package --push --max-disk" "failed"
fi
say ""
say "   floor max(curl download ${C_DOWN} s, curl upload ${C_UP} s, --stream CPU ${S_CPU} s) = ${FLOOR} s"
say "   --stream / floor = $(ratio "$S_WALL" "$FLOOR") (target <= 1.2); download-then-write / --stream = $(ratio "$O_WALL" "$S_WALL")"
say "   the stand-in on the same $(nproc) cores: ${S_HUB_CPU} CPU s serving --stream (${C_DOWN_HUB_CPU} s curl's download, ${C_UP_HUB_CPU} s its upload);"
say "   machine floor max(curl download and upload at once ${C_BOTH} s, --stream CPU, (--stream CPU + stand-in CPU) / $(nproc) cores = ${SHARED} s)"
say "     = ${MACHINE_FLOOR} s; --stream / machine floor = $(ratio "$S_WALL" "$MACHINE_FLOOR")"
say "   load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
say "   --stream: $S_RATES; its own disk_peak (budget accounting) $(mib "$S_JSON_PEAK"); CPU ${S_CPU} s; today's path CPU ${O_CPU} s"
