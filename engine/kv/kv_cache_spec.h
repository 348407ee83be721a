// KvCacheSpec: what one block of the paged KV cache holds, and so how many bytes it takes.
//
// Per layer, k and v are each [NB, B, Hkv, D] of `dtype`. Quantized layouts add scales:
//   per-token-per-head  (int8, dynamic, asymmetric): a scale and a zero point per token, kv head,
//                       for k and v of each layer -> stored per block, counted in bytes_per_block()
//   per-head            (fp8, calibrated k_scale/v_scale): one scale per kv head for k and v of each
//                       layer, fixed for the whole cache -> fixed_bytes(), nothing per block
// Only the unquantized layout (dtype = the backend's activation dtype, no scales) runs today.
#pragma once
#include <cstddef>

#include "engine/core/dtype.h"

namespace llmctl {

enum class KvScaleLayout { None, PerTokenPerHead, PerHead };

struct KvCacheSpec {
  DType dtype = DType::F32;  // element type of k and v
  KvScaleLayout scale_layout = KvScaleLayout::None;
  DType scale_dtype = DType::F32;  // of scales and zero points
  int block_size = 16;             // tokens per block
  int num_layers = 0, num_kv_heads = 0, head_dim = 0;

  // k and v of every layer for one block, plus per-token scales where the layout has them.
  size_t bytes_per_block() const;
  // Scale storage of one block (0 unless per-token-per-head).
  size_t scale_bytes_per_block() const;
  // Storage that does not grow with the block count (per-head scales).
  size_t fixed_bytes() const;
};

const char* kv_scale_layout_name(KvScaleLayout l);  // "none", "per-token-per-head", "per-head"

}  // namespace llmctl
