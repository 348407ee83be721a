// The backend parity table (in the spirit of llama.cpp's test-backend-ops): every op of the Backend
// interface (engine/backend/backend.h) over a table of shapes and dtypes, each case run on a backend
// and on a naive reference written here (plain loops, double accumulation) over random inputs that
// are never zero, compared with a tolerance set by the backend's activation dtype.
//
// One table, two drivers: tests/unit/test_backend_ops.cpp runs it on the CPU backend (label cpu,
// in CI); tests/gpu/test_backend_ops.cpp runs the same table on the CUDA backend (label gpu).
#pragma once
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/backend.h"

namespace llmctl::backend_ops {

// The backend under test and the dtypes it takes where the interface leaves a choice.
struct Target {
  Backend* backend = nullptr;
  std::vector<DType> weight_dtypes;  // linear weights and embedding tables
};

// What one case sees: the target, a seeded generator, and the checks (doctest CHECKs that also
// print one line per comparison and count it under the case's op).
class Ctx {
 public:
  Ctx(const Target& t, std::string op, uint32_t seed) : target(t), be(*t.backend), rng(seed), op_(std::move(op)) {}
  const Target& target;
  Backend& be;
  std::mt19937 rng;
  DType act() const { return be.activation_dtype(); }

  // Relative L2 error within the activation dtype's tolerance (times tol_scale); no NaN/inf.
  void close(const std::string& what, const std::vector<float>& got, const std::vector<double>& ref,
             double tol_scale = 1.0);
  // Bit-for-bit equal values (copies: embed, write_kv, gather_rows, copy_blocks).
  void exact(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref);
  // Any other condition, counted like a comparison.
  void expect(const std::string& what, bool ok, const std::string& detail = "");
  int checks() const { return checks_; }

 private:
  std::string op_;
  int checks_ = 0;
};

struct OpCase {
  std::string op;    // the Backend member it exercises
  std::string name;  // shapes and dtypes
  std::function<void(Ctx&)> run;
};

// The whole table.
const std::vector<OpCase>& table();
// Every op the table must cover (a row that drops one fails the run instead of passing quietly).
const std::vector<std::string>& required_ops();

// Runs every case on the target; returns the number of comparisons made per op. An op the backend
// does not have (sample without caps().sampling) is reported and left out of the counts.
std::map<std::string, int> run_table(const Target& target);

double tolerance(DType activation);

// The sample row's naive reference for one job: the token (-1 when every candidate is suppressed)
// and how close the decision came to a boundary (u or top_p against a cumulative mass). Exposed so
// the CPU run can check it against the host sampler (the CPU backend has no device sampling).
struct SampleDraw {
  int token = -1;
  double margin = 1;
};
SampleDraw sample_reference(const std::vector<float>& logits_row, const SampleJob& job);

}  // namespace llmctl::backend_ops
