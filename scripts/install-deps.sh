#!/usr/bin/env bash
# Installs every build, test, fuzz and benchmark dependency from Debian's
# packages. Used by the README's two commands and by .ci/run, so a fresh
# Debian 12 machine needs nothing else. Safe to re-run.
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  clang libclang-rt-14-dev            # libFuzzer + sanitizer runtimes
  nlohmann-json3-dev                  # manifest JSON
  libssl-dev                          # SHA-256 (SHA-NI via OpenSSL), TLS
  libcurl4-openssl-dev                # HTTP for hf://
  libasio-dev                         # peer transfer: standalone asio (header-only), TLS via OpenSSL
  libcli11-dev                        # command line
  libtomlplusplus-dev                 # config.toml (speculative decoding defaults)
  libgtest-dev libgmock-dev           # tests
  libbenchmark-dev                    # benchmarks
  openssl coreutils time              # benchmark yardsticks (openssl dgst, cp, /usr/bin/time)
)

missing=()
# Node.js runs the independent GGUF reader (@huggingface/gguf) in tests; keep
# whatever Node the machine already has (it may not be Debian's).
command -v node >/dev/null 2>&1 || PKGS+=(nodejs npm)
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

# The independent GGUF reader used by the interop tests (npm registry).
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -d "$root/tests/js/node_modules/@huggingface/gguf" ] || [ ! -d "$root/tests/js/node_modules/@huggingface/hub" ]; then
  (cd "$root/tests/js" && npm ci --no-audit --no-fund --loglevel=error)
fi
