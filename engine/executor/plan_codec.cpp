#include "engine/executor/plan_codec.h"

#include <cstring>

#include "engine/core/error.h"

namespace llmctl {

namespace {

void put(std::vector<uint8_t>& out, const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  out.insert(out.end(), b, b + n);
}
void put_array(std::vector<uint8_t>& out, const std::vector<int32_t>& v) {
  const int64_t n = int64_t(v.size());
  put(out, &n, sizeof n);
  put(out, v.data(), v.size() * sizeof(int32_t));
}

struct Reader {
  const std::vector<uint8_t>& b;
  size_t at = 0;
  void get(void* p, size_t n) {
    LLM_CHECK(n <= b.size() - at) << "plan bytes end at " << b.size() << ", reading " << n << " at " << at;
    std::memcpy(p, b.data() + at, n);
    at += n;
  }
  std::vector<int32_t> array() {
    int64_t n = 0;
    get(&n, sizeof n);
    LLM_CHECK(n >= 0 && size_t(n) <= (b.size() - at) / sizeof(int32_t)) << "plan array of " << n << " values";
    std::vector<int32_t> v(static_cast<size_t>(n));
    get(v.data(), v.size() * sizeof(int32_t));
    return v;
  }
};

}  // namespace

std::vector<uint8_t> encode_plan(const BatchPlan& p) {
  std::vector<uint8_t> out;
  for (const auto* v : {&p.token_ids, &p.positions, &p.slot_mapping, &p.query_start, &p.context_len, &p.block_table,
                        &p.logits_rows, &p.exact_slot, &p.exact_copies, &p.window_slot_mapping, &p.window_block_table})
    put_array(out, *v);
  put(out, &p.max_blocks_per_seq, sizeof p.max_blocks_per_seq);
  put(out, &p.window_max_blocks_per_seq, sizeof p.window_max_blocks_per_seq);
  put(out, &p.graph_context, sizeof p.graph_context);
  put(out, &p.micro_batches, sizeof p.micro_batches);
  return out;
}

BatchPlan decode_plan(const std::vector<uint8_t>& bytes) {
  Reader r{bytes};
  BatchPlan p;
  for (auto* v : {&p.token_ids, &p.positions, &p.slot_mapping, &p.query_start, &p.context_len, &p.block_table,
                  &p.logits_rows, &p.exact_slot, &p.exact_copies, &p.window_slot_mapping, &p.window_block_table})
    *v = r.array();
  r.get(&p.max_blocks_per_seq, sizeof p.max_blocks_per_seq);
  r.get(&p.window_max_blocks_per_seq, sizeof p.window_max_blocks_per_seq);
  r.get(&p.graph_context, sizeof p.graph_context);
  r.get(&p.micro_batches, sizeof p.micro_batches);
  LLM_CHECK(r.at == bytes.size()) << "plan bytes: " << bytes.size() - r.at << " left over";
  return p;
}

}  // namespace llmctl
