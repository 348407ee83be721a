// Skipped means skipped: a test case that cannot run here (its data is absent: the default model, a
// data file; or it documents a known defect, run on request) calls
// LLMCTL_SKIP(reason) instead of returning quietly; when nothing failed, the unit test binary then
// exits 77 (tests/unit/main.cpp), which ctest reports as SKIPPED (SKIP_RETURN_CODE 77), not passed.
#pragma once
#include <doctest/doctest.h>

namespace llmctl::test {
inline int& skipped_cases() {
  static int n = 0;
  return n;
}
}  // namespace llmctl::test

// Ends the current test case as skipped (use it in the test case's own body).
#define LLMCTL_SKIP(reason)                      \
  do {                                           \
    ++::llmctl::test::skipped_cases();           \
    MESSAGE("SKIPPED: " << reason);              \
    return;                                      \
  } while (0)
