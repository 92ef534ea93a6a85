#!/usr/bin/env bash
# What a user reads must stand on its own (run by ctest as Docs.*):
#   scripts/check-docs.sh reference CLI   docs/CLI.md holds every command's current --help
#   scripts/check-docs.sh env             every environment variable the tool reads is in docs/CLI.md
#   scripts/check-docs.sh self-contained  nothing in README.md, docs/ or --help points outside the repository
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in
  reference) exec bash scripts/cli-reference.sh --check "${2:-build/bin/skippy-model-package}" ;;
  env)
    # Every variable read through src/util/env.cpp (its one home), plus the peer mode switch.
    names=$( { grep -oE '"(SKIPPY|HF|HUGGING|MESH|SOURCE|XDG)[A-Z0-9_]*"' src/util/env.cpp; echo '"MESH_LLM_ARTIFACT_TRANSFER"'; } |
      tr -d '"' | sort -u)
    missing=""
    for n in $names; do grep -q "\`$n\`" docs/CLI.md || missing+=" $n"; done
    if [ -n "$missing" ]; then echo "check-docs: docs/CLI.md does not document:$missing" >&2; exit 1; fi
    echo "check-docs: all $(echo "$names" | wc -w) environment variables are in docs/CLI.md"
    ;;
  self-contained)
    bad=$(grep -nE '\.\./shared|shared/docs' README.md docs/*.md tools/*.cpp 2>/dev/null || true)
    if [ -n "$bad" ]; then echo "check-docs: these point outside the repository:" >&2; echo "$bad" >&2; exit 1; fi
    echo "check-docs: README.md, docs/ and the CLI's help point only inside the repository"
    ;;
  *) echo "usage: scripts/check-docs.sh reference [CLI] | env | self-contained" >&2; exit 2 ;;
esac
