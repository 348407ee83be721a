// Paged attention over the KV cache, varlen and causal by position, GQA-aware.
//
// Inputs: qkv [T, (Hq + 2*Hkv) * D] (only the q part is read: the cache already holds this step's k
// and v), k_cache / v_cache [NB, B, Hkv, D], out [T, Hq*D], all in `dtype` (f16 or bf16; f32
// accumulation), except a quantized cache, read in place (kv_storage below). Sequence s owns tokens [query_start[s], query_start[s+1]); token t at position p
// attends to cache positions 0..p of its sequence (with a sliding window W: max(0, p - W + 1)..p),
// located through block_table[s, p / B] * B + p % B.
// Query head h reads kv head h / (Hq / Hkv). Head dims 64 and 128; any block size.
//
// Two kernels share a step, chosen per sequence by how many new tokens it has:
//   decode  (exactly 1): one block per (sequence, kv head, context partition) handles all q heads of
//           the kv head; long contexts are split into partitions (flash-decoding) whose partial
//           softmaxes go to the workspace (f32), and the last block of a sequence to finish merges
//           them (split_counters count the finished blocks and are left at zero).
//   prefill (2 or more): a 64-query x 64-key tiled kernel with online softmax; Q K^T and P V on
//           tensor cores (wmma 16x16x16), softmax statistics in f32.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/scalar_types.h"

namespace llmctl::cuda {

// What the cache's elements are. Dense: `dtype` values. Int8 / Fp8: the codes of kv_quant.cuh (int8
// with (scale, zero) f32 per slot and kv head in k_scale / v_scale [NB, B, Hkv, 2]; e4m3 with one f32
// scale per kv head, [Hkv]), dequantized in registers and rounded to `dtype` as they are read, so the
// result is that of the dense kernels over a dequantized copy of the cache (kv_codes.cuh).
enum class KvStorage { Dense, Int8, Fp8 };

struct AttentionParams {
  DType dtype = DType::BF16;
  const void* qkv = nullptr;
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  KvStorage kv_storage = KvStorage::Dense;
  const float* k_scale = nullptr;  // Int8 / Fp8 caches only
  const float* v_scale = nullptr;
  void* out = nullptr;
  const int32_t* positions = nullptr;    // [T]
  const int32_t* query_start = nullptr;  // [S+1]
  const int32_t* block_table = nullptr;  // [S, max_blocks_per_seq]
  int num_seqs = 0, num_q_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 16, max_blocks_per_seq = 0;
  float scale = 1.f;
  int window = 0;  // > 0: sliding-window attention, a token at p reads positions (p - window, p] only
  float softcap = 0.f;  // > 0: each score s = scale * q.k becomes softcap * tanh(s / softcap) (Gemma 2)
  // Host-side facts about the batch (from the BatchPlan) that size the grids:
  int max_query_len = 0;    // most new tokens of one sequence
  int max_context_len = 0;  // >= max position + 1 over all tokens
  bool any_decode = false;  // some sequence has exactly one new token
  bool any_prefill = false; // some sequence has two or more
  int num_sms = 132;        // of the device, to decide how finely to split decode contexts
  // Batch-invariant mode (--deterministic): every token runs the decode kernel as its own row
  // (token_seq[t] = its sequence) with partitions of a fixed length, so a token's result does not
  // depend on how its prompt was chunked or what else is in the batch.
  const int32_t* token_seq = nullptr;  // [T], or null
  int num_tokens = 0;
  // Exact open-block rows beside an fp8 cache (engine/backend/kv_exact_rows.h; per-token mode
  // only): a token at position p of a sequence with exact_slot[s] >= 0 reads the keys and values of
  // its own block [p / B * B, p] exact, the step's own ones from qkv (its tokens sit at consecutive
  // positions from the first, query_start[s]), the earlier ones from the slot's ring in exact_k /
  // exact_v [slots, R * B, Hkv, D] of dtype (position q at ring row (q / B % R) * B + q % B).
  const int32_t* exact_slot = nullptr;  // [S], or null
  const void* exact_k = nullptr;
  const void* exact_v = nullptr;
  int exact_ring_blocks = 0;  // R
  int fixed_partition_len = 0;         // > 0: decode partitions of this length (a multiple of 128: also a multiple of the 32-key tile)
  float* workspace = nullptr;  // attention_workspace_bytes(p) bytes, for split decode
  size_t workspace_bytes = 0;
  int* split_counters = nullptr;  // attention_split_counters(p) ints, zero before the first launch
  size_t split_counters_count = 0;
};

// How a decode context is split: partitions of partition_len tokens (a multiple of 32).
struct DecodeSplit {
  int partition_len = 0, num_partitions = 0;
};
DecodeSplit plan_decode_split(const AttentionParams& p);
// Rows the decode kernel runs: one per token in per-token mode, else one per sequence.
#ifdef __CUDACC__
__host__ __device__
#endif
inline int decode_rows(const AttentionParams& p) { return p.token_seq ? p.num_tokens : p.num_seqs; }
size_t attention_workspace_bytes(const AttentionParams& p);
size_t attention_split_counters(const AttentionParams& p);

void launch_attention(const AttentionParams& p, cudaStream_t stream);

}  // namespace llmctl::cuda
