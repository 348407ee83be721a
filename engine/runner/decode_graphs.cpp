#include "engine/runner/decode_graphs.h"

#include <algorithm>

namespace llmctl {

namespace {
constexpr int kGraphBuckets[] = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256};

int64_t next_pow2(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}
}  // namespace

int decode_graph_bucket(int seqs) {
  for (int b : kGraphBuckets)
    if (seqs <= b) return b;
  return 0;
}

int decode_graph_context(const BatchPlan& plan, int block_size) {
  const int64_t need =
      std::max<int64_t>({plan.max_context_len(), int64_t(plan.max_blocks_per_seq) * block_size, 512});
  return int(next_pow2((need + block_size - 1) / block_size) * block_size);
}

bool graphable_decode(const BatchPlan& plan) {
  const int64_t R = int64_t(plan.logits_rows.size());
  bool rows_in_order = R == plan.num_seqs();
  for (int64_t r = 0; rows_in_order && r < R; ++r) rows_in_order = plan.logits_rows[r] == r;
  return plan.decode_only() && rows_in_order && decode_graph_bucket(plan.num_seqs()) > 0;
}

}  // namespace llmctl
