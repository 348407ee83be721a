#!/usr/bin/env bash
# Times CI's build and test steps in a fresh clone of HEAD beside this machine's ccache, as CI runs
# them after a session: the Release build (CUDA on), its unit tests, the sanitizer build and its
# unit and fuzz tests (the e2e tests are left out: their time does not depend on the cache). Prints
# each step's end time and the clone's ccache hits and misses (per file in WORK/ccache-stats.log).
# Usage: scripts/time-ci-clone.sh [WORK_DIR]   (default: a new temporary directory; it is not removed)
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work=${1:-$(mktemp -d /tmp/llmctl-ci-clone.XXXXXX)}
rm -rf "$work/main" && mkdir -p "$work" && git clone -q "$repo" "$work/main" || exit 1
[ -e "$work/shared" ] || ln -s "$repo/../shared" "$work/shared"
cd "$work/main"
export CCACHE_STATSLOG="$work/ccache-stats.log"
rm -f "$CCACHE_STATSLOG"
step() { echo "time-ci-clone: $1 at $SECONDS s"; }
jobs=$(nproc)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLLMCTL_CUDA=ON >/dev/null || exit 1
step configured
cmake --build build -j "$jobs" > "$work/build.log" 2>&1 || { step "Release build FAILED"; tail -30 "$work/build.log"; exit 1; }
step "Release built"
ctest --test-dir build -L cpu -R '^unit\.' -j "$jobs" --output-on-failure > "$work/unit.log" 2>&1
echo "unit tests: exit $?: $(grep 'tests passed' "$work/unit.log")"
step "Release unit tests run"
source scripts/sanitizer-pass.sh  # the sanitizer pass as scripts/test.sh runs it
sanitizer_build build-asan "$jobs" > "$work/asan-build.log" 2>&1 ||
  { step "sanitizer build FAILED"; tail -30 "$work/asan-build.log"; exit 1; }
step "sanitizer build built"
sanitizer_tests build-asan "$jobs" > "$work/asan-tests.log" 2>&1
echo "sanitizer tests: exit $?: $(grep 'tests passed' "$work/asan-tests.log")"
step "sanitizer tests run"
echo "ccache: $(grep -c '^direct_cache_hit' "$CCACHE_STATSLOG") hits, $(grep -c '^cache_miss' "$CCACHE_STATSLOG") misses"
