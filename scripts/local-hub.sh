#!/usr/bin/env bash
# A local Hugging Face Hub on 127.0.0.1, in one command: the stand-in the tests
# use (tests/hub/hub_standin.mjs, Node builtins only). It serves downloads
# (resolve, the API, LFS redirects to a storage listener) and uploads (LFS
# batch, commits) like huggingface.co, on two free ports, and a Xet CAS on a
# third (xet tokens, xorbs, shards, reconstructions; tests/hub/cas_standin.mjs).
#
#   scripts/local-hub.sh                      serve in the foreground until Ctrl-C
#   eval "$(scripts/local-hub.sh --start)"    start it in the background; sets
#                                             HF_ENDPOINT, HF_TOKEN, SKIPPY_LOCAL_HUB_PID
#   scripts/local-hub.sh --publish [datasets/]NS/REPO DIR [--branch B]
#                                             publish every file under DIR as one commit
#                                             (the repository is created); prints the commit
#   scripts/local-hub.sh --stop               stop the background one (SKIPPY_LOCAL_HUB_PID)
#
# The token is hf_test (write); hf_read is a read-only token. Nothing leaves
# this machine: both listeners bind 127.0.0.1.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
standin="$here/tests/hub/hub_standin.mjs"

die() { echo "local-hub: $*" >&2; exit 1; }
command -v node >/dev/null || die "needs Node.js (bash scripts/install-deps.sh installs it)"

# Waits for the stand-in's ready line in $1 and prints its endpoint.
endpoint_from() {
  local out=$1 i
  for ((i = 0; i < 150; i++)); do
    if [ -s "$out" ]; then
      sed -n 's/.*"endpoint":"\([^"]*\)".*/\1/p' "$out" | head -n 1
      return 0
    fi
    sleep 0.1
  done
  return 1
}

case "${1:-}" in
  "")
    state=$(mktemp -d /tmp/skippy-local-hub.XXXXXX)
    trap 'rm -rf "$state"' EXIT
    # stdin stays open (the stand-in exits at EOF); Ctrl-C ends both.
    sleep infinity | node "$standin" >"$state/out" &
    ep=$(endpoint_from "$state/out") || die "the stand-in did not start"
    echo "local Hub at $ep (Ctrl-C stops it). In another shell:"
    echo "  export HF_ENDPOINT=$ep HF_TOKEN=hf_test"
    wait
    ;;
  --start)
    state=$(mktemp -d /tmp/skippy-local-hub.XXXXXX)
    # A session of its own, so --stop ends the stand-in and the sleep that holds its stdin open.
    setsid bash -c 'sleep infinity | exec node "$1" >"$2/out" 2>"$2/err"' _ "$standin" "$state" </dev/null >/dev/null 2>&1 &
    pgid=$!
    ep=$(endpoint_from "$state/out") || { kill -- -"$pgid" 2>/dev/null || true; die "the stand-in did not start: $(cat "$state/err")"; }
    echo "export HF_ENDPOINT=$ep HF_TOKEN=hf_test SKIPPY_LOCAL_HUB_PID=$pgid SKIPPY_LOCAL_HUB_DIR=$state"
    ;;
  --publish)
    [ $# -ge 3 ] || die "usage: --publish NS/REPO DIR [--branch B]"
    [ -n "${HF_ENDPOINT:-}" ] || die "HF_ENDPOINT is not set: eval \"\$(scripts/local-hub.sh --start)\" first"
    repo=$2 dir=$(cd "$3" && pwd) branch=main
    [ "${4:-}" = "--branch" ] && branch=${5:?--branch needs a name}
    body=$(printf '{"repo":"%s","dir":"%s","branch":"%s"}' "$repo" "$dir" "$branch")
    answer=$(curl -sS --max-time 60 -X POST "$HF_ENDPOINT/_admin/repos" -H 'content-type: application/json' -d "$body") ||
      die "the local Hub at $HF_ENDPOINT did not answer"
    commit=$(printf '%s' "$answer" | sed -n 's/.*"commit":"\([0-9a-f]\{40\}\)".*/\1/p')
    [ -n "$commit" ] || die "publish refused: $answer"
    echo "$commit"
    ;;
  --stop)
    [ -n "${SKIPPY_LOCAL_HUB_PID:-}" ] || die "SKIPPY_LOCAL_HUB_PID is not set (nothing started with --start here)"
    kill -- -"$SKIPPY_LOCAL_HUB_PID" 2>/dev/null || true
    [ -n "${SKIPPY_LOCAL_HUB_DIR:-}" ] && case "$SKIPPY_LOCAL_HUB_DIR" in /tmp/skippy-local-hub.*) rm -rf "$SKIPPY_LOCAL_HUB_DIR" ;; esac
    ;;
  -h|--help)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    ;;
  *)
    die "unknown option $1 (see --help)"
    ;;
esac
