// The CPU attention's side of KvExactStore (engine/backend/kv_exact_rows.h): the exact rows one
// sequence's queries read in a step, and what the step leaves in its slot.
//
// A sequence's tokens in a step sit at consecutive positions [c0, c1) (c1 its context length), rows
// t0.. of qkv [T, (Hq + 2 Hkv) * D] (k after the Hq query heads, v after k). Its queries read exact
// keys [first, c1) at most, first = c0 rounded down to a block: rows [first, c0) written by earlier
// steps, [c0, c1) by this one.
//   - a step inside one block (decode, most verify steps): its rows go into the slot first and the
//     queries read the slot in place (the ring row of a position in that block is not one they need);
//   - a step across blocks (prefill chunks): the rows are gathered into a buffer (the slot's, then
//     qkv's), and after the attention the step's rows of the last R blocks go into the slot (earlier
//     would overwrite rows the step's first block still reads).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/backend/kv_exact_rows.h"
#include "kernels/cpu/attention.h"

namespace llmctl::cpu {

struct StepSeq {
  int seq;   // the plan's sequence index
  int slot;  // its exact slot
  int32_t c0, c1;
  int64_t t0;
};

struct StepExactRows {
  int32_t first = 0;                // position of the row k / v point at
  int64_t row = 0;                  // floats a row: Hkv * D
  const float* k = nullptr;         // null: the sequence reads no exact rows
  const float* v = nullptr;
  std::vector<float> k_buf, v_buf;  // the gathered rows of a step across blocks

  // A query at `position`: its own block's keys [block start, position] from these rows.
  kernels::KvExactRows for_query(int32_t position, int32_t block_size, int64_t kvh, int64_t head_dim) const {
    const int32_t from = position / block_size * block_size;
    const int64_t at = int64_t(from - first) * row + kvh * head_dim;
    return {k + at, v + at, from, row};
  }
};

// Before the step's attention: rows[s.seq] for every sequence of `seqs` (qkv's row width W, hq query
// heads). The pointers stay valid until finish_exact_rows.
void prepare_exact_rows(KvExactStore& store, const std::vector<StepSeq>& seqs, const float* qkv, int64_t W, int hq,
                        std::vector<StepExactRows>& rows);
// After it: the rows of the steps across blocks into their slots.
void finish_exact_rows(KvExactStore& store, const std::vector<StepSeq>& seqs, const float* qkv, int64_t W, int hq);

}  // namespace llmctl::cpu
