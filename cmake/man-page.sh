#!/usr/bin/env bash
# Writes the CLI's man page from its own --help (help2man), with every
# subcommand's --help as a section of its own, so the page never drifts
# from the program. Run by the build (tools/CMakeLists.txt).
#   usage: cmake/man-page.sh CLI OUT.1 [HELP2MAN]
set -euo pipefail
cli="$1" out="$2" help2man="${3:-help2man}"
inc="$(mktemp)"
trap 'rm -f "$inc"' EXIT

# roff: a backslash is \e; a line starting with . or ' would be a request.
roff() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }

{
  echo "[DESCRIPTION]"
  echo "Splits GGUF language models into layer packages (a manifest plus one GGUF fragment per"
  echo "transformer layer and shared fragments) and consumes them one stage, a layer range, at a time."
  echo "Every command takes \\fB\\-\\-json\\fR for one JSON document on stdout. Exit codes: 0 success,"
  echo "1 invalid input or failed check, 2 usage error."
  echo "[COMMANDS]"
  # The names listed under "Subcommands:", up to the blank line after them.
  for cmd in $("$cli" --help | awk '/^Subcommands:/ { on = 1; next } on && !NF { exit }
                                    on && /^  [a-z][a-z0-9-]* / { print $1 }'); do
    echo ".SS $cmd"
    echo ".nf"
    "$cli" "$cmd" --help | roff
    echo ".fi"
  done
} >"$inc"
[ -s "$inc" ] && grep -q '^\.SS ' "$inc" || { echo "man-page.sh: no subcommands in $cli --help" >&2; exit 1; }

"$help2man" --no-info --section 1 --name "layer packages for GGUF models" --include "$inc" \
  --output "$out.tmp" "$cli"
mv "$out.tmp" "$out"
