#!/usr/bin/env bash
# Runs every documented example command, as written: each "skippy-model-package"
# line (with its "\" continuations) in every command's --help (the source of the
# man page and of docs/CLI.md's reference), and each run of such lines in
# docs/*.md (outside CLI.md's generated part; a run is one example, its commands
# in order). Exits non-zero, naming it, when one fails: a documented command
# that does not work breaks the suite. (The README's tour is scripts/tour.sh.)
#
# Each example runs with `set -e` in a scratch world of its own, a copy of one
# prepared once, holding what examples read: model.gguf (a real model with an
# MTP layer, 4 layers), model-00001-of-00003.gguf.. (a split model),
# model-package/ and pkg/ and pkg-schema1/ (schema 1, written from model.gguf),
# pkg-schema2/ and schema2-package/ (its schema 2 conversion), examples/, topology.json,
# HOME=world/home with ~/.skippy/owner and ~/.skippy/node; a local Hub
# (scripts/local-hub.sh) holding org/Model-GGUF (model.gguf as
# Model-Q4_K_M.gguf) and meshllm/Qwen3-8B-Q4_K_M-layers and meshllm/Model-layers
# (model-package/), the token the examples show (hf_...) accepted for writes;
# COMMIT is the commit of meshllm/Qwen3-8B-Q4_K_M-layers. What an example writes
# (--out-dir, --out, init-owner's --dir, issue-node's --out) does not exist yet.
# Two values name machines a test cannot have and are replaced: a listen
# address 0.0.0.0:7470 by 127.0.0.1:0 (a server that prints its address and is
# stopped after 5 s passes) and the coordinator 10.0.0.5:7470 by one this script
# runs on 127.0.0.1. Nothing reaches the internet.
# Usage: scripts/examples.sh [BIN_DIR]   (default: build/bin)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
bin=$(cd "${1:-build/bin}" && pwd)
cli=$bin/skippy-model-package
[ -x "$cli" ] || { echo "examples: no $cli (build first)" >&2; exit 2; }
T=$(mktemp -d /tmp/skippy-examples.XXXXXX)
coordinator_pid=
cleanup() {
  [ -n "$coordinator_pid" ] && kill "$coordinator_pid" 2>/dev/null
  [ -n "${SKIPPY_LOCAL_HUB_PID:-}" ] && kill -- -"$SKIPPY_LOCAL_HUB_PID" 2>/dev/null
  rm -rf "$T" "${SKIPPY_LOCAL_HUB_DIR:-/nonexistent}"
  true
}
trap cleanup EXIT
export PATH="$bin:$PATH" HF_TOKEN= HF_HUB_OFFLINE= SKIPPY_CACHE_DIR= XDG_CACHE_HOME=

# ---- the examples: one file per example, its lines in order ----
mkdir -p "$T/examples"
n=0
add_example() {  # $1: where it is documented; stdin: the commands
  n=$((n + 1))
  { printf '# %s\n' "$1"; cat; } > "$T/examples/$(printf %03d $n)"
}
help_of_all() {
  local c s
  for c in $("$cli" --help | awk '/^Subcommands:/ { on = 1; next } on && /^$/ { exit } on && /^  [a-z]/ { print $1 }'); do
    if [ "$c" = identity ]; then
      for s in $("$cli" identity --help | awk '/^Subcommands:/ { on = 1; next } on && /^$/ { exit } on && /^  [a-z]/ { print $1 }'); do
        printf '%s\n' "identity $s"
      done
    else
      printf '%s\n' "$c"
    fi
  done
}
while read -r c; do
  # shellcheck disable=SC2086
  "$cli" $c --help | awk -v where="$c --help" -v T="$T" '
    cont { print >> out; cont = /\\$/; next }
    /^[[:space:]]+([A-Z_]+=[^ ]+ )*skippy-model-package / {
      k++; out = T "/help-" where "@" k; gsub(/ /, "_", out)
      line = $0; sub(/^[[:space:]]+/, "", line); print line > out; cont = /\\$/; next }' T="$T"
done < <(help_of_all)
for f in "$T"/help-*; do
  [ -e "$f" ] || continue
  w=${f#"$T"/help-}; w=${w//_/ }
  add_example "${w%@*}, example ${w##*@}" < "$f"
done
for doc in docs/*.md; do
  awk -v out="$T/doc-$(basename "$doc")" '
    /^<!-- help:begin -->$/ { skip = 1 } /^<!-- help:end -->$/ { skip = 0; next } skip { next }
    cont { print >> file; cont = /\\$/; next }
    /^[[:space:]]*([A-Z_]+=[^ ]+ )*skippy-model-package / {
      if (!inrun) { k++; file = out "@" k "@" NR; inrun = 1 }
      line = $0; sub(/^[[:space:]]+/, "", line); print line >> file; cont = /\\$/; next }
    { inrun = 0 }' "$doc"
done
for f in "$T"/doc-*; do
  [ -e "$f" ] || continue
  w=${f#"$T"/doc-}
  w=${w%@*}
  add_example "docs/${w%%@*}, line ${w##*@}" < "$f"
done
[ "$n" -gt 0 ] || { echo "examples: found none" >&2; exit 2; }

# ---- the world they run in ----
B=$T/base
mkdir -p "$B/home" "$T/hub-model"
cp tests/data/glm4moe-mtp-tiny.gguf "$B/model.gguf"
for i in 1 2 3; do cp "tests/data/llama-tiny-q4_0-0000$i-of-00003.gguf" "$B/model-0000$i-of-00003.gguf"; done
cp -r examples "$B/examples"
(
  cd "$B"
  export HOME=$B/home
  q() { "$cli" "$@" > /dev/null 2>&1 || { echo "examples: preparing the world: $* failed" >&2; "$cli" "$@" >&2; exit 1; }; }
  q write-package ./model.gguf --out-dir model-package --model-id org/repo:Q4_K_M --source-revision 0123abc --source-file model.gguf
  cp -r model-package pkg && cp -r model-package pkg-schema1
  q convert-package model-package --to 2 --out-dir pkg-schema2 --source model.gguf
  cp -r pkg-schema2 schema2-package
  q identity init-owner --dir home/.skippy/owner
  q identity issue-node --owner home/.skippy/owner --out home/.skippy/node
  q identity issue-node --owner home/.skippy/owner --out "$T/coordinator"
)
cp "$B/model.gguf" "$T/hub-model/Model-Q4_K_M.gguf"
eval "$(scripts/local-hub.sh --start)"
curl -sS --max-time 10 -X POST "$HF_ENDPOINT/_admin/config" -H 'content-type: application/json' -d '{"token":"hf_..."}' > /dev/null
export HF_TOKEN=hf_...
scripts/local-hub.sh --publish org/Model-GGUF "$T/hub-model" > /dev/null
COMMIT=$(scripts/local-hub.sh --publish meshllm/Qwen3-8B-Q4_K_M-layers "$B/model-package")
scripts/local-hub.sh --publish meshllm/Model-layers "$B/model-package" > /dev/null
scripts/local-hub.sh --publish ns/repo "$B/model-package" > /dev/null
mkdir -p "$T/catalog-seed" && echo "catalog" > "$T/catalog-seed/README.md"
scripts/local-hub.sh --publish datasets/meshllm/catalog "$T/catalog-seed" > /dev/null
export COMMIT
node_id() { "$cli" identity show --dir "$1" --json | sed -n 's/.*"node_id": "\([0-9a-f]*\)".*/\1/p'; }
cat > "$B/topology.json" <<JSON
{
  "topology_id": "examples-1",
  "run_id": "run-1",
  "package_ref": "hf://meshllm/Qwen3-8B-Q4_K_M-layers@$COMMIT",
  "manifest_sha256": "$(sha256sum "$B/model-package/model-package.json" | cut -d' ' -f1)",
  "stages": [
    {"stage_id": "s0", "stage_index": 0, "node_id": "$(node_id "$T/coordinator")", "layer_start": 0, "layer_end": 2},
    {"stage_id": "s1", "stage_index": 1, "node_id": "$(node_id "$B/home/.skippy/node")", "layer_start": 2, "layer_end": 4}
  ]
}
JSON
# The coordinator the --peer example asks.
HF_HUB_CACHE=$T/coordinator-hf "$cli" fetch "hf://meshllm/Qwen3-8B-Q4_K_M-layers@$COMMIT" > /dev/null 2>&1
MESH_LLM_ARTIFACT_TRANSFER=trusted HF_HUB_CACHE=$T/coordinator-hf "$cli" serve-artifacts --listen 127.0.0.1:0 \
  --topology "$B/topology.json" --identity "$T/coordinator" > "$T/coordinator.out" 2> "$T/coordinator.err" &
coordinator_pid=$!
for ((i = 0; i < 100; i++)); do [ -s "$T/coordinator.out" ] && break; sleep 0.1; done
PEER=$(head -n 1 "$T/coordinator.out")
[ -n "$PEER" ] || { echo "examples: the coordinator did not start: $(cat "$T/coordinator.err")" >&2; exit 1; }

# ---- run them ----
failed=0
for e in "$T"/examples/*; do
  where=$(head -n 1 "$e"); where=${where#\# }
  W=$T/world-${e##*/}
  cp -al "$B" "$W"
  body=$(tail -n +2 "$e" | sed -e 's/0\.0\.0\.0:7470/127.0.0.1:0/g' -e "s/10\.0\.0\.5:7470/$PEER/g")
  # What the example writes does not exist yet.
  for target in $(printf '%s\n' "$body" | sed -n 's/.*--\(out-dir\|out\) \([^ ]*\).*/\2/p; s/.*init-owner --dir \([^ ]*\).*/\1/p'); do
    target=${target/#\~/$W/home}
    (cd "$W" && rm -rf -- "$target")
  done
  timeout_s=120
  case "$body" in *serve-artifacts*) timeout_s=5 ;; esac
  set +e
  (cd "$W" && HOME=$W/home HF_HUB_CACHE=$W/hf HF_HOME=$W/hf-home timeout "$timeout_s" bash -euo pipefail -c "$body") \
    > "$W.out" 2> "$W.err"
  rc=$?
  set -e
  if [ $rc -eq 124 ] && [ $timeout_s -eq 5 ] && [ -s "$W.out" ]; then rc=0; fi  # a server that started
  if [ $rc -ne 0 ]; then
    failed=$((failed + 1))
    echo "examples: FAILED ($where, exit $rc):" >&2
    printf '  %s\n' "$body" >&2
    sed 's/^/    | /' "$W.err" | tail -n 15 >&2
  else
    echo "examples: ok   $where: $(printf '%s' "$body" | head -n 1 | cut -c1-110)"
  fi
  rm -rf "$W" "$W.out" "$W.err"
done
echo "examples: $((n - failed)) of $n documented examples ran as written"
[ "$failed" -eq 0 ]
