// The CPU attention's side of KvExactStore (engine/backend/kv_exact_rows.h): the exact rows one
// sequence's queries read in a step, and what the step leaves in its slot.
//
// A sequence's tokens in a step sit at consecutive positions [c0, c1) (c1 its context length), rows
// t0.. of qkv [T, (Hq + 2 Hkv) * D] (k after the Hq query heads, v after k). Its queries read exact
// keys [first, c1) at most, first = c0 rounded down to a block: rows [first, c0) from its slot,
// [c0, c1) from qkv.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/backend/kv_exact_rows.h"
#include "kernels/cpu/attention.h"

namespace llmctl::cpu {

struct StepExactRows {
  int32_t first = 0;     // position of row 0
  int64_t row = 0;       // floats a row: Hkv * D
  std::vector<float> k, v;  // [c1 - first, Hkv, D]

  // A query at `position`: its own block's keys [block start, position] from these rows.
  kernels::KvExactRows for_query(int32_t position, int32_t block_size, int64_t kvh, int64_t head_dim) const {
    const int32_t from = position / block_size * block_size;
    const int64_t at = int64_t(from - first) * row + kvh * head_dim;
    return {k.data() + at, v.data() + at, from, row};
  }
};

// qkv's row width W, the heads hq / hkv; positions [c0, c1) are rows t0.. of qkv.
struct StepSeq {
  int slot;
  int32_t c0, c1;
  int64_t t0;
};

StepExactRows gather_exact_rows(const KvExactStore& store, const StepSeq& s, const float* qkv, int64_t W, int hq);
// After the step's attention: its rows of the last ring_blocks blocks into the slot.
void store_exact_rows(KvExactStore& store, const StepSeq& s, const float* qkv, int64_t W, int hq);

}  // namespace llmctl::cpu
