#include "engine/runner/model_runner.h"

#include <atomic>
#include <cmath>

#include "engine/core/error.h"
#include "engine/runner/decode_graphs.h"

namespace llmctl {

namespace {
uint64_t next_graph_epoch() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}
}  // namespace

ModelRunner::ModelRunner(Model& model)
    : model_(model), widths_(model.activation_widths()), graph_epoch_(next_graph_epoch()) {}

KvCacheSpec ModelRunner::kv_spec(int block_size) const {
  const ModelConfig& c = model_.config();
  KvCacheSpec s;
  s.dtype = backend().activation_dtype();
  s.block_size = block_size;
  s.num_layers = c.num_layers;
  s.num_kv_heads = c.num_kv_heads;
  s.head_dim = c.head_dim;
  return s;
}

void ModelRunner::alloc_kv_cache(const KvCacheSpec& spec, int num_blocks) {
  const ModelConfig& c = model_.config();
  LLM_CHECK(spec.scale_layout == KvScaleLayout::None)
      << "KV cache scale layout " << kv_scale_layout_name(spec.scale_layout) << " is not implemented";
  LLM_CHECK(spec.num_layers == c.num_layers && spec.num_kv_heads == c.num_kv_heads && spec.head_dim == c.head_dim)
      << "KV cache spec does not match the model";
  LLM_CHECK(num_blocks > 0 && spec.block_size > 0) << "KV cache of " << num_blocks << " blocks of " << spec.block_size;
  kv_.clear();  // the old cache goes before the new one is allocated
  kv_.resize(size_t(c.num_layers));
  for (auto& l : kv_) {  // + 1: the scratch block
    l.k = backend().alloc(spec.dtype, {num_blocks + 1, spec.block_size, c.num_kv_heads, c.head_dim});
    l.v = backend().alloc(spec.dtype, {num_blocks + 1, spec.block_size, c.num_kv_heads, c.head_dim});
  }
}

void ModelRunner::free_kv_cache() {
  if (!graph_kv_.empty()) backend().clear_graphs();
  graph_kv_.clear();
  kv_.clear();
}

size_t ModelRunner::activation_bytes(int64_t T, int64_t R) const {
  const ActivationWidths& w = widths_;
  const size_t a = dtype_size(backend().activation_dtype());
  const int64_t per_token = 3 * w.hidden + w.qkv + w.attn + w.gate_up + w.act;
  return size_t(T) * (size_t(per_token) * a + size_t(w.hidden) * 4) +              // + the f32 residual
         size_t(R) * (size_t(w.hidden) * a + size_t(w.vocab) * 4);
}

void ModelRunner::ensure_workspace(int64_t T, int64_t R) {
  Backend& be = backend();
  const DType dt = be.activation_dtype();
  const ActivationWidths& w = widths_;
  if (ws_rows_ < R) {
    be.clear_graphs();  // they hold the old addresses
    ws_rows_ = R;
    ws_.last = be.alloc(dt, {R, w.hidden});
    ws_.logits = be.alloc(DType::F32, {R, w.vocab});  // f32: logprobs need the precision
  }
  if (ws_tokens_ >= T) return;
  be.clear_graphs();
  ws_tokens_ = T;
  ws_.hidden = be.alloc(dt, {T, w.hidden});
  ws_.residual = be.alloc(DType::F32, {T, w.hidden});  // f32: no re-rounding per layer
  ws_.normed = be.alloc(dt, {T, w.hidden});
  ws_.qkv = be.alloc(dt, {T, w.qkv});
  ws_.attn = be.alloc(dt, {T, w.attn});
  ws_.gate_up = be.alloc(dt, {T, w.gate_up});
  ws_.act = be.alloc(dt, {T, w.act});
}

void ModelRunner::tune_gemms(int64_t max_tokens, int64_t max_rows) {
  if (backend().device() == Device::CPU) return;
  ensure_workspace(max_tokens, max_rows);
  for (int64_t t = 1;; t *= 2) {
    const int64_t T = std::min(t, max_tokens);
    model_.run_linears(ws_, T, T <= max_rows ? T : 0);
    if (T >= max_tokens) break;
  }
  backend().synchronize();
}

AttentionPlan ModelRunner::plan_attention(const DeviceBatch& b, int64_t T, int64_t R) const {
  AttentionPlan p;
  p.batch = &b;
  p.tokens = T;
  p.rows = R;
  p.softmax_scale = 1.0f / std::sqrt(float(model_.config().head_dim));
  p.graph_context = b.plan ? b.plan->graph_context : 0;
  return p;
}

Tensor ModelRunner::execute(const BatchPlan& plan) {
  const ModelConfig& c = model_.config();
  Backend& be = backend();
  const int64_t T = plan.num_tokens(), R = int64_t(plan.logits_rows.size());
  LLM_CHECK(T > 0) << "empty batch";
  LLM_CHECK(int(kv_.size()) == c.num_layers) << "no KV cache: alloc_kv_cache before execute";
  const int block_size = int(kv_[0].k.dim(1)), pool_blocks = int(kv_[0].k.dim(0));
  plan.validate(block_size, pool_blocks);

  if (be.graphs_enabled() && graphable_decode(plan)) {
    const int bucket = decode_graph_bucket(plan.num_seqs());
    const int ctx = decode_graph_context(plan, block_size);
    LLM_CHECK(ctx < (1 << 30)) << "graph context " << ctx << " out of range";
    std::vector<const void*> kv_addresses;  // graphs hold every layer's cache address: a new cache, new graphs
    for (const KvLayer& l : kv_) kv_addresses.insert(kv_addresses.end(), {l.k.data, l.v.data});
    if (kv_addresses != graph_kv_) {
      be.clear_graphs();
      graph_kv_ = std::move(kv_addresses);
    }
    BatchPlan padded = pad_decode_plan(plan, bucket, ctx, block_size, pool_blocks - 1);
    ensure_workspace(bucket, bucket);
    DeviceBatch b = be.prepare_batch(padded);
    const AttentionPlan ap = plan_attention(b, bucket, bucket);
    const uint64_t key = (graph_epoch_ << 40) | (uint64_t(bucket) << 30) | uint64_t(ctx);
    be.run_graph(key, [&] { model_.forward(ap, ws_, kv_); });
    return first_rows(ws_.logits, R);
  }
  ensure_workspace(T, R);
  DeviceBatch b = be.prepare_batch(plan);
  model_.forward(plan_attention(b, T, R), ws_, kv_);
  return R == 0 ? Tensor::empty_host(DType::F32, {0, c.vocab_size}) : first_rows(ws_.logits, R);
}

}  // namespace llmctl
