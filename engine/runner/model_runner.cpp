#include "engine/runner/model_runner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <string>

#include "engine/core/error.h"
#include "engine/runner/decode_graphs.h"
#include "engine/sample/step_sampler.h"

namespace llmctl {

namespace {
uint64_t next_graph_epoch() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}
}  // namespace

ModelRunner::ModelRunner(Model& model, KvCacheOptions kv, PipelineOptions pp)
    : model_(model),
      kv_dtype_(kv.dtype),
      pp_(pp),
      fp8_exact_open_block_(kv.fp8_exact_open_block),
      widths_(model.activation_widths()),
      graph_epoch_(next_graph_epoch()) {
  LLM_REQUIRE(backend().caps().supports_kv_cache(kv_dtype_))
      << "the " << backend().name() << " backend has no " << kv_cache_dtype_name(kv_dtype_)
      << " KV cache (--kv-cache-dtype " << kv_cache_dtype_name(kv_dtype_) << "); use --kv-cache-dtype auto";
}

KvCacheSpec ModelRunner::kv_spec(int block_size) const {
  const ModelConfig& c = model_.config();
  KvCacheSpec spec = make_kv_cache_spec(kv_dtype_, backend().activation_dtype(), block_size, model_.num_local_layers(),
                                        model_.kv_heads(), c.head_dim);
  // fp8 keeps each sequence's open block exact where the backend can (unless asked not to, to measure).
  if (kv_dtype_ == KvCacheDtype::Fp8 && fp8_exact_open_block_ && backend().caps().supports_kv_exact_rows(kv_dtype_))
    spec.exact_ring_blocks = 1;
  return spec;
}

void ModelRunner::alloc_kv_cache(const KvCacheSpec& spec, const KvCacheLayout& layout) {
  const ModelConfig& c = model_.config();
  const int kv_heads = model_.kv_heads(), layers = model_.num_local_layers();  // this rank's
  const KvCacheSpec expect = make_kv_cache_spec(spec.kind, backend().activation_dtype(), spec.block_size,
                                                layers, kv_heads, c.head_dim);
  LLM_CHECK(spec.num_layers == layers && spec.num_kv_heads == kv_heads && spec.head_dim == c.head_dim)
      << "KV cache spec does not match the model";
  LLM_CHECK(spec.dtype == expect.dtype && spec.scale_layout == expect.scale_layout &&
            spec.scale_dtype == expect.scale_dtype)
      << "a " << kv_cache_dtype_name(spec.kind) << " KV cache of " << dtype_name(spec.dtype) << " with "
      << kv_scale_layout_name(spec.scale_layout) << " scales is not implemented";
  LLM_REQUIRE(backend().caps().supports_kv_cache(spec.kind))
      << "the " << backend().name() << " backend has no " << kv_cache_dtype_name(spec.kind) << " KV cache";
  LLM_CHECK(layout.num_groups() >= 1 && layout.num_groups() <= 2 && int(layout.windows.size()) == layout.num_groups() &&
            spec.block_size > 0)
      << "KV cache of " << layout.num_groups() << " groups of blocks of " << spec.block_size;
  for (int n : layout.num_blocks) LLM_CHECK(n > 0) << "a KV pool of " << n << " blocks";
  std::vector<int> group(static_cast<size_t>(layers));
  for (int i = 0; i < layers; ++i) {
    const int w = model_.local_layer_window(i);
    group[size_t(i)] = layout.group_of(w);
    // a pool serves one window: its blocks are released as that window moves on
    LLM_CHECK(layout.windows[size_t(group[size_t(i)])] == 0 || layout.windows[size_t(group[size_t(i)])] == w)
        << "layer " << i << " reads a window of " << w << " tokens from a KV pool for a window of "
        << layout.windows[size_t(group[size_t(i)])];
  }
  LLM_CHECK(spec.exact_ring_blocks >= 0 && spec.exact_ring_blocks <= 64 &&
            (spec.exact_ring_blocks == 0 || backend().caps().supports_kv_exact_rows(spec.kind)))
      << "exact KV rows (a ring of " << spec.exact_ring_blocks << " blocks) beside a " << kv_cache_dtype_name(spec.kind)
      << " cache on the " << backend().name() << " backend";
  std::vector<KvScales> fp8_scales;
  if (spec.kind == KvCacheDtype::Fp8) {
    fp8_scales = model_.kv_scales();
    LLM_CHECK(fp8_scales.empty() || int(fp8_scales.size()) == layers) << "KV scales for " << fp8_scales.size()
                                                                             << " layers";
  }
  // [Hkv] f32 on the backend: the layer's calibrated scales, or 1.0 (the warning is the runtime's).
  auto per_head = [&](const std::vector<float>* s) {
    Tensor h = Tensor::empty_host(DType::F32, {kv_heads});
    for (int i = 0; i < kv_heads; ++i) h.ptr<float>()[i] = s ? s->at(size_t(i)) : 1.0f;
    return backend().upload(h, DType::F32);  // stays f32 (a float upload would become the compute dtype on CUDA)
  };
  kv_.clear();  // the old cache goes before the new one is allocated
  kv_.resize(size_t(layers));
  kv_layout_ = layout;
  kv_group_ = group;
  for (size_t i = 0; i < kv_.size(); ++i) {  // + 1: the scratch block
    KvLayer& l = kv_[i];
    const int num_blocks = layout.num_blocks[size_t(group[i])];
    const std::vector<int64_t> shape = {num_blocks + 1, spec.block_size, kv_heads, c.head_dim};
    l.k = backend().alloc(spec.dtype, shape);
    l.v = backend().alloc(spec.dtype, shape);
    l.quant = spec.kind;
    if (spec.kind == KvCacheDtype::Int8) {  // (scale, zero point) per token and kv head
      l.k_scale = backend().alloc(DType::F32, {num_blocks + 1, spec.block_size, kv_heads, 2});
      l.v_scale = backend().alloc(DType::F32, {num_blocks + 1, spec.block_size, kv_heads, 2});
    } else if (spec.kind == KvCacheDtype::Fp8) {
      l.k_scale = per_head(fp8_scales.empty() ? nullptr : &fp8_scales[i].k);
      l.v_scale = per_head(fp8_scales.empty() ? nullptr : &fp8_scales[i].v);
    }
    if (spec.exact_ring_blocks > 0) {  // slots are added as sequences take them
      l.exact = std::make_shared<KvExactStore>();
      l.exact->ring_blocks = spec.exact_ring_blocks;
      l.exact->block_size = spec.block_size;
      l.exact->kv_heads = kv_heads;
      l.exact->head_dim = c.head_dim;
    }
  }
}

void ModelRunner::free_kv_cache() {
  if (!graph_kv_.empty()) backend().clear_graphs();
  graph_kv_.clear();
  kv_.clear();
  kv_group_.clear();
}

void ModelRunner::copy_blocks(const std::vector<std::pair<int, int>>& pairs, int group) {
  LLM_CHECK(group >= 0 && group < kv_layout_.num_groups() && !kv_.empty()) << "copy_blocks into KV group " << group;
  const int n = kv_layout_.num_blocks[size_t(group)];
  for (const auto& [src, dst] : pairs)
    LLM_CHECK(src >= 0 && src < n && dst >= 0 && dst < n) << "copy of KV block " << src << " to " << dst << " of " << n;
  if (pairs.empty()) return;
  std::vector<KvLayer> layers;  // the group's layers (handles onto the same storage)
  for (size_t i = 0; i < kv_.size(); ++i)
    if (kv_group_[i] == group) layers.push_back(kv_[i]);
  if (!layers.empty()) backend().copy_blocks(layers, pairs);
}

int ModelRunner::pool_blocks(int group) const {
  for (size_t i = 0; i < kv_.size(); ++i)
    if (kv_group_[i] == group) return int(kv_[i].k.dim(0));
  return kv_layout_.num_blocks[size_t(group)] + 1;  // no layer of it on this rank
}

size_t ModelRunner::activation_bytes(int64_t T, int64_t R) const {
  const ActivationWidths& w = widths_;
  const size_t a = dtype_size(backend().activation_dtype());
  const int64_t per_token = 3 * w.hidden + w.qkv + w.attn + w.gate_up + w.act +
                            w.expert_slots * (2 * w.hidden + w.expert_gate_up + w.expert_gate_up / 2);
  return size_t(T) * (size_t(per_token) * a + size_t(w.hidden + w.experts) * 4) +  // + the f32 residual (and router)
         size_t(R) * (size_t(w.hidden) * a + size_t(w.vocab + w.vocab_local) * 4);
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
    if (w.vocab_local > 0) ws_.logits_local = be.alloc(DType::F32, {R, w.vocab_local});
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
  if (w.experts > 0) {
    ws_.router = be.alloc(DType::F32, {T, w.experts});
    ws_.expert_in = be.alloc(dt, {T, w.expert_slots * w.hidden});
    ws_.expert_out = be.alloc(dt, {T, w.expert_slots * w.hidden});
    ws_.expert_gate_up = be.alloc(dt, {T, w.expert_slots * w.expert_gate_up});
    ws_.expert_act = be.alloc(dt, {T, w.expert_slots * w.expert_gate_up / 2});
  }
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

AttentionPlan ModelRunner::plan_attention(const DeviceBatch& b, const DeviceBatch* window, int64_t T,
                                          int64_t R) const {
  AttentionPlan p;
  p.batch = &b;
  p.window_batch = window;
  p.tokens = T;
  p.rows = R;
  const ModelConfig& c = model_.config();
  p.softmax_scale = c.softmax_scale();
  return p;
}

void ModelRunner::check_plan(const BatchPlan& plan) const {
  const ModelConfig& c = model_.config();
  LLM_CHECK(plan.num_tokens() > 0) << "empty batch";
  LLM_CHECK(int(kv_.size()) == model_.num_local_layers()) << "no KV cache: alloc_kv_cache before execute";
  const int B = int(kv_[0].k.dim(1));
  LLM_CHECK(plan.has_window_tables() == (kv_layout_.num_groups() > 1))
      << (plan.has_window_tables() ? "a plan with window tables for a cache of one pool"
                                   : "a plan without window tables for a cache whose sliding layers have a pool");
  plan.validate(B, pool_blocks(0), kv_layout_.windows[0]);
  if (plan.has_window_tables()) plan.validate_window_tables(B, pool_blocks(1), kv_layout_.windows[1]);
  LLM_CHECK(plan.exact_slot.empty() == !kv_[0].exact && (plan.exact_copies.empty() || kv_[0].exact))
      << (kv_[0].exact ? "a plan without exact KV slots for a cache that keeps exact rows"
                       : "a plan with exact KV slots for a cache without exact rows");
  for (int32_t id : plan.token_ids)  // the embedding (one vocab shard per rank) takes them as given
    LLM_CHECK(id >= 0 && id < c.vocab_size) << "token id " << id << " is outside the vocabulary (" << c.vocab_size << ")";
}

void ModelRunner::prepare_exact_slots(const BatchPlan& plan) {
  if (plan.exact_slot.empty() && plan.exact_copies.empty()) return;
  int slots = 0;
  for (int32_t e : plan.exact_slot) slots = std::max(slots, e + 1);
  for (int32_t e : plan.exact_copies) slots = std::max(slots, e + 1);
  backend().reserve_exact_slots(kv_, slots);
  if (!plan.exact_copies.empty()) backend().copy_exact_rows(kv_, plan.exact_copies);  // forks, before anything reads
}

Tensor ModelRunner::execute(const BatchPlan& plan) {
  const ModelConfig& c = model_.config();
  Backend& be = backend();
  const int64_t T = plan.num_tokens(), R = int64_t(plan.logits_rows.size());
  check_plan(plan);
  prepare_exact_slots(plan);
  const int block_size = int(kv_[0].k.dim(1));

  // Pipeline stages exchange activations through host memory inside the forward, a mixture of
  // experts routes on the host: no graphs there.
  if (be.caps().graphs && model_.pipeline_stages() == 1 && !model_.syncs_in_forward() && graphable_decode(plan)) {
    const int bucket = decode_graph_bucket(plan.num_seqs());
    const int ctx = decode_graph_context(plan, block_size);
    LLM_CHECK(ctx < (1 << 30)) << "graph context " << ctx << " out of range";
    std::vector<const void*> kv_addresses;  // graphs hold every layer's cache address: a new cache, new graphs
    for (const KvLayer& l : kv_) {
      kv_addresses.insert(kv_addresses.end(), {l.k.data, l.v.data});
      if (l.exact) kv_addresses.insert(kv_addresses.end(), {l.exact->k_dev.data, l.exact->v_dev.data});
    }
    if (kv_addresses != graph_kv_) {
      be.clear_graphs();
      graph_kv_ = std::move(kv_addresses);
    }
    const int window_scratch = kv_layout_.num_groups() > 1 ? pool_blocks(1) - 1 : -1;
    const BatchPlan padded = pad_decode_plan(plan, bucket, ctx, block_size, pool_blocks(0) - 1, window_scratch);
    ensure_workspace(bucket, bucket);
    const uint64_t key = (graph_epoch_ << 40) | (uint64_t(bucket) << 30) | uint64_t(ctx);
    forward(padded, bucket, bucket, ws_, key);
    return first_rows(ws_.logits, R);
  }
  ensure_workspace(T, R);
  if (model_.pipeline_stages() > 1) {
    const int64_t rows = run_micro_batches(plan);
    if (rows > 0) {
      Tensor logits = first_rows(ws_.logits, rows);
      model_.collect_logits(logits);
    }
  } else {
    forward(plan, T, R, ws_);
  }
  return R == 0 ? Tensor::empty_host(DType::F32, {0, c.vocab_size}) : first_rows(ws_.logits, R);
}

void ModelRunner::forward(const BatchPlan& plan, int64_t T, int64_t R, StepBuffers& buf, std::optional<uint64_t> graph) {
  Backend& be = backend();
  const DeviceBatch b = be.prepare_batch(plan);
  // The window tables as a batch of their own (the same device copy, other arrays).
  BatchPlan window_plan;
  DeviceBatch window;
  if (plan.has_window_tables()) {
    window_plan = plan.window_view();
    window = b;
    window.plan = &window_plan;
    window.slot_mapping = b.window_slot_mapping;
    window.block_table = b.window_block_table;
  }
  const AttentionPlan ap = plan_attention(b, plan.has_window_tables() ? &window : nullptr, T, R);
  if (graph)
    be.run_graph(*graph, [&] { model_.forward(ap, buf, kv_); });
  else
    model_.forward(ap, buf, kv_);
}

int ModelRunner::micro_batches(const BatchPlan& plan) const {
  // Each micro-batch reads the stage's weights again, so tiny ones lose more than the overlap
  // brings. Measured (scripts/bench-tp-cpu.sh, PP=2 on 2 CPU cores, decode steps of B sequences):
  // B = 4 (2 per micro-batch) loses 22%, B = 16 gains 4%, B = 64 gains 14%; prefill steps gain more.
  // PipelineOptions::micro_batches overrides the count (1: none), for measurements.
  const int stages = model_.pipeline_stages(), S = plan.num_seqs();
  if (pp_.micro_batches > 0) return std::clamp(pp_.micro_batches, 1, S);
  if (plan.micro_batches > 0) return std::min(int(plan.micro_batches), S);
  return plan.num_tokens() >= kMicroBatchTokens * stages ? std::min(stages, S) : 1;
}

void ModelRunner::submit(const BatchPlan& plan) {
  LLM_CHECK(model_.pipeline_stages() > 1) << "steps in flight need pipeline stages";
  check_plan(plan);
  prepare_exact_slots(plan);
  const int64_t R = int64_t(plan.logits_rows.size());
  ensure_workspace(plan.num_tokens(), R);
  run_micro_batches(plan);
  // Its own buffer: the next steps run through ws_ before this one's logits arrive.
  Submitted s;
  s.logits = Tensor::empty_host(DType::F32, {R, model_.config().vocab_size});
  s.handle = R > 0 ? model_.post_collect_logits(s.logits) : -1;
  submitted_.push_back(std::move(s));
}

Tensor ModelRunner::collect() {
  LLM_CHECK(!submitted_.empty()) << "collect without a submitted step";
  Submitted s = std::move(submitted_.front());
  submitted_.pop_front();
  model_.finish_collect_logits(s.handle);
  return s.logits;
}

StepOutput ModelRunner::sample(const Tensor& logits, const StepSampling& sampling) {
  return sample_step(backend(), logits, sampling);
}

int64_t ModelRunner::run_micro_batches(const BatchPlan& plan) {
  const int M = micro_batches(plan), S = plan.num_seqs();
  const int64_t T = plan.num_tokens();
  // Cut the sequences into M runs of about T / M tokens each, in order.
  std::vector<int> cuts = {0};
  for (int s = 1; s < S && int(cuts.size()) < M; ++s)
    if (int64_t(plan.query_start[s]) * M >= T * int64_t(cuts.size())) cuts.push_back(s);
  cuts.push_back(S);
  int64_t rows = 0;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    const BatchPlan part = cuts.size() == 2 ? plan : slice_plan(plan, cuts[i], cuts[i + 1]);
    const int64_t t0 = plan.query_start[cuts[i]], Ti = part.num_tokens(), Ri = int64_t(part.logits_rows.size());
    StepBuffers view = ws_;  // this micro-batch's rows of every buffer
    for (Tensor* t : {&view.hidden, &view.residual, &view.normed, &view.qkv, &view.attn, &view.gate_up, &view.act})
      *t = row_slice(*t, t0, Ti);
    for (Tensor* t : {&view.router, &view.expert_in, &view.expert_out, &view.expert_gate_up, &view.expert_act})
      if (!t->empty()) *t = row_slice(*t, t0, Ti);
    for (Tensor* t : {&view.last, &view.logits, &view.logits_local})
      if (!t->empty()) *t = row_slice(*t, rows, Ri);
    forward(part, Ti, Ri, view);
    rows += Ri;
  }
  return rows;
}

}  // namespace llmctl
