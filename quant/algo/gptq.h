// GPTQ (Frantar et al. 2022, https://arxiv.org/abs/2210.17323) on one linear weight, as
// llm-compressor's GPTQModifier runs it (modifiers/gptq/gptq_quantize.py: quantize_weight), in
// fp64 where it works in fp32:
//   1. scales and zero points of every group are fixed first, by RTN's min/max rule on the weight
//      as given (llm-compressor's weight observer runs before GPTQ; they are not re-derived from
//      the updated weights). Option update_group_qparams instead derives each group's from the
//      current, already-updated weights when its first column is reached (the GPTQ paper's code
//      and AutoGPTQ without static groups; no act-order then);
//   2. act_order: columns (and H's rows and columns) permuted by descending diag(H); the groups stay
//      those of the original columns ("static groups", actorder static/weight), so the result needs
//      no g_idx;
//   3. dead inputs (H[i,i] == 0): H[i,i] = 1 and the weight column zeroed;
//   4. H += dampening * mean(diag H) * I; U = the upper Cholesky factor of H^-1;
//   5. columns in blocks of block_size: each column quantized with its group's (scale, zero), its
//      error (w - q) / U[i,i] spread over the block's later columns at once and over the columns
//      after the block lazily (one product per block); loss = sum of error^2 / 2;
//   6. the permutation undone.
// Where H is not numerically positive definite, llm-compressor falls back to RTN; here the
// dampening is raised x10 (up to kMaxDampening) first, and RTN is the last resort. Both are noted.
// Rows are independent given U: threads split the rows, and every row is computed the same way
// whatever the thread count (results identical for any `threads`).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "quant/format/quantized_linear.h"

namespace llmctl::quant {

struct GptqOptions {
  QuantScheme scheme;
  int block_size = 128;
  double dampening = 0.01;  // fraction of mean(diag H) added to the diagonal
  bool act_order = false;   // with static groups: groups fixed before the permutation
  // Group scales/zeros from the updated weights at the group's first column (not with act_order;
  // block_size is then rounded down to a multiple of the group size, at least one group, so a
  // group's columns are all current when it starts).
  bool update_group_qparams = false;
  int threads = 0;          // 0: the process-wide pool
};

struct GptqResult {
  QuantizedLinear weight;
  double loss = 0;              // sum over rows and columns of ((w - q) / U[i,i])^2 / 2, as llm-compressor's
  double dampening_used = 0;    // options.dampening, or what it was raised to
  bool rtn_fallback = false;    // H could not be factored at any dampening: plain RTN (dead columns zeroed)
  int64_t dead_columns = 0;     // inputs that were always zero in calibration (weight column zeroed)
  std::vector<std::string> notes;  // what was adjusted, for the log
};

// The largest dampening tried before falling back to RTN.
inline constexpr double kMaxDampening = 10.0;

// w [N, K] row-major f32; h [K, K] from HessianAccumulator. Throws std::invalid_argument for a
// scheme that does not fit K, llmctl::Error for sizes that do not match or a non-finite H.
GptqResult gptq_quantize(const float* w, int64_t n, int64_t k, const std::vector<double>& h, const GptqOptions& o);

}  // namespace llmctl::quant
