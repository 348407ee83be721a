#!/usr/bin/env bash
# Installs what the build needs (Debian packages), builds the Release `llmctl` binary into build/
# (only it: the tests and fuzz harnesses are built by scripts/test.sh) and fetches the default model.
# CUDA code is compiled when a GPU is present or asked for (LLMCTL_CUDA=ON; OFF never, AUTO: where
# nvcc is); ccache caches every compile. Idempotent: a second run only checks.
# Usage: scripts/setup.sh [--no-model]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(build-essential cmake ninja-build pkg-config ccache python3 python3-pip
          libcli11-dev nlohmann-json3-dev libsentencepiece-dev doctest-dev libcpp-httplib-dev libpcre2-dev
          openmpi-bin libopenmpi-dev libedit-dev)

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

# A GPU build compiles 17 CUDA objects (a tenth of the build); without a GPU they could not run.
if [ -z "${LLMCTL_CUDA:-}" ]; then
  LLMCTL_CUDA=OFF
  if command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then LLMCTL_CUDA=AUTO; fi
fi
BUILD_DIR=${BUILD_DIR:-build}
phase() { echo "setup: $1 ($SECONDS s)"; }
phase "configuring (CUDA: $LLMCTL_CUDA)"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLMCTL_CUDA="$LLMCTL_CUDA" ${CMAKE_ARGS:-} >/dev/null
phase "building llmctl"
cmake --build "$BUILD_DIR" -j "$(nproc)" --target llmctl

if [ "${1:-}" != "--no-model" ]; then
  phase "fetching the default model"
  LLMCTL_BIN="$PWD/$BUILD_DIR/llmctl" scripts/fetch-model.sh
fi
phase "done ($BUILD_DIR/llmctl)"
