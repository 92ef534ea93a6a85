#!/usr/bin/env bash
# What a user reads must stand on its own (run by ctest as Docs.*):
#   scripts/check-docs.sh reference CLI   docs/CLI.md holds every command's current --help
#   scripts/check-docs.sh env             every environment variable the tool reads is in docs/CLI.md
#   scripts/check-docs.sh self-contained  nothing in README.md, docs/ or --help points outside the repository
#   scripts/check-docs.sh no-issue-numbers [CLI]  README.md, docs/, installed headers and --help say what was decided, never "(#25)"
#   scripts/check-docs.sh spec-linked     the README and docs/package-format.md link the public upstream spec
#   scripts/check-docs.sh no-stale-figures  docs/testing.md and the README state no test count or measured run time
#   scripts/check-docs.sh readme-setup    the README's set-up runs without root and says how long its two commands take
#   scripts/check-docs.sh demo-deps       the demo (README command 1) installs only what the CLI needs
#   scripts/check-docs.sh pasteable       no command or value a user may paste holds a <placeholder> (a shell redirect)
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
  no-issue-numbers)
    # Users cannot see our tracker: "(#25)" or "issue 29" tells them nothing.
    # docs/CLI.md holds every subcommand's --help (the man page is made from
    # the same text); the top-level --help is read from the CLI itself.
    cli=${2:-build/bin/skippy-model-package}
    pattern='(^|[^&/A-Za-z0-9_-])#[0-9]+([^0-9A-Za-z]|$)|[Ii]ssues? #?[0-9]+'
    bad=$(grep -nE "$pattern" README.md docs/*.md include/skippy/*.h || true)
    if [ -x "$cli" ]; then
      bad+=$("$cli" --help | grep -nE "$pattern" | sed 's/^/--help:/' || true)
    fi
    if [ -n "$bad" ]; then
      echo "check-docs: these cite issue numbers users cannot look up; say what was decided instead:" >&2
      echo "$bad" >&2
      exit 1
    fi
    echo "check-docs: README.md, docs/ and --help cite no issue numbers"
    ;;
  spec-linked)
    url='https://github.com/Mesh-LLM/mesh-llm/blob/main/docs/specs/layer-package-repos.md'
    for f in README.md docs/package-format.md; do
      grep -qF "]($url)" "$f" || { echo "check-docs: $f does not link the upstream spec ($url)" >&2; exit 1; }
    done
    echo "check-docs: README.md and docs/package-format.md link the upstream spec"
    ;;
  no-stale-figures)
    # Test counts and measured durations go stale with the next change
    # ("14 tests, 25-40 s" once described a label that held 50): ctest
    # reports them; the docs do not. A limit a test enforces ("under a third
    # of one connection's 8 s") is a specification and may stay. The README's
    # one rough figure, how long its two commands take, is an order of
    # magnitude ("about N minutes"), allowed there only.
    pattern='[0-9]+ tests\b|\b[0-9]+ ?- ?[0-9]+ ?s\b|about [0-9.,]+ ?(s|ms|seconds?|minutes?|min)\b|[0-9.]+x faster|[0-9,]{5,} executions'
    bad=$(grep -nE "$pattern" docs/testing.md || true)
    bad+=$(grep -nE "$pattern" README.md | grep -vE 'about [0-9]+ minutes' || true)
    if [ -n "$bad" ]; then
      echo "check-docs: figures that go stale (ctest reports them; drop them or generate them):" >&2
      echo "$bad" >&2
      exit 1
    fi
    echo "check-docs: docs/testing.md and the README hold no test count or measured run time"
    ;;
  readme-setup)
    # A newcomer pastes the Install block as is: no command in it needs root
    # (sudo is explained in prose, for a prefix the user does not own), and
    # each of the two Quick start commands says roughly how long it takes.
    bad=$(awk '/^[[:space:]]*```/ { inb = !inb; next } inb && /(^|[;&|[:space:]])sudo[[:space:]]/ { print "README.md:" NR ": " $0 }' README.md)
    if [ -n "$bad" ]; then echo "check-docs: a README command block needs root (say when sudo is needed in prose instead):" >&2; echo "$bad" >&2; exit 1; fi
    grep -q 'needs `sudo` only' README.md || { echo "check-docs: the README does not say when cmake --install needs sudo" >&2; exit 1; }
    for cmd in scripts/demo.sh scripts/test.sh; do
      # the paragraph after the command's block states "about N minutes"
      awk -v c="bash $cmd" '$0 ~ c "$" { found = 1; next } found && /about [0-9]+ minutes/ { ok = 1; exit } found && /^[0-9]+\. / { exit } END { exit !ok }' README.md ||
        { echo "check-docs: the README does not say how long \"bash $cmd\" takes (about N minutes)" >&2; exit 1; }
    done
    echo "check-docs: the README's set-up needs no root and says how long its two commands take"
    ;;
  demo-deps)
    # README command 1 installs only what building and running the CLI needs:
    # no sanitizer compilers, test frameworks, benchmarks or Node.
    grep -q 'install-deps.sh --run-only' scripts/demo.sh ||
      { echo "check-docs: scripts/demo.sh does not install with --run-only" >&2; exit 1; }
    run=$(bash scripts/install-deps.sh --run-only --list)
    for p in clang libclang-rt-14-dev libgtest-dev libgmock-dev libbenchmark-dev nodejs npm; do
      if printf '%s\n' "$run" | grep -qx "$p"; then echo "check-docs: install-deps --run-only installs $p" >&2; exit 1; fi
    done
    for p in cmake libssl-dev libcurl4-openssl-dev nlohmann-json3-dev; do
      printf '%s\n' "$run" | grep -qx "$p" || { echo "check-docs: install-deps --run-only lacks $p" >&2; exit 1; }
    done
    all=$(bash scripts/install-deps.sh --list)
    for p in libgtest-dev libbenchmark-dev clang; do
      printf '%s\n' "$all" | grep -qx "$p" || { echo "check-docs: install-deps lacks $p" >&2; exit 1; }
    done
    echo "check-docs: the demo installs the CLI's dependencies only"
    ;;
  pasteable)
    # A placeholder a user must replace is an UPPERCASE word (COMMIT, NODE_ID),
    # never <...>: pasted into a shell, "--source-revision <commit>" is a
    # redirect from a file named "commit". Checked: every line of a code block
    # (its comments aside), and every inline code span that is a command, a
    # flag or an hf:// reference, in README.md and docs/*.md (CLI.md's
    # generated --help part is checked by Docs.EveryDocumentedExampleRuns).
    bad=$(for f in README.md docs/*.md; do
      awk -v F="$f" '
        /^<!-- help:begin -->$/ { skip = 1 } /^<!-- help:end -->$/ { skip = 0; next } skip { next }
        /^[[:space:]]*```/ { inb = !inb; next }
        inb { line = $0; sub(/(^|[[:space:]])#.*/, "", line)
              if (line ~ /<[A-Za-z0-9 _.:-]*>/) print F ":" NR ": " $0; next }
        { s = $0
          while (match(s, /`[^`]+`/)) {
            span = substr(s, RSTART + 1, RLENGTH - 2); s = substr(s, RSTART + RLENGTH)
            if (span ~ /^(skippy-model-package |--|-[a-zA-Z] |hf:\/\/|cmake |bash |scripts\/|export |ctest |[A-Z_]+=)/ &&
                span ~ /<[^>]*>/) print F ":" NR ": " span
          } }' "$f"
    done)
    if [ -n "$bad" ]; then
      echo "check-docs: these hold a <placeholder> (a shell redirect when pasted); write an UPPERCASE word or a value that runs:" >&2
      echo "$bad" >&2
      exit 1
    fi
    echo "check-docs: no command or value in README.md and docs/ holds a <placeholder>"
    ;;
  *) echo "usage: scripts/check-docs.sh reference [CLI] | env | self-contained | no-issue-numbers [CLI] | spec-linked | no-stale-figures | readme-setup | demo-deps | pasteable" >&2; exit 2 ;;
esac
