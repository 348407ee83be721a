#!/usr/bin/env bash
# Fuzzes the tests/fuzz harnesses with libFuzzer under ASan + UBSan (issue 12).
# Usage: scripts/fuzz.sh [SECONDS_PER_HARNESS] [HARNESS...]    (default: 60 s, every harness)
#
# Installs clang (and libFuzzer's runtime) if missing, configures build-fuzz with clang and
# -DLLMCTL_FUZZ=ON -DLLMCTL_CUDA=OFF, builds the harnesses and runs them one at a time. Each works
# on a copy of its seeds under build-fuzz/corpus/<harness>/ (the committed tests/fuzz/corpus/ stays
# small); what it finds (crash-*, timeout-*, oom-*, leak-*) is saved by libFuzzer under
# build-fuzz/artifacts/<harness>/ and copied to tests/fuzz/regressions/<harness>/, which the
# ctest fuzz.<harness> replays from then on. After a crash the harness is restarted for the time
# left (at most FUZZ_MAX_RESTARTS times, default 3), so one bug does not end its run.
# Environment: FUZZ_BUILD_DIR (build-fuzz), JOBS (nproc), FUZZ_MAX_RESTARTS, FUZZ_ARGS (extra
# libFuzzer flags), FUZZ_NO_BUILD=1 (fuzz the binaries already built, e.g. while the tree changes). Dictionaries tests/fuzz/dict/<harness>.dict are used when present.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
[ $# -gt 0 ] && shift
ALL=(gguf safetensors tokenizer_json bpe sentencepiece jinja openai tgi sampling_params http_parser
     quantized_checkpoint)
HARNESSES=("$@")
[ ${#HARNESSES[@]} -eq 0 ] && HARNESSES=("${ALL[@]}")
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
JOBS=${JOBS:-$(nproc)}
MAX_RESTARTS=${FUZZ_MAX_RESTARTS:-3}

# --- clang with libFuzzer -------------------------------------------------------------------------
# The engine needs clang >= 16 (C++20 lambdas capturing structured bindings); Debian 12's `clang`
# is 14, so clang-16 is installed beside it when no newer one is found.
SUDO=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO=sudo
apt_install() { $SUDO apt-get update -qq && $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null; }
clang_major() { "$1" --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -1; }
pick_clang() {
  for v in 20 19 18 17 16; do
    command -v "clang++-$v" >/dev/null && { echo "$v"; return; }
  done
  if command -v clang++ >/dev/null && [ "$(clang_major clang++)" -ge 16 ]; then echo ""; return; fi
  echo none
}
V=$(pick_clang)
if [ "$V" = none ]; then
  command -v clang++ >/dev/null || apt_install clang libclang-rt-dev
  V=$(pick_clang)
  if [ "$V" = none ]; then apt_install clang-16 libclang-rt-16-dev; V=16; fi
fi
CC=clang${V:+-$V}
CXX=clang++${V:+-$V}
probe=$(mktemp -d)
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' > "$probe/p.cpp"
if ! "$CXX" -fsanitize=fuzzer,address,undefined "$probe/p.cpp" -o "$probe/p" 2>/dev/null; then
  apt_install "libclang-rt${V:+-$V}-dev"
fi
rm -rf "$probe"
echo "fuzz.sh: $($CXX --version | head -1)"

# --- build ---------------------------------------------------------------------------------------
if [ -z "${FUZZ_NO_BUILD:-}" ]; then
CC=$CC CXX=$CXX cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLLMCTL_FUZZ=ON \
  -DLLMCTL_CUDA=OFF -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target $(printf 'fuzz_%s ' "${HARNESSES[@]}")
fi

# --- fuzz ----------------------------------------------------------------------------------------
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
SUMMARY="$BUILD/fuzz-summary.md"
{
  echo "| harness | seconds | executions | exec/s | crashes | timeouts | ooms | leaks |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
} > "$SUMMARY"
NEW=()
for h in "${HARNESSES[@]}"; do
  bin="$BUILD/tests/fuzz/fuzz_$h"
  work="$BUILD/corpus/$h"
  art="$BUILD/artifacts/$h"
  logs="$BUILD/logs/$h"
  mkdir -p "$work" "$art" "$logs"
  for d in "tests/fuzz/corpus/$h" "tests/fuzz/regressions/$h"; do
    [ -d "$d" ] && find "$d" -maxdepth 1 -type f ! -name '.*' -exec cp -n {} "$work/" \;
  done
  dict=()
  [ -f "tests/fuzz/dict/$h.dict" ] && dict=("-dict=tests/fuzz/dict/$h.dict")
  before=$(ls "$art" | wc -l)
  start=$(date +%s)
  execs=0
  run=0
  while true; do
    left=$((SECS - ($(date +%s) - start)))
    [ "$left" -lt 1 ] && break
    log="$logs/run$run.log"
    echo "fuzz.sh: $h: run $run, ${left}s"
    set +e
    "$bin" "$work" -max_total_time="$left" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$art/" "${dict[@]}" ${FUZZ_ARGS:-} > "$log" 2>&1
    rc=$?
    set -e
    n=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -1)
    [ -z "$n" ] && n=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
    execs=$((execs + ${n:-0}))
    if [ "$rc" -ne 0 ]; then
      grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|SUMMARY' "$log" | sed "s/^/fuzz.sh: $h: /" || true
      run=$((run + 1))
      [ "$run" -gt "$MAX_RESTARTS" ] && break
    else
      break
    fi
  done
  secs=$(($(date +%s) - start))
  count() { ls "$art" | grep -c "^$1-" || true; }
  c=$(count crash); t=$(count timeout); o=$(count oom); l=$(count leak)
  rate=$((execs / (secs > 0 ? secs : 1)))
  echo "| $h | $secs | $execs | $rate | $c | $t | $o | $l |" >> "$SUMMARY"
  if [ "$(ls "$art" | wc -l)" -gt "$before" ] || [ $((c + t + o + l)) -gt 0 ]; then
    mkdir -p "tests/fuzz/regressions/$h"
    for f in "$art"/crash-* "$art"/timeout-* "$art"/oom-* "$art"/leak-*; do
      [ -f "$f" ] || continue
      dest="tests/fuzz/regressions/$h/$(basename "$f")"
      [ -f "$dest" ] || { cp "$f" "$dest"; NEW+=("$dest"); }
    done
  fi
done

echo
echo "fuzz.sh: $($CXX --version | head -1), ASan+UBSan, -rss_limit_mb=2048 -timeout=10, $(nproc) cores"
cat "$SUMMARY"
if [ ${#NEW[@]} -gt 0 ]; then
  echo
  echo "fuzz.sh: new inputs saved (replayed by ctest -R '^fuzz\\.'; logs under $BUILD/logs/):"
  printf '  %s\n' "${NEW[@]}"
fi
