#!/usr/bin/env bash
# Runs the README's tour exactly as written: the shell blocks between
# <!-- tour:begin --> and <!-- tour:end --> in README.md, extracted here (the
# README is the one source), run in order with `set -e` from the repository
# root, offline (HF_ENDPOINT points at a closed port until the tour starts its
# own local Hub), with build/bin on PATH. Exits non-zero when any command
# fails, or when the tour changes the environment of the shell it is pasted
# into (it is sourced here, as a paste would run it, and the environment is
# compared before and after). Usage: scripts/tour.sh [BIN_DIR]   (default: build/bin)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(cd "${1:-build/bin}" && pwd)
[ -x "$bin/skippy-model-package" ] || { echo "tour: no $bin/skippy-model-package (build first)" >&2; exit 2; }
script=$(mktemp /tmp/skippy-tour-script.XXXXXX)
trap 'rm -f "$script"; [ -n "${SKIPPY_LOCAL_HUB_PID:-}" ] && kill -- -"$SKIPPY_LOCAL_HUB_PID" 2>/dev/null; true' EXIT
awk '/<!-- tour:begin -->/ { on = 1; next } /<!-- tour:end -->/ { on = 0 } on && /^```/ { code = !code; next } on && code' \
  README.md > "$script"
[ -s "$script" ] || { echo "tour: README.md has no tour blocks" >&2; exit 2; }
echo "tour: running $(grep -c 'skippy-model-package' "$script") skippy-model-package commands from README.md"
# No real network: nothing may reach huggingface.co; the tour's own Hub is local.
export HF_ENDPOINT=http://127.0.0.1:9 HF_TOKEN= PATH="$bin:$PATH"
# Time limits keep a hang from stalling CI: the whole tour takes seconds.
timeout 300 bash -euo pipefail -c '
  before=$(env | grep -v "^_=" | sort)
  set -x
  . "$1"
  { set +x; } 2>/dev/null
  after=$(env | grep -v "^_=" | sort)
  if [ "$before" != "$after" ]; then
    echo "tour: the tour changed the environment of the shell it ran in:" >&2
    diff <(printf "%s\n" "$before") <(printf "%s\n" "$after") >&2
    exit 1
  fi
  for v in T M COMMIT PEER; do
    if [ -n "${!v+set}" ]; then echo "tour: the tour left \$$v set in the shell it ran in" >&2; exit 1; fi
  done' _ "$script"
echo "tour: passed"
