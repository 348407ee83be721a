#include "engine/kv/kv_cache_spec.h"

namespace llmctl {

size_t KvCacheSpec::scale_bytes_per_block() const {
  if (scale_layout != KvScaleLayout::PerTokenPerHead) return 0;
  // k and v; a scale and a zero point (asymmetric) per token and kv head.
  return size_t(2) * num_layers * size_t(block_size) * num_kv_heads * 2 * dtype_size(scale_dtype);
}

size_t KvCacheSpec::bytes_per_block() const {
  const size_t elems = size_t(2) * num_layers * size_t(block_size) * num_kv_heads * size_t(head_dim);
  return elems * dtype_size(dtype) + scale_bytes_per_block();
}

size_t KvCacheSpec::fixed_bytes() const {
  if (scale_layout != KvScaleLayout::PerHead) return 0;
  return size_t(2) * num_layers * num_kv_heads * dtype_size(scale_dtype);  // k_scale, v_scale per head
}

const char* kv_scale_layout_name(KvScaleLayout l) {
  switch (l) {
    case KvScaleLayout::None: return "none";
    case KvScaleLayout::PerTokenPerHead: return "per-token-per-head";
    case KvScaleLayout::PerHead: return "per-head";
  }
  return "?";
}

}  // namespace llmctl
