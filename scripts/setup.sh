#!/usr/bin/env bash
# Installs what the build needs (Debian packages), builds a Release llmctl into build/, and fetches
# the default model. Idempotent: a second run only checks. Usage: scripts/setup.sh [--no-model]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake ninja-build pkg-config ccache python3 python3-pip
          libcli11-dev nlohmann-json3-dev libsentencepiece-dev doctest-dev libcpp-httplib-dev libpcre2-dev
          openmpi-bin libopenmpi-dev)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release ${CMAKE_ARGS:-}
cmake --build "$BUILD_DIR" -j "$(nproc)"

if [ "${1:-}" != "--no-model" ]; then
  LLMCTL_BIN="$PWD/$BUILD_DIR/llmctl" scripts/fetch-model.sh
fi
echo "setup: done ($BUILD_DIR/llmctl)"
