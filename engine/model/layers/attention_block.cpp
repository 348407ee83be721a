#include "engine/model/layers/attention_block.h"

namespace llmctl {

void AttentionBlock::run(Backend& be, const AttentionPlan& plan, const RopeParams& rope, const Tensor& x,
                         Tensor& qkv_buf, Tensor& attn_buf, KvLayer& cache, Tensor& out) const {
  // A sliding layer reads its own pool's tables where it has one.
  const DeviceBatch& b = window > 0 && plan.window_batch ? *plan.window_batch : *plan.batch;
  be.linear(x, qkv, qkv_bias.empty() ? nullptr : &qkv_bias, qkv_buf);
  if (!q_norm.empty()) be.head_rms_norm(qkv_buf, q_norm, k_norm, qk_norm_eps, num_q_heads, num_kv_heads);
  be.rope_write_kv(qkv_buf, b, rope, num_q_heads, num_kv_heads, cache);
  be.attention(qkv_buf, cache, b, num_q_heads, num_kv_heads, plan.softmax_scale, attn_buf, window, softcap);
  be.linear(attn_buf, o_proj, nullptr, out);
}

void AttentionBlock::run_linears(Backend& be, const Tensor& x, Tensor& qkv_buf, const Tensor& attn_buf,
                                 Tensor& out) const {
  be.linear(x, qkv, qkv_bias.empty() ? nullptr : &qkv_bias, qkv_buf);
  be.linear(attn_buf, o_proj, nullptr, out);
}

}  // namespace llmctl
