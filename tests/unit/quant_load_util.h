// Helpers for the tests of loading quantized linears quantized (engine/model/weights/load_weights.h):
//   CanonicalRecordingBackend  the CPU backend that also "runs" Int4Group / Int8Group: it records
//                              every canonical LinearWeight the loader hands to upload_quantized and
//                              returns it dequantized (by its own naive reading of the canonical
//                              form) as a dense f32 weight. It stands in for a backend with quantized
//                              kernels, so the loader's output is checked end to end without them.
//   dequantize_canonical       that naive reading: scales[n, g] * code[n, k] + zeros[n, g], at
//                              input column input_perm[k] for an act-order weight.
//   prefill_logits             logits [T, V] of one prompt, every position.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/forwarding_backend.h"
#include "engine/model/checkpoint.h"
#include "engine/model/registry.h"
#include "engine/runner/model_runner.h"

namespace llmctl::test {

// [N, K] f32 from a canonical quantized LinearWeight (Backend::upload_quantized's contract).
inline Tensor dequantize_canonical(const LinearWeight& w) {
  REQUIRE((w.format == WeightFormat::Int4Group || w.format == WeightFormat::Int8Group));
  REQUIRE(w.data.dtype == DType::U8);
  REQUIRE(w.data.shape == std::vector<int64_t>{w.n, w.k});
  REQUIRE(w.group_size > 0);
  REQUIRE(w.k % w.group_size == 0);
  const int64_t G = w.k / w.group_size;
  REQUIRE(w.scales.shape == std::vector<int64_t>{w.n, G});
  REQUIRE(w.zeros.shape == w.scales.shape);
  REQUIRE(w.scales.dtype == w.zeros.dtype);
  REQUIRE((w.scales.dtype == DType::F16 || w.scales.dtype == DType::F32));
  const Tensor s = convert_host(w.scales, DType::F32), z = convert_host(w.zeros, DType::F32);
  Tensor out = Tensor::empty_host(DType::F32, {w.n, w.k});
  const uint8_t* codes = w.data.ptr<uint8_t>();
  std::vector<int64_t> column(size_t(w.k));  // input feature of packed column c (act-order: input_perm)
  for (int64_t c = 0; c < w.k; ++c) column[size_t(c)] = c;
  if (!w.input_perm.empty()) {
    REQUIRE(w.input_perm.dtype == DType::I32);
    REQUIRE(w.input_perm.shape == std::vector<int64_t>{w.k});
    for (int64_t c = 0; c < w.k; ++c) column[size_t(c)] = w.input_perm.ptr<int32_t>()[c];
  }
  int64_t bad_codes = 0;
  for (int64_t r = 0; r < w.n; ++r)
    for (int64_t c = 0; c < w.k; ++c) {
      const uint8_t raw = codes[r * w.k + c];
      bad_codes += w.format == WeightFormat::Int4Group && raw > 15;
      const int code = w.format == WeightFormat::Int4Group ? int(raw) : int(int8_t(raw));
      const int64_t g = r * G + c / w.group_size;
      const volatile float prod = s.ptr<float>()[g] * float(code);  // rounded on its own, as the loader's
      out.ptr<float>()[r * w.k + column[size_t(c)]] = prod + z.ptr<float>()[g];
    }
  CHECK(bad_codes == 0);  // 4-bit codes are 0..15
  return out;
}

// The CPU backend it forwards to, built before the ForwardingBackend base that holds a reference to it.
struct CpuBackendHolder {
  std::unique_ptr<Backend> cpu_ = make_cpu_backend(1);
};

class CanonicalRecordingBackend final : private CpuBackendHolder, public ForwardingBackend {
 public:
  std::vector<LinearWeight> uploaded;  // every canonical weight, in load order

  CanonicalRecordingBackend() : ForwardingBackend(*cpu_) {
    caps_.weight_formats = {WeightFormat::DenseF32, WeightFormat::DenseF16, WeightFormat::DenseBF16,
                            WeightFormat::Int4Group, WeightFormat::Int8Group};
    caps_.input_perm = true;
  }
  std::string name() const override { return "cpu-canonical-reference"; }
  LinearWeight upload_quantized(const LinearWeight& canonical) override {
    uploaded.push_back(canonical);
    LinearWeight dense = canonical;
    dense.format = WeightFormat::DenseF32;
    dense.data = cpu_->upload(dequantize_canonical(canonical), DType::F32);
    dense.scales = dense.zeros = Tensor{};
    dense.group_size = 0;
    return dense;
  }
};

// Logits [T, V] (f32, host) of every position of `tokens` run as one prompt.
inline std::vector<float> prefill_logits(Model& model, const std::vector<int32_t>& tokens) {
  ModelRunner runner(model);
  const int B = 16, blocks = int((tokens.size() + B - 1) / B);
  runner.alloc_kv_cache(runner.kv_spec(B), blocks);
  BatchPlan plan;
  plan.max_blocks_per_seq = blocks;
  for (size_t p = 0; p < tokens.size(); ++p) {
    plan.token_ids.push_back(tokens[p]);
    plan.positions.push_back(int32_t(p));
    plan.slot_mapping.push_back(int32_t(p));  // blocks 0, 1, ... in order
    plan.logits_rows.push_back(int32_t(p));
  }
  plan.query_start.push_back(plan.num_tokens());
  plan.context_len.push_back(int32_t(tokens.size()));
  for (int i = 0; i < blocks; ++i) plan.block_table.push_back(i);
  Tensor logits = convert_host(runner.execute(plan), DType::F32);
  return std::vector<float>(logits.ptr<float>(), logits.ptr<float>() + logits.numel());
}

// max |a - b| / (1 + max |b|): the logits' difference relative to their scale.
inline double relative_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - b[i]));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return diff / (1 + scale);
}

}  // namespace llmctl::test
