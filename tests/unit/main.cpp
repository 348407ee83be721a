// Unit test runner: doctest with its own main so that a run in which a test case was skipped
// (LLMCTL_SKIP, tests/unit/skip.h) and nothing failed exits 77: ctest reports it SKIPPED.
// --cpu-isa=ISA (taken out before doctest reads the rest) steps the CPU kernels down for the whole
// run (kernels::select_cpu_kernels); a CPU without that ISA skips the run (exit 77).
// --step-down-only (with --cpu-isa) also skips it when that ISA is the CPU's own: the run would
// repeat the plain entry's (ctest's _avx2 entries on an AVX2-only machine).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <exception>
#include <string_view>
#include <vector>

#include "kernels/cpu/qlinear.h"
#include "skip.h"
#include "source_dir.h"

const char* llmctl::test::source_dir() { return LLMCTL_SOURCE_DIR; }

int main(int argc, char** argv) {
  std::vector<char*> args;
  bool step_down_only = false;
  for (int i = 0; i < argc; ++i)
    if (std::string_view(argv[i]) == "--step-down-only") step_down_only = true;
  for (int i = 0; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (a == "--step-down-only") continue;
    if (a.rfind("--cpu-isa=", 0) != 0) {
      args.push_back(argv[i]);
      continue;
    }
    const std::string_view isa = a.substr(10);
    if (isa != "auto" && isa != "amx" && isa != "avx512-vnni" && isa != "avx-vnni" && isa != "avx2" &&
        isa != "scalar") {
      std::printf("--cpu-isa=%.*s: expected auto, amx, avx512-vnni, avx-vnni, avx2 or scalar\n", int(isa.size()),
                  isa.data());
      return 2;
    }
    try {
      // (auto: the best the CPU has; "amx" where AVX-512 comes with AMX, so that avx512-vnni steps down)
      const std::string_view native = llmctl::kernels::qlinear_amx() ? "amx" : llmctl::kernels::qlinear_isa();
      if (step_down_only && isa == native) {
        std::printf("SKIPPED: this CPU's own kernels are %.*s: the plain entry runs them\n", int(native.size()),
                    native.data());
        return 77;
      }
      llmctl::kernels::select_cpu_kernels(isa, false);
    } catch (const std::exception& e) {
      std::printf("SKIPPED: %s\n", e.what());
      return 77;
    }
    std::printf("CPU kernels: %s%s\n", llmctl::kernels::qlinear_isa(), llmctl::kernels::qlinear_amx() ? " + amx" : "");
  }
  doctest::Context ctx;
  ctx.applyCommandLine(int(args.size()), args.data());
  const int rc = ctx.run();
  if (ctx.shouldExit() || rc != 0) return rc;
  if (llmctl::test::skipped_cases() > 0) {
    std::printf("%d test case(s) SKIPPED (reasons above): exit 77\n", llmctl::test::skipped_cases());
    return 77;
  }
  return 0;
}
