// The one in-memory form of an integer-quantized linear weight that the quantize algorithms
// (quant/algo) produce and every checkpoint layout (compressed-tensors pack-quantized, AutoAWQ
// GEMM, GPTQ) packs from and unpacks to. No engine dependency: plain vectors, std exceptions.
//
// Shapes: N = output features (rows), K = input features, G = number of groups along K.
// Value of element (n, k), g = group_of(k):   w[n, k] = (q[n, k] - zeros[n, g]) * scales[n, g]
//   asymmetric: q in [0, 2^bits), zeros in [0, 2^bits) (an integer zero point, as in GPTQ/AWQ)
//   symmetric:  q in [0, 2^bits), zeros all 2^(bits-1), so q - zero is in [-2^(bits-1), 2^(bits-1))
// A group is group_size consecutive input columns (group_size -1: one group over all of K, i.e.
// per output channel). With act-order a checkpoint may carry g_idx [K]: the group of each column.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace llmctl::quant {

// The largest weight magnitude a quantized checkpoint may encode: f16's largest value. No trained
// model's weight comes near it; a scale that reaches it (1e38 passed before) is a corrupt or hostile
// file, and its products would overflow the kernels' f32 sums.
constexpr float kMaxWeightMagnitude = 65504.0f;

struct QuantScheme {
  int bits = 4;          // 4 or 8
  int group_size = 128;  // inputs per scale; -1: per channel
  bool symmetric = true;

  // "int4 g128 sym", for messages and reports.
  std::string label() const;
  // Throws std::invalid_argument naming the problem: bits not 4/8, group size not -1 or positive,
  // or a group size that does not divide k.
  void check(int64_t k) const;
  int64_t groups(int64_t k) const { return group_size <= 0 ? 1 : k / group_size; }
  int max_code() const { return (1 << bits) - 1; }
  int sym_zero() const { return 1 << (bits - 1); }
};

struct QuantizedLinear {
  int64_t n = 0, k = 0;
  QuantScheme scheme;
  std::vector<uint8_t> q;       // [N, K] codes in [0, 2^bits)
  std::vector<float> scales;    // [N, G]
  std::vector<int32_t> zeros;   // [N, G]; symmetric: all scheme.sym_zero()
  std::vector<int32_t> g_idx;   // [K] group of each input column; empty: column k is in group k / group_size

  int64_t groups() const { return scheme.groups(k); }
  int32_t group_of(int64_t col) const {
    if (!g_idx.empty()) return g_idx[size_t(col)];
    return scheme.group_size <= 0 ? 0 : int32_t(col / scheme.group_size);
  }
  // Sizes, code and zero ranges (symmetric: every zero point sym_zero(), or the config and the
  // tensors disagree), group indices, finite scales in [0, kMaxWeightMagnitude / max_code()].
  // Throws std::invalid_argument naming what is wrong (a checkpoint is untrusted input).
  void validate() const;
};

// [N, K] row-major f32 values of the quantized weight.
std::vector<float> dequantize(const QuantizedLinear& w);

}  // namespace llmctl::quant
