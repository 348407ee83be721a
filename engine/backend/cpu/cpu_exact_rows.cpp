#include "engine/backend/cpu/cpu_exact_rows.h"

#include <algorithm>

#include "engine/core/error.h"

namespace llmctl::cpu {

namespace {

// The k (v: + Hkv * D) head rows of qkv row t.
const float* qkv_k(const float* qkv, int64_t W, int hq, int64_t D, int64_t t) { return qkv + t * W + hq * D; }

}  // namespace

StepExactRows gather_exact_rows(const KvExactStore& store, const StepSeq& s, const float* qkv, int64_t W, int hq) {
  const int32_t B = store.block_size;
  const int64_t R = store.row_floats(), D = store.head_dim;
  LLM_CHECK(s.slot >= 0 && s.c0 < s.c1) << "exact rows of slot " << s.slot << " for positions [" << s.c0 << ", "
                                        << s.c1 << ")";
  StepExactRows out;
  out.first = s.c0 / B * B;
  out.row = R;
  out.k.resize(size_t((s.c1 - out.first) * R));
  out.v.resize(out.k.size());
  if (out.first < s.c0) {  // the open block's rows from earlier steps (the slot exists by then)
    LLM_CHECK(s.slot < store.num_slots()) << "exact KV slot " << s.slot << " was never written";
    for (int32_t p = out.first; p < s.c0; ++p) {
      const int64_t from = store.row_offset(s.slot, p), to = int64_t(p - out.first) * R;
      std::copy_n(store.k.begin() + from, R, out.k.begin() + to);
      std::copy_n(store.v.begin() + from, R, out.v.begin() + to);
    }
  }
  for (int32_t p = s.c0; p < s.c1; ++p) {
    const float* k = qkv_k(qkv, W, hq, D, s.t0 + (p - s.c0));
    const int64_t to = int64_t(p - out.first) * R;
    std::copy_n(k, R, out.k.begin() + to);
    std::copy_n(k + R, R, out.v.begin() + to);
  }
  return out;
}

void store_exact_rows(KvExactStore& store, const StepSeq& s, const float* qkv, int64_t W, int hq) {
  const int32_t B = store.block_size;
  const int64_t R = store.row_floats(), D = store.head_dim;
  store.ensure_slot(s.slot);
  // The ring keeps the last ring_blocks blocks: earlier rows of the step would be overwritten.
  const int32_t keep_from = std::max(s.c0, ((s.c1 - 1) / B - (store.ring_blocks - 1)) * B);
  for (int32_t p = keep_from; p < s.c1; ++p) {
    const float* k = qkv_k(qkv, W, hq, D, s.t0 + (p - s.c0));
    const int64_t to = store.row_offset(s.slot, p);
    std::copy_n(k, R, store.k.begin() + to);
    std::copy_n(k + R, R, store.v.begin() + to);
  }
}

}  // namespace llmctl::cpu
