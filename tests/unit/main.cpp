// Unit test runner: doctest with its own main so that a run in which a test case was skipped
// (LLMCTL_SKIP, tests/unit/skip.h) and nothing failed exits 77: ctest reports it SKIPPED.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "skip.h"

int main(int argc, char** argv) {
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  const int rc = ctx.run();
  if (ctx.shouldExit() || rc != 0) return rc;
  if (llmctl::test::skipped_cases() > 0) {
    std::printf("%d test case(s) SKIPPED (reasons above): exit 77\n", llmctl::test::skipped_cases());
    return 77;
  }
  return 0;
}
