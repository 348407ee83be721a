// The attention block of a decoder layer: fused qkv linear (+ bias) -> (Qwen3: RMSNorm of each q
// and k head) -> rope + write_kv into the paged cache -> paged causal attention (GQA; a sliding
// window on some families' layers) -> o projection.
//
//   x [T, H] -> qkv [T, (Hq + 2 Hkv) D] -> attn [T, Hq D] -> out [T, H]
#pragma once
#include "engine/backend/backend.h"
#include "engine/model/model.h"

namespace llmctl {

struct AttentionBlock {
  LinearWeight qkv;     // [(Hq + 2 Hkv) D, H]: q, k, v projections fused along dim 0
  Tensor qkv_bias;      // [(Hq + 2 Hkv) D] f32, or empty
  Tensor q_norm, k_norm;  // [D] f32 each, or empty: per-head RMSNorm weights (every head shares them)
  float qk_norm_eps = 1e-6f;
  LinearWeight o_proj;  // [H, Hq D]
  int num_q_heads = 0, num_kv_heads = 0;
  int window = 0;  // sliding-window attention: keys (p - window, p] (0: the whole context)
  float softcap = 0.0f;  // > 0: scores soft-capped, softcap * tanh(s / softcap) (Gemma 2)

  // qkv_buf and attn_buf are scratch of the step ([T, ...] views).
  void run(Backend& be, const AttentionPlan& plan, const RopeParams& rope, const Tensor& x, Tensor& qkv_buf,
           Tensor& attn_buf, KvLayer& cache, Tensor& out) const;
  // The block's two linears once at x's row count (GEMM tuning).
  void run_linears(Backend& be, const Tensor& x, Tensor& qkv_buf, const Tensor& attn_buf, Tensor& out) const;
};

}  // namespace llmctl
