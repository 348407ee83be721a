# Sourced by scripts/test.sh and scripts/time-ci-clone.sh: the sanitizer pass, in one place so that
# both build it with the same flags (and a clone's compiles match ccache's entries).
# sanitizer_build DIR JOBS: configures DIR with AddressSanitizer + UBSan and builds the unit tests and
#   the fuzz corpus replays. -O0 -g1 (line tables, for the sanitizers' stack traces; the numeric
#   layers keep -O1, see CMakeLists.txt): compile time is most of this step on 2 cores without
#   ccache, and this takes 2,633 s of it where -O1 everywhere took 4,502 s.
# sanitizer_tests DIR JOBS: runs the unit tests and the fuzz corpora (tests/fuzz: seeds and saved
#   regressions) under the sanitizers.
sanitizer_build() {
  cmake -S . -B "$1" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -g1 -DNDEBUG" -DLLMCTL_SANITIZE=ON -DLLMCTL_CUDA=OFF >/dev/null &&
    cmake --build "$1" -j "$2" --target llmctl_unit_tests llmctl_fuzz_replay
}
sanitizer_tests() {
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    ctest --test-dir "$1" -L cpu -R '^(unit|fuzz)\.' --output-on-failure -j "$2"
}
