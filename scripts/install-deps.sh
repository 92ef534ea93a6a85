#!/usr/bin/env bash
# Installs the dependencies from Debian's packages (and the npm registry for
# the test tools), so a fresh Debian 12 machine needs nothing else. Safe to
# re-run.
#   scripts/install-deps.sh             everything: build, run, test, fuzz, bench
#                                       (scripts/test.sh and .ci/run)
#   scripts/install-deps.sh --run-only  what building and running the CLI needs
#                                       (scripts/demo.sh): no compilers for the
#                                       sanitizers, no test frameworks, no Node
#   add --list to print the packages instead of installing them.
set -euo pipefail

run_only=0 list=0
for a in "$@"; do
  case "$a" in
    --run-only) run_only=1 ;;
    --list) list=1 ;;
    *) echo "install-deps: unknown option $a (use --run-only and/or --list)" >&2; exit 2 ;;
  esac
done

RUN_PKGS=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev                  # manifest JSON
  libssl-dev                          # SHA-256 (SHA-NI via OpenSSL), TLS
  libcurl4-openssl-dev                # HTTP for hf://
  libasio-dev                         # peer transfer: standalone asio (header-only), TLS via OpenSSL
  libcli11-dev                        # command line
  libtomlplusplus-dev                 # config.toml (speculative decoding defaults)
  liblz4-dev                          # Xet xorb chunks: LZ4 frames
  help2man                            # the CLI's man page, made from --help at build time
)
TEST_PKGS=(
  clang libclang-rt-14-dev            # libFuzzer + sanitizer runtimes
  libgtest-dev libgmock-dev           # tests
  libbenchmark-dev                    # benchmarks
  openssl coreutils time              # benchmark yardsticks (openssl dgst, cp, /usr/bin/time)
  b3sum                               # BLAKE3 test oracle and benchmark yardstick
  libgomp1                            # OpenMP runtime of the reference stage runtime (../shared/refrt)
)
PKGS=("${RUN_PKGS[@]}")
if ((run_only == 0)); then
  PKGS+=("${TEST_PKGS[@]}")
  # Node.js runs the independent GGUF reader (@huggingface/gguf) in tests; keep
  # whatever Node the machine already has (it may not be Debian's).
  command -v node >/dev/null 2>&1 || PKGS+=(nodejs npm)
fi
if ((list)); then
  printf '%s\n' "${PKGS[@]}"
  ((run_only)) || echo "npm: tests/js tests/real_runtime"
  exit 0
fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

((run_only)) && exit 0

# The independent GGUF reader used by the interop tests (npm registry).
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -d "$root/tests/js/node_modules/@huggingface/gguf" ] || [ ! -d "$root/tests/js/node_modules/@huggingface/hub" ]; then
  (cd "$root/tests/js" && npm ci --no-audit --no-fund --loglevel=error)
fi

# A real llama.cpp runtime for the real-runtime tests: node-llama-cpp and its
# prebuilt CPU binary for linux-x64, both from the npm registry, pinned by
# tests/real_runtime/package-lock.json. NODE_LLAMA_CPP_SKIP_DOWNLOAD keeps its
# postinstall from fetching or building llama.cpp; --omit=optional skips the
# other platforms' (GPU) binaries. Reinstalled when the lockfile's version
# is not the one installed.
rt="$root/tests/real_runtime"
want="$(node -p 'require(process.argv[1]).packages["node_modules/node-llama-cpp"].version' "$rt/package-lock.json")"
have="$(node -p 'require(process.argv[1]).version' "$rt/node_modules/node-llama-cpp/package.json" 2>/dev/null || true)"
if [ "$want" != "$have" ] || [ ! -d "$rt/node_modules/@node-llama-cpp/linux-x64" ]; then
  (cd "$rt" && NODE_LLAMA_CPP_SKIP_DOWNLOAD=true npm ci --omit=optional --no-audit --no-fund --loglevel=error)
fi
