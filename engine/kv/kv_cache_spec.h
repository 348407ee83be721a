// KvCacheSpec: what one block of the paged KV cache holds, and so how many bytes it takes.
//
// Per layer, k and v are each [NB, B, Hkv, D] of `dtype`. Quantized layouts add scales:
//   per-token-per-head  (int8, dynamic, asymmetric): a scale and a zero point per token, kv head,
//                       for k and v of each layer -> stored per block, counted in bytes_per_block()
//   per-head            (fp8, calibrated k_scale/v_scale): one scale per kv head for k and v of each
//                       layer, fixed for the whole cache -> fixed_bytes(), nothing per block
// --kv-cache-dtype picks one (make_kv_cache_spec): auto = the activation dtype, no scales; int8 =
// I8 + per-token-per-head; fp8 = e4m3 codes as U8 + per-head. Scales are f32.
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/kv_cache_dtype.h"
#include "engine/core/dtype.h"

namespace llmctl {

enum class KvScaleLayout { None, PerTokenPerHead, PerHead };

struct KvCacheSpec {
  KvCacheDtype kind = KvCacheDtype::Auto;  // what the user asked for; dtype and scale_layout follow
  DType dtype = DType::F32;  // element type of k and v
  KvScaleLayout scale_layout = KvScaleLayout::None;
  DType scale_dtype = DType::F32;  // of scales and zero points
  int block_size = 16;             // tokens per block
  int num_layers = 0, num_kv_heads = 0, head_dim = 0;
  // > 0: each running sequence's open block is also kept exact, in f32, in a ring of this many
  // blocks (engine/backend/kv_exact_rows.h); 0: no exact rows. The runner offers 1 for fp8 caches
  // where the backend keeps them; the engine widens it for speculative tokens.
  int exact_ring_blocks = 0;

  // k and v of every layer for one block, plus per-token scales where the layout has them.
  size_t bytes_per_block() const;
  // Scale storage of one block (0 unless per-token-per-head).
  size_t scale_bytes_per_block() const;
  // Storage that does not grow with the block count (per-head scales).
  size_t fixed_bytes() const;
  // The exact rows of one running sequence, every layer (0 without them).
  size_t exact_bytes_per_seq() const;
};

// The pools of a cache (engine/kv/kv_cache_groups.h): group g has num_blocks[g] blocks for the
// layers whose window is windows[g] (0: the whole context). With one group every layer is in it,
// whatever its window; with two, group 1 holds the sliding-window layers.
struct KvCacheLayout {
  KvCacheLayout(int blocks = 0) : num_blocks{blocks}, windows{0} {}  // one group (implicit)
  KvCacheLayout(std::vector<int> blocks, std::vector<int> group_windows)
      : num_blocks(std::move(blocks)), windows(std::move(group_windows)) {}
  std::vector<int> num_blocks, windows;
  int num_groups() const { return int(num_blocks.size()); }
  // The group of a layer whose window is `window`.
  int group_of(int window) const { return num_groups() > 1 && window > 0 ? 1 : 0; }
};

const char* kv_scale_layout_name(KvScaleLayout l);

// The same for a cache of several pools, whose groups hold group_layers[g] of spec.num_layers layers.
std::string describe_kv_cache(const KvCacheSpec& spec, const KvCacheLayout& layout, const std::vector<int>& group_layers);

// "int8 KV cache: 1234 blocks = 19744 tokens (9.5 KiB a token)": what a cache of num_blocks holds.
std::string describe_kv_cache(const KvCacheSpec& spec, int num_blocks);

// The spec of a `kind` cache on a backend whose activations are `activation` (auto's dtype).
KvCacheSpec make_kv_cache_spec(KvCacheDtype kind, DType activation, int block_size, int num_layers, int num_kv_heads,
                               int head_dim);  // "none", "per-token-per-head", "per-head"

}  // namespace llmctl
