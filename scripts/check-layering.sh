#!/usr/bin/env bash
# The one-way rule between the concept libraries (README "Architecture"):
# a file may include headers of its own library and of the libraries below
# it, never above. Run by ctest (Layering.NoIncludeRunsAgainstTheDataFlow).
# Every public header must be owned by a library in the table below, so a
# new header cannot slip past the rule; it must be in the installed list
# (cmake/public-headers.cmake: exactly include/skippy/), and its leading
# comment must say how it may be used from threads ("Thread-safety: ...").
# Internal headers live beside their sources (src/<library>/x.h, included as
# "<library>/x.h") and are checked by the folder they are in.
#   usage: scripts/check-layering.sh [SOURCE_DIR]
set -euo pipefail
root="${1:-$(cd "$(dirname "$0")/.." && pwd)}"
cd "$root"

# library -> the libraries it may use (everything below it in the data flow)
declare -A allowed=(
  [util]=""
  [gguf]="util"
  [xet]="util"
  [format]="gguf util"
  [publish]="format gguf xet util"
  [consume]="format gguf util"
  [plan]="consume format gguf util"
  [generation]="consume format gguf util"
  [source]="consume publish format gguf util"
  [hub]="source consume publish format gguf xet util"
  [peer]="source consume publish format gguf util"
  [capi]="hub peer source generation plan consume publish format gguf xet util"
)

# public header -> owning library
declare -A owner=(
  [error.h]=util [version.h]=util
  [gguf.h]=gguf [model_source.h]=gguf
  [manifest.h]=format [package_layout.h]=format [abi.h]=format
  [package_writer.h]=publish [package_validator.h]=publish [package_convert.h]=publish
  [stage.h]=consume [verify.h]=consume [stage_view.h]=consume [materialize.h]=consume
  [plan.h]=plan
  [policy.h]=generation [speculative.h]=generation [ngram.h]=generation [package_generation.h]=generation
  [source.h]=source
  [hub.h]=hub [hub_publish.h]=hub [hub_stream.h]=hub
  [peer.h]=peer [peer_identity.h]=peer [peer_topology.h]=peer
  [skippy.h]=capi
  [manifest_v2.h]=format [package.h]=format [package_catalog.h]=format [package_signature.h]=format [stage_admission.h]=format
)

fail=0
owner_of_include() {  # "skippy/x.h" or "<lib>/x.h" -> library, or "" when not ours
  local inc="$1"
  case "$inc" in
    skippy/*)
      local h="${inc#skippy/}"
      if [ -n "${owner[$h]:-}" ]; then echo "${owner[$h]}"; else echo "?"; fi ;;
    */*)
      local d="${inc%%/*}"
      if [ -n "${allowed[$d]+x}" ]; then echo "$d"; else echo ""; fi ;;
    *) echo "" ;;
  esac
}

check_file() {  # file library
  local file="$1" lib="$2" inc dep
  while IFS= read -r inc; do
    dep="$(owner_of_include "$inc")"
    [ -z "$dep" ] && continue
    if [ "$dep" = "?" ]; then
      echo "$file: includes \"$inc\", a public header no library owns (add it to scripts/check-layering.sh)"
      fail=1
      continue
    fi
    [ "$dep" = "$lib" ] && continue
    if [[ " ${allowed[$lib]} " != *" $dep "* ]]; then
      echo "$file: the $lib library includes \"$inc\" of the $dep library, which sits above it (data walks one way)"
      fail=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
}

for dir in src/*/; do
  lib="$(basename "$dir")"
  if [ -z "${allowed[$lib]+x}" ]; then
    echo "src/$lib: a folder that is not a library in scripts/check-layering.sh"
    fail=1
    continue
  fi
  while IFS= read -r -d '' f; do check_file "$f" "$lib"; done < <(find "$dir" \( -name '*.cpp' -o -name '*.h' \) -print0)
done
for f in include/skippy/*.h; do
  h="$(basename "$f")"
  if [ -z "${owner[$h]:-}" ]; then
    echo "$f: a public header no library owns (add it to scripts/check-layering.sh)"
    fail=1
    continue
  fi
  check_file "$f" "${owner[$h]}"
done

# The installed list is the directory, header by header.
listed=$(sed -n '/^set(SKIPPY_PUBLIC_HEADERS/,/^)/p' cmake/public-headers.cmake | grep -E '^[[:space:]]+[a-z0-9_]+\.h$' |
  tr -d ' ' | sort)
present=$(cd include/skippy && ls -1 *.h | sort)
if [ "$listed" != "$present" ]; then
  echo "cmake/public-headers.cmake and include/skippy/ differ (< listed only, > present only); list a public header," \
       "or move an internal one beside its sources:"
  diff <(echo "$listed") <(echo "$present") | grep '^[<>]'
  fail=1
fi
# Every installed header states its thread-safety in its leading comment.
for h in $present; do
  # (grep reads all of awk's output: with -q it could quit first, and pipefail
  # would then count awk's SIGPIPE as a missing statement, now and then)
  if ! awk '/^#pragma once/ { exit } { print }' "include/skippy/$h" | grep 'Thread-safety: ' >/dev/null; then
    echo "include/skippy/$h: its leading comment does not state its thread-safety (\"Thread-safety: ...\")"
    fail=1
  fi
done

if [ "$fail" -ne 0 ]; then
  echo "layering: FAILED"
  exit 1
fi
echo "layering: every include follows the data flow"
