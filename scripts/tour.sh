#!/usr/bin/env bash
# Runs the README's tour exactly as written: the shell blocks between
# <!-- tour:begin --> and <!-- tour:end --> in README.md, extracted here (the
# README is the one source), run in order with `set -e` from the repository
# root, offline (HF_ENDPOINT points at a closed port until the tour starts its
# own local Hub), with build/bin on PATH. Exits non-zero when any command
# fails, or when the tour changes the environment of the shell it is pasted
# into (it is sourced here, as a paste would run it, and the environment is
# compared before and after); then once more pasted into an interactive shell
# (bash -i on a pseudo-terminal, as a user's terminal runs it: job control on),
# failing when any process it started outlives it. Usage: scripts/tour.sh
# [BIN_DIR]   (default: build/bin)
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
  for v in T M COMMIT PEER SERVER; do
    if [ -n "${!v+set}" ]; then echo "tour: the tour left \$$v set in the shell it ran in" >&2; exit 1; fi
  done' _ "$script"

# Pasted into an interactive shell: every command of the tour typed at a
# prompt, job control on. `script` gives bash a pseudo-terminal; the shell's
# session is everything the tour started there (the local Hub has a session
# of its own, ended by its --stop). set -e: a failing command ends the shell
# before it prints the end marker.
echo "tour: again, pasted into an interactive shell (bash -i on a terminal)"
paste=$(mktemp /tmp/skippy-tour-paste.XXXXXX)
log=$(mktemp /tmp/skippy-tour-log.XXXXXX)
trap 'rm -f "$script" "$paste" "$log"; [ -n "${SKIPPY_LOCAL_HUB_PID:-}" ] && kill -- -"$SKIPPY_LOCAL_HUB_PID" 2>/dev/null; true' EXIT
{
  echo 'echo "tour-session=$$"'
  echo 'set -e'
  cat "$script"
  echo 'echo "tour-end=$?"'
  echo 'exit'
} > "$paste"
timeout 300 script -qec "bash --norc --noprofile -i" /dev/null < "$paste" > "$log" 2>&1 || true
# (the terminal's control sequences may precede a line: no ^ anchors)
sid=$(grep -ao 'tour-session=[0-9][0-9]*' "$log" | head -n 1 | cut -d= -f2)
if ! grep -aq 'tour-end=0' "$log" || [ -z "$sid" ]; then
  echo "tour: the tour failed in an interactive shell; its terminal said:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
# A process of the tour's session (not a zombie awaiting its reaper) that
# is still there a moment after the shell exited was left running.
left=""
for _ in 1 2 3 4 5 6 7 8 9 10; do
  left=$(ps -e -o pid=,sid=,stat=,args= | awk -v s="$sid" '$2 == s && $3 !~ /^Z/')
  [ -z "$left" ] && break
  sleep 0.5
done
if [ -n "$left" ]; then
  echo "tour: pasted into an interactive shell, the tour left these processes running:" >&2
  echo "$left" >&2
  echo "$left" | awk '{print $1}' | xargs -r kill 2>/dev/null || true
  exit 1
fi
echo "tour: passed"
