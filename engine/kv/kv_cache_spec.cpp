#include "engine/kv/kv_cache_spec.h"

#include <cstdio>

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

size_t KvCacheSpec::exact_bytes_per_seq() const {
  return size_t(2) * num_layers * size_t(exact_ring_blocks) * block_size * num_kv_heads * size_t(head_dim) * sizeof(float);
}

KvCacheSpec make_kv_cache_spec(KvCacheDtype kind, DType activation, int block_size, int num_layers, int num_kv_heads,
                               int head_dim) {
  KvCacheSpec s;
  s.kind = kind;
  switch (kind) {
    case KvCacheDtype::Auto: s.dtype = activation; break;
    case KvCacheDtype::Int8: s.dtype = DType::I8, s.scale_layout = KvScaleLayout::PerTokenPerHead; break;
    case KvCacheDtype::Fp8: s.dtype = DType::U8, s.scale_layout = KvScaleLayout::PerHead; break;
  }
  s.scale_dtype = DType::F32;
  s.block_size = block_size;
  s.num_layers = num_layers;
  s.num_kv_heads = num_kv_heads;
  s.head_dim = head_dim;
  return s;
}

std::string describe_kv_cache(const KvCacheSpec& spec, int num_blocks) {
  const std::string kind = spec.kind == KvCacheDtype::Auto ? dtype_name(spec.dtype) : kv_cache_dtype_name(spec.kind);
  char buf[240];
  int n = std::snprintf(buf, sizeof buf, "%s KV cache: %d blocks = %lld tokens (%.1f KiB a token)", kind.c_str(),
                        num_blocks, (long long)num_blocks * spec.block_size,
                        double(spec.bytes_per_block()) / spec.block_size / 1024.0);
  if (spec.exact_ring_blocks > 0 && n > 0 && size_t(n) < sizeof buf)
    std::snprintf(buf + n, sizeof buf - size_t(n), ", each sequence's open block also exact in f32 (%.0f KiB a sequence)",
                  double(spec.exact_bytes_per_seq()) / 1024.0);
  return buf;
}

std::string describe_kv_cache(const KvCacheSpec& spec, const KvCacheLayout& layout, const std::vector<int>& group_layers) {
  if (layout.num_groups() < 2 || spec.num_layers <= 0) return describe_kv_cache(spec, layout.num_blocks.at(0));
  // one pool per group: group 0's blocks hold its layers only, group 1's the sliding ones
  const std::string kind = spec.kind == KvCacheDtype::Auto ? dtype_name(spec.dtype) : kv_cache_dtype_name(spec.kind);
  const double per_layer_token = double(spec.bytes_per_block()) / spec.num_layers / spec.block_size / 1024.0;
  const int B = spec.block_size, window = layout.windows.at(1);
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "%s KV cache: %d blocks = %lld tokens for the %d full-attention layers (%.1f KiB a token); the %d "
                "sliding-window layers (window %d) keep %d blocks of their own (%.1f KiB a token, up to %lld tokens a "
                "sequence)",
                kind.c_str(), layout.num_blocks.at(0), (long long)layout.num_blocks.at(0) * B, group_layers.at(0),
                per_layer_token * group_layers.at(0), group_layers.at(1), window, layout.num_blocks.at(1),
                per_layer_token * group_layers.at(1), (long long)((int64_t(window) + B - 1) / B + 1) * B);
  std::string out = buf;
  if (spec.exact_ring_blocks > 0) {
    std::snprintf(buf, sizeof buf, ", each sequence's open block also exact in f32 (%.0f KiB a sequence)",
                  double(spec.exact_bytes_per_seq()) / 1024.0);
    out += buf;
  }
  return out;
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
