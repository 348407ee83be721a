// Random inputs for the CPU kernels' tests, and a paged KV cache's rows held as an int8 or fp8 cache
// holds them (the attention kernels' tests).
#pragma once
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu/kv_quant.h"

namespace llmctl::test {

// n normal samples of standard deviation `scale`, seeded.
inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Cache rows k, v [rows, D] as a cache of kind 1 (int8: a (scale, zero) per row) or 2 (fp8: scale
// 0.01 for keys and 0.02 for values in every head) holds them; kind 0 (f32) keeps nothing.
struct QuantizedKv {
  int kind;
  std::vector<uint8_t> kc, vc;
  std::vector<float> ks, vs;
  QuantizedKv(int kind_, const std::vector<float>& k, const std::vector<float>& v, int64_t D)
      : kind(kind_), kc(k.size()), vc(v.size()), ks(k.size() / size_t(D) * 2, 0.01f), vs(ks.size(), 0.02f) {
    for (int64_t at = 0; kind > 0 && at < int64_t(k.size()) / D; ++at) {
      const size_t o = size_t(at * D);
      if (kind == 1) {
        kernels::quantize_kv_row_int8(&k[o], D, reinterpret_cast<int8_t*>(&kc[o]), &ks[size_t(at * 2)]);
        kernels::quantize_kv_row_int8(&v[o], D, reinterpret_cast<int8_t*>(&vc[o]), &vs[size_t(at * 2)]);
      } else {
        kernels::quantize_kv_row_fp8(&k[o], D, ks[0], &kc[o]);
        kernels::quantize_kv_row_fp8(&v[o], D, vs[0], &vc[o]);
      }
    }
  }
  kernels::PagedKvQuantView view(int64_t B, int64_t Hkv, int64_t D) const {
    return {kind == 1 ? kernels::KvQuant::Int8 : kernels::KvQuant::Fp8, kc.data(), vc.data(), ks.data(), vs.data(),
            B, Hkv, D};
  }
};

}  // namespace llmctl::test
