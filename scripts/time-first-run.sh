#!/usr/bin/env bash
# Times the README's first command as a new user meets it: a fresh clone of this repository, then
# `scripts/setup.sh && build/llmctl generate --chat "..."`, with an empty ccache, an empty
# $LLMCTL_HOME and no pip cache, so no build object or model is reused. setup.sh prints its phases
# with the seconds since it started. Debian packages already installed are not reinstalled: to time
# that phase too, remove them first (setup.sh's PACKAGES list).
# Usage: scripts/time-first-run.sh [WORKDIR]   (default: a new temporary directory, removed after)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
W=${1:-}
if [ -z "$W" ]; then W=$(mktemp -d); trap 'rm -rf "$W"' EXIT; fi
echo "time-first-run: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(git -C "$ROOT" describe --always --dirty)"
git clone -q "$ROOT" "$W/llmctl"
export CCACHE_DIR="$W/ccache" LLMCTL_HOME="$W/home" PIP_NO_CACHE_DIR=1
cd "$W/llmctl"
SECONDS=0
scripts/setup.sh
setup_s=$SECONDS
build/llmctl generate --chat "Write a haiku about the sea."
echo "time-first-run: setup $setup_s s, setup + generate $SECONDS s"
