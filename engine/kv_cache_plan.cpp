#include "engine/kv_cache_plan.h"

#include <algorithm>
#include <string>

#include "engine/core/error.h"
#include "engine/kv/kv_cache_groups.h"

namespace llmctl {

KvCachePlan plan_kv_cache(Executor& exec, const KvCacheRequest& r) {
  const ModelConfig& mc = exec.config();
  const int B = r.block_size;
  double kv_bytes = r.bytes;
  if (r.num_blocks <= 0 && r.gpu_memory_utilization > 0) {
    // Activations of the largest step, device sampling scratch (n > 1 draws several rows per
    // sequence) and 512 MiB for workspaces (cuBLAS, attention splits) and the allocator.
    // With drafts a sequence has up to 1 + draft_tokens rows (within the token budget).
    const int spec_rows = std::min(r.max_batched_tokens, r.max_seqs * (1 + r.draft_tokens));
    const int rows = r.draft_tokens > 0 ? std::max(r.max_seqs, spec_rows) : r.max_seqs;
    const size_t reserve = exec.activation_bytes(r.max_batched_tokens, rows) +
                           size_t(4) * rows * size_t(mc.vocab_size) * sizeof(float) + (size_t(512) << 20);
    if (auto budget = exec.kv_cache_budget(r.gpu_memory_utilization, reserve)) kv_bytes = double(*budget);
  }
  KvCachePlan plan;
  plan.spec = exec.kv_spec(B);
  // Open blocks kept exact: a rollback of up to draft_tokens must find the rows of the block it
  // returns to, so the ring holds that many positions past a block.
  if (plan.spec.exact_ring_blocks > 0) plan.spec.exact_ring_blocks = 1 + (std::max(0, r.draft_tokens) + B - 1) / B;
  // fp8's per-head scales; exact open-block rows for max_seqs sequences (more only while forks of
  // n > 1 requests run beyond it)
  const double fixed_bytes =
      double(plan.spec.fixed_bytes()) + double(plan.spec.exact_bytes_per_seq()) * r.max_seqs;
  const double block_bytes_budget = std::max(0.0, kv_bytes - fixed_bytes);
  // Sliding-window layers keep their KV in a pool of their own, sized for their windows; the
  // full-attention layers get the rest.
  std::vector<int> layer_windows;
  for (int l = 0; l < mc.num_layers; ++l) layer_windows.push_back(mc.layer_window(l));
  const std::vector<int> windows = kv_group_windows(layer_windows);
  std::vector<double> group_block_bytes;  // this rank's layers of each pool (their share of its layers)
  for (int w : windows) {
    const auto in_group = std::count_if(layer_windows.begin(), layer_windows.end(),
                                        [&](int lw) { return windows.size() == 1 || (lw > 0) == (w > 0); });
    group_block_bytes.push_back(double(plan.spec.bytes_per_block()) * double(in_group) / mc.num_layers);
    plan.group_layers.push_back(int(in_group));
  }
  std::vector<int> blocks;
  if (r.num_blocks > 0) {  // the full-attention pool's size; a window pool needs no more
    blocks = {r.num_blocks};
    if (windows.size() > 1)
      blocks.push_back(std::min(r.num_blocks, kv_window_peak_blocks(windows[1], B, r.max_seqs, r.max_batched_tokens)));
  } else {
    blocks = kv_group_blocks(windows, group_block_bytes, block_bytes_budget, B, r.max_seqs, r.max_batched_tokens);
  }
  const int fewest = *std::min_element(blocks.begin(), blocks.end());
  LLM_REQUIRE(fewest >= 2) << "the KV cache holds " << fewest << " blocks: raise the KV cache size"
                           << (plan.spec.exact_ring_blocks > 0
                                   ? " (" + std::to_string(int(plan.spec.exact_bytes_per_seq() * r.max_seqs >> 20)) +
                                         " MiB of it keep the open blocks of --max-num-seqs " +
                                         std::to_string(r.max_seqs) +
                                         " sequences exact: fewer sequences, or --kv-fp8-exact-open-block false, "
                                         "leave more)"
                                   : "");
  plan.layout = KvCacheLayout(blocks, windows);
  return plan;
}

}  // namespace llmctl
