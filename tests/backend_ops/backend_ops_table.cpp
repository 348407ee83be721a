// The parity table's runner and checks; the rows are in backend_ops_{dense,kv,sample}.cpp.
#include "backend_ops_table.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "backend_ops_util.h"

namespace llmctl::backend_ops {

double tolerance(DType activation) {
  return activation == DType::BF16 ? 1e-2 : activation == DType::F16 ? 2e-3 : 1e-5;
}

void Ctx::close(const std::string& what, const std::vector<float>& got, const std::vector<double>& ref,
                double tol_scale) {
  ++checks_;
  INFO(op_ << ": " << what << " (" << dtype_name(act()) << ")");
  REQUIRE(got.size() == ref.size());
  double num = 0, den = 0, max_abs = 0;
  int64_t nonfinite = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++nonfinite;
      continue;
    }
    const double d = double(got[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
    max_abs = std::max(max_abs, std::fabs(d));
  }
  const double rel = std::sqrt(num / std::max(den, 1e-300)), tol = tolerance(act()) * tol_scale;
  std::printf("  %-14s %-60s rel %.2e (tol %.0e) max_abs %.2e%s\n", op_.c_str(), what.c_str(), rel, tol, max_abs,
              nonfinite ? "  NONFINITE" : "");
  CHECK_MESSAGE(nonfinite == 0, nonfinite << " outputs are NaN/inf");
  CHECK_MESSAGE(rel <= tol, "relative error " << rel << " > " << tol << ", max abs " << max_abs);
}

void Ctx::exact(const std::string& what, const std::vector<float>& got, const std::vector<float>& ref) {
  ++checks_;
  INFO(op_ << ": " << what << " (" << dtype_name(act()) << ")");
  REQUIRE(got.size() == ref.size());
  size_t bad = 0, first = got.size();
  for (size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == ref[i]) && !(std::isnan(got[i]) && std::isnan(ref[i]))) {
      if (!bad) first = i;
      ++bad;
    }
  std::printf("  %-14s %-60s %s\n", op_.c_str(), what.c_str(), bad ? "DIFFERS" : "exact");
  CHECK_MESSAGE(bad == 0, bad << " of " << got.size() << " values differ, first at " << first << ": got "
                              << (bad ? got[first] : 0.f) << " want " << (bad ? ref[first] : 0.f));
}

void Ctx::expect(const std::string& what, bool ok, const std::string& detail) {
  ++checks_;
  INFO(op_ << ": " << what << " (" << dtype_name(act()) << ") " << detail);
  std::printf("  %-14s %-60s %s\n", op_.c_str(), what.c_str(), ok ? "ok" : "FAILED");
  CHECK(ok);
}

const std::vector<OpCase>& table() {
  static const std::vector<OpCase> t = [] {
    std::vector<OpCase> v;
    add_dense_cases(v);
    add_kv_cases(v);
    add_kv_quant_cases(v);
    add_sample_cases(v);
    add_moe_cases(v);
    return v;
  }();
  return t;
}

const std::vector<std::string>& required_ops() {
  static const std::vector<std::string> ops = {"embed",    "rms_norm", "head_rms_norm", "linear", "rope",
                                               "write_kv", "rope_write_kv", "attention", "silu_mul",
                                               "gelu_tanh_mul", "scale", "soft_cap", "gather_rows", "copy_blocks", "sample", "kv_int8", "kv_fp8",
                                               "copy_bytes", "gather_token_rows", "scatter_add_rows", "fill_zero"};
  return ops;
}

namespace {
// Ops a backend may lack: sampling, quantized KV caches. Reported, left out of the counts.
std::string missing_reason(const Backend& be, const std::string& op) {
  if (op == "sample" && !be.caps().sampling) return "no sampling (caps().sampling is false)";
  if (op == "kv_int8" && !be.caps().supports_kv_cache(KvCacheDtype::Int8)) return "no int8 KV cache (caps().kv_dtypes)";
  if (op == "kv_fp8" && !be.caps().supports_kv_cache(KvCacheDtype::Fp8)) return "no fp8 KV cache (caps().kv_dtypes)";
  if ((op == "gather_token_rows" || op == "scatter_add_rows" || op == "fill_zero") && !be.caps().moe)
    return "no mixture-of-experts row ops (caps().moe)";
  return "";
}
}  // namespace

std::map<std::string, int> run_table(const Target& target) {
  REQUIRE(target.backend != nullptr);
  Backend& be = *target.backend;
  std::printf("backend parity table on %s (activations %s): %zu cases\n", be.name().c_str(),
              dtype_name(be.activation_dtype()), table().size());
  std::map<std::string, int> counts;
  uint32_t seed = 1000;
  for (const OpCase& c : table()) {
    ++seed;  // one seed per row, whatever rows are left out
    if (!missing_reason(be, c.op).empty()) continue;
    Ctx ctx(target, c.op, seed);
    INFO("case " << c.op << " " << c.name << " on " << be.name());
    c.run(ctx);
    counts[c.op] += ctx.checks();
  }
  for (const std::string& op : required_ops())
    if (!missing_reason(be, op).empty())
      std::printf("  %s: not run, %s has %s\n", op.c_str(), be.name().c_str(), missing_reason(be, op).c_str());
  // Every op of the interface was compared at least once (where the backend has it).
  for (const std::string& op : required_ops()) {
    if (!missing_reason(be, op).empty()) continue;
    INFO("op " << op << " has no comparison in the table");
    CHECK(counts[op] > 0);
  }
  return counts;
}

}  // namespace llmctl::backend_ops
