#!/usr/bin/env bash
# README command 1: install dependencies, build, and run the main job on the
# bundled default model (tests/data/llama-tiny-q8_0.gguf).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DSKIPPY_WERROR=ON >/dev/null
cmake --build build -j2 --target skippy-model-package

cli=build/bin/skippy-model-package
model=${1:-tests/data/llama-tiny-q8_0.gguf}
echo "== inspect $model"
"$cli" inspect "$model"
