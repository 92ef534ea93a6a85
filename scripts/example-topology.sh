#!/usr/bin/env bash
# examples/topology.json is what `plan --topology-out` writes for the
# package of the README's tour (written from the bundled model,
# tests/data/llama-tiny-q8_0.gguf, with the tour's provenance flags, at
# SOURCE_DATE_EPOCH=1790000000 so that its manifest is always the same bytes),
# split in two stages for two example nodes, pinned to an example commit of
# hf://org/tiny-layers. This script writes it from the CLI itself, so the
# example is never out of step with the package format or the planner:
#   scripts/example-topology.sh [BIN_DIR]           rewrite examples/topology.json
#   scripts/example-topology.sh --check [BIN_DIR]   exit 1 (with a diff) when it is stale
set -euo pipefail
cd "$(dirname "$0")/.."
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
cli="$(cd "${1:-build/bin}" && pwd)/skippy-model-package"
[ -x "$cli" ] || { echo "example-topology: no $cli (build first)" >&2; exit 2; }
work=$(mktemp -d /tmp/skippy-example-topology.XXXXXX)
trap 'rm -rf "$work"' EXIT

coordinator=bf24385098410391a81d92b2de72d3a2946d24f42ee387e51004a868281a2408  # example node ids
worker=87eba76e7f3164534045ba922e7770fb58bbd14ad732bbf5ba6f11cc56989e6e
commit=0123456789abcdef0123456789abcdef01234567                                # an example commit
SOURCE_DATE_EPOCH=1790000000 "$cli" write-package tests/data/llama-tiny-q8_0.gguf --out-dir "$work/pkg" \
  --model-id org/Tiny-GGUF:Q8_0 --source-revision 0123abc --source-file llama-tiny-q8_0.gguf > /dev/null
"$cli" plan "$work/pkg" --stages 2 --topology-out "$work/topology.json" --nodes "$coordinator,$worker" \
  --package-ref "hf://org/tiny-layers@$commit" --topology-id tour-1 --run-id run-1 > /dev/null
if [ "$check" = 1 ]; then
  if ! diff -u examples/topology.json "$work/topology.json"; then
    echo "example-topology: examples/topology.json is not what plan --topology-out writes for the tour's package;" \
         "run scripts/example-topology.sh" >&2
    exit 1
  fi
  echo "example-topology: examples/topology.json is what plan --topology-out writes"
else
  cp "$work/topology.json" examples/topology.json
  echo "example-topology: wrote examples/topology.json"
fi
