#include "engine/backend/cpu/cpu_exact_rows.h"

#include <algorithm>

#include "engine/core/error.h"

namespace llmctl::cpu {

namespace {

bool one_block(const StepSeq& s, int32_t B) { return s.c0 / B == (s.c1 - 1) / B; }

// qkv's k rows of positions [p0, p1) of s (v: + Hkv * D) into the slot.
void store(KvExactStore& store, const StepSeq& s, int32_t p0, int32_t p1, const float* qkv, int64_t W, int hq) {
  const int64_t R = store.row_floats();
  for (int32_t p = p0; p < p1; ++p) {
    const float* k = qkv + (s.t0 + (p - s.c0)) * W + hq * store.head_dim;
    const int64_t to = store.row_offset(s.slot, p);
    std::copy_n(k, R, store.k.begin() + to);
    std::copy_n(k + R, R, store.v.begin() + to);
  }
}

}  // namespace

void prepare_exact_rows(KvExactStore& store, const std::vector<StepSeq>& seqs, const float* qkv, int64_t W, int hq,
                        std::vector<StepExactRows>& rows) {
  const int32_t B = store.block_size;
  const int64_t R = store.row_floats();
  for (const StepSeq& s : seqs) {  // every slot first: growing the store moves it
    LLM_CHECK(s.slot >= 0 && s.c0 < s.c1) << "exact rows of slot " << s.slot << " for positions [" << s.c0 << ", "
                                          << s.c1 << ")";
    LLM_CHECK(s.c0 % B == 0 || s.slot < store.num_slots()) << "exact KV slot " << s.slot << " was never written";
    store.ensure_slot(s.slot);
  }
  for (const StepSeq& s : seqs) {
    StepExactRows& out = rows.at(size_t(s.seq));
    out.first = s.c0 / B * B;
    out.row = R;
    if (one_block(s, B)) {
      cpu::store(store, s, s.c0, s.c1, qkv, W, hq);
      out.k = store.k.data() + store.row_offset(s.slot, out.first);
      out.v = store.v.data() + store.row_offset(s.slot, out.first);
      continue;
    }
    out.k_buf.resize(size_t((s.c1 - out.first) * R));
    out.v_buf.resize(out.k_buf.size());
    for (int32_t p = out.first; p < s.c1; ++p) {
      const int64_t to = int64_t(p - out.first) * R;
      const float* k = p < s.c0 ? store.k.data() + store.row_offset(s.slot, p)
                                : qkv + (s.t0 + (p - s.c0)) * W + hq * store.head_dim;
      const float* v = p < s.c0 ? store.v.data() + store.row_offset(s.slot, p) : k + R;
      std::copy_n(k, R, out.k_buf.begin() + to);
      std::copy_n(v, R, out.v_buf.begin() + to);
    }
    out.k = out.k_buf.data();
    out.v = out.v_buf.data();
  }
}

void finish_exact_rows(KvExactStore& store, const std::vector<StepSeq>& seqs, const float* qkv, int64_t W, int hq) {
  const int32_t B = store.block_size;
  for (const StepSeq& s : seqs) {
    if (one_block(s, B)) continue;  // stored before the attention
    // The ring keeps the last ring_blocks blocks: the step's earlier rows would be overwritten.
    const int32_t keep_from = std::max(s.c0, ((s.c1 - 1) / B - (store.ring_blocks - 1)) * B);
    cpu::store(store, s, keep_from, s.c1, qkv, W, hq);
  }
}

}  // namespace llmctl::cpu
