// KvCacheSpec: bytes per block derive from the spec (dtype, scale layout, block size, layers, kv
// heads, head dim), not from the activation dtype; the runner allocates what the spec says.
#include <doctest/doctest.h>

#include "engine/backend/backend.h"
#include "engine/core/error.h"
#include "engine/executor/local_executor.h"
#include "engine/kv/kv_cache_spec.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/registry.h"
#include "tiny_config.h"

using namespace llmctl;

namespace {
KvCacheSpec spec(DType dt, KvScaleLayout layout) {
  KvCacheSpec s;
  s.dtype = dt;
  s.scale_layout = layout;
  s.block_size = 16;
  s.num_layers = 30;
  s.num_kv_heads = 3;
  s.head_dim = 64;
  return s;
}
}  // namespace

TEST_CASE("KvCacheSpec: bytes per block for each dtype and scale layout") {
  // SmolLM2-135M's shape: 2 (k, v) * 30 layers * 16 tokens * 3 heads * 64 dims = 184320 elements.
  const size_t elems = 2 * 30 * 16 * 3 * 64;
  CHECK(spec(DType::F32, KvScaleLayout::None).bytes_per_block() == elems * 4);
  CHECK(spec(DType::BF16, KvScaleLayout::None).bytes_per_block() == elems * 2);
  CHECK(spec(DType::F16, KvScaleLayout::None).bytes_per_block() == elems * 2);
  CHECK(spec(DType::I8, KvScaleLayout::None).bytes_per_block() == elems);
  // int8 per token and head: + a f32 scale and zero point per (k|v, layer, token, head).
  const size_t per_token_scales = 2 * 30 * 16 * 3 * 2 * 4;
  KvCacheSpec i8 = spec(DType::I8, KvScaleLayout::PerTokenPerHead);
  CHECK(i8.scale_bytes_per_block() == per_token_scales);
  CHECK(i8.bytes_per_block() == elems + per_token_scales);
  CHECK(i8.fixed_bytes() == 0);
  i8.scale_dtype = DType::F16;
  CHECK(i8.bytes_per_block() == elems + per_token_scales / 2);
  // fp8-style per-head scales: fixed per cache, nothing per block.
  KvCacheSpec ph = spec(DType::U8, KvScaleLayout::PerHead);
  CHECK(ph.bytes_per_block() == elems);
  CHECK(ph.fixed_bytes() == 2 * 30 * 3 * 4);
  // Linear in block size, layers, heads and head dim.
  KvCacheSpec s = spec(DType::BF16, KvScaleLayout::None);
  s.block_size = 32;
  CHECK(s.bytes_per_block() == 2 * elems * 2);
  s.head_dim = 128;
  CHECK(s.bytes_per_block() == 4 * elems * 2);
  CHECK(std::string(kv_scale_layout_name(KvScaleLayout::PerTokenPerHead)) == "per-token-per-head");
}

TEST_CASE("KvCacheSpec: the runner's spec follows the model and the backend, and sizes the cache") {
  const ModelConfig c = test::tiny_llama_config(50, 3);
  auto be = make_cpu_backend(1);
  std::unique_ptr<Model> m = make_model(random_checkpoint(c, 2, 0.3f), *be);
  LocalExecutor ex(*m);
  const KvCacheSpec s = ex.kv_spec(16);
  CHECK(s.dtype == be->activation_dtype());
  CHECK(s.scale_layout == KvScaleLayout::None);
  CHECK(s.num_layers == 3);
  CHECK(s.num_kv_heads == 2);
  CHECK(s.head_dim == 8);
  CHECK(s.bytes_per_block() == size_t(2) * 3 * 16 * 2 * 8 * dtype_size(be->activation_dtype()));
  ex.alloc_kv_cache(s, 5);
  const std::vector<KvLayer>& kv = ex.runner().kv_cache();
  REQUIRE(kv.size() == 3);
  size_t bytes = 0;
  for (const KvLayer& l : kv) bytes += l.k.nbytes() + l.v.nbytes();
  CHECK(bytes == (5 + 1) * s.bytes_per_block());  // + the scratch block padded graph rows write to
  // A layout the runner cannot store is refused, not silently allocated as another.
  KvCacheSpec q = s;
  q.scale_layout = KvScaleLayout::PerTokenPerHead;
  CHECK_THROWS_AS(ex.alloc_kv_cache(q, 5), Error);
}
