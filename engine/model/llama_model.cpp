#include "engine/model/llama_model.h"

#include <cmath>
#include <cstring>
#include <string>

#include "engine/core/error.h"
#include "engine/model/llama_tensors.h"

namespace llmctl {

namespace {

// Concatenates host tensors along dim 0 (same dtype, same trailing dims).
Tensor concat_rows(const std::vector<const Tensor*>& parts) {
  int64_t rows = 0;
  for (auto* p : parts) {
    LLM_CHECK(p->dtype == parts[0]->dtype && p->numel() / p->dim(0) == parts[0]->numel() / parts[0]->dim(0))
        << "cannot fuse tensors of different dtype or width";
    rows += p->dim(0);
  }
  std::vector<int64_t> shape = parts[0]->shape;
  shape[0] = rows;
  Tensor out = Tensor::empty_host(parts[0]->dtype, shape);
  size_t off = 0;
  for (auto* p : parts) {
    std::memcpy(static_cast<char*>(out.data) + off, p->data, p->nbytes());
    off += p->nbytes();
  }
  return out;
}

std::string layer_name(int i, const char* rest) { return "model.layers." + std::to_string(i) + "." + rest; }

}  // namespace

RopeParams make_rope_params(const ModelConfig& c) {
  RopeParams p;
  p.head_dim = c.head_dim;
  const int half = c.head_dim / 2;
  p.inv_freq.resize(half);
  for (int i = 0; i < half; ++i) {
    // As the reference: base ** (2i / dim) in f32, then its reciprocal.
    float expo = float(2 * i) / float(c.head_dim);
    p.inv_freq[i] = 1.0f / std::pow(c.rope_theta, expo);
  }
  const RopeScaling& s = c.rope_scaling;
  if (s.type == "linear") {
    for (float& f : p.inv_freq) f /= s.factor;
  } else if (s.type == "llama3") {
    const float old_len = float(s.original_max_position_embeddings);
    const float low_wavelen = old_len / s.low_freq_factor, high_wavelen = old_len / s.high_freq_factor;
    for (float& f : p.inv_freq) {
      const float wavelen = 2.0f * float(M_PI) / f;
      if (wavelen > low_wavelen) {
        f = f / s.factor;
      } else if (wavelen >= high_wavelen) {
        const float smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
        f = (1.0f - smooth) * f / s.factor + smooth * f;
      }
    }
  }
  return p;
}

LlamaModel::LlamaModel(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype)
    : config_(ckpt.config), backend_(backend) {
  config_.validate();
  check_llama_tensors(ckpt);  // every shape against the config before a kernel reads a weight
  const ModelConfig& c = config_;
  const Tensor& embed_host = ckpt.get("model.embed_tokens.weight");
  weight_dtype_ = weight_dtype.value_or(embed_host.dtype);
  auto up = [&](const Tensor& t) { return backend_.upload(t, weight_dtype_); };
  auto up_f32 = [&](const Tensor& t) { return backend_.upload(t, DType::F32); };  // norms, biases

  LLM_REQUIRE(embed_host.rank() == 2 && embed_host.dim(0) == c.vocab_size && embed_host.dim(1) == c.hidden_size)
      << "model.embed_tokens.weight has shape " << embed_host.shape_str() << ", expected [" << c.vocab_size << ", "
      << c.hidden_size << "]";
  embed_ = up(embed_host);
  final_norm_ = up_f32(ckpt.get("model.norm.weight"));
  lm_head_ = (c.tie_word_embeddings || !ckpt.has("lm_head.weight")) ? embed_ : up(ckpt.get("lm_head.weight"));

  const int64_t qkv_rows = int64_t(c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  for (int i = 0; i < c.num_layers; ++i) {
    Layer L;
    L.input_norm = up_f32(ckpt.get(layer_name(i, "input_layernorm.weight")));
    L.post_norm = up_f32(ckpt.get(layer_name(i, "post_attention_layernorm.weight")));
    const Tensor& q = ckpt.get(layer_name(i, "self_attn.q_proj.weight"));
    const Tensor& k = ckpt.get(layer_name(i, "self_attn.k_proj.weight"));
    const Tensor& v = ckpt.get(layer_name(i, "self_attn.v_proj.weight"));
    Tensor qkv = concat_rows({&q, &k, &v});
    LLM_REQUIRE(qkv.dim(0) == qkv_rows && qkv.dim(1) == c.hidden_size)
        << "layer " << i << ": q/k/v projections do not match the config (fused shape " << qkv.shape_str() << ")";
    L.qkv = up(qkv);
    if (c.attention_bias) {
      Tensor qb = convert_host(ckpt.get(layer_name(i, "self_attn.q_proj.bias")), DType::F32);
      Tensor kb = convert_host(ckpt.get(layer_name(i, "self_attn.k_proj.bias")), DType::F32);
      Tensor vb = convert_host(ckpt.get(layer_name(i, "self_attn.v_proj.bias")), DType::F32);
      L.qkv_bias = up_f32(concat_rows({&qb, &kb, &vb}));
    }
    L.o_proj = up(ckpt.get(layer_name(i, "self_attn.o_proj.weight")));
    const Tensor& g = ckpt.get(layer_name(i, "mlp.gate_proj.weight"));
    const Tensor& u = ckpt.get(layer_name(i, "mlp.up_proj.weight"));
    L.gate_up = up(concat_rows({&g, &u}));
    LLM_REQUIRE(L.gate_up.dim(0) == 2 * int64_t(c.intermediate_size)) << "layer " << i << ": mlp shape mismatch";
    L.down = up(ckpt.get(layer_name(i, "mlp.down_proj.weight")));
    layers_.push_back(std::move(L));
  }
  rope_ = make_rope_params(c);
}

size_t LlamaModel::kv_bytes_per_block(int block_size) const {
  return size_t(2) * config_.num_layers * block_size * config_.num_kv_heads * config_.head_dim *
         dtype_size(backend_.activation_dtype());
}

std::vector<KvLayer> LlamaModel::alloc_kv_cache(int num_blocks, int block_size) {
  std::vector<KvLayer> kv(config_.num_layers);
  const DType dt = backend_.activation_dtype();
  for (auto& l : kv) {  // + 1: the scratch block
    l.k = backend_.alloc(dt, {num_blocks + 1, block_size, config_.num_kv_heads, config_.head_dim});
    l.v = backend_.alloc(dt, {num_blocks + 1, block_size, config_.num_kv_heads, config_.head_dim});
  }
  return kv;
}

size_t LlamaModel::activation_bytes(int64_t T, int64_t R) const {
  const ModelConfig& c = config_;
  const size_t a = dtype_size(backend_.activation_dtype());
  const int64_t per_token = 3 * int64_t(c.hidden_size) + int64_t(c.num_heads + 2 * c.num_kv_heads) * c.head_dim +
                            int64_t(c.num_heads) * c.head_dim + 3 * int64_t(c.intermediate_size);
  return size_t(T) * (size_t(per_token) * a + size_t(c.hidden_size) * 4) +
         size_t(R) * (size_t(c.hidden_size) * a + size_t(c.vocab_size) * 4);
}

void LlamaModel::ensure_workspace(int64_t T, int64_t R) {
  const ModelConfig& c = config_;
  const DType dt = backend_.activation_dtype();
  if (ws_.rows < R) {
    backend_.clear_graphs();  // they hold the old addresses
    ws_.rows = R;
    ws_.last = backend_.alloc(dt, {R, c.hidden_size});
    ws_.logits = backend_.alloc(DType::F32, {R, c.vocab_size});  // f32: logprobs need the precision
  }
  if (ws_.tokens >= T) return;
  backend_.clear_graphs();
  ws_.tokens = T;
  ws_.hidden = backend_.alloc(dt, {T, c.hidden_size});
  ws_.residual = backend_.alloc(DType::F32, {T, c.hidden_size});  // f32: no re-rounding per layer
  ws_.normed = backend_.alloc(dt, {T, c.hidden_size});
  ws_.qkv = backend_.alloc(dt, {T, int64_t(c.num_heads + 2 * c.num_kv_heads) * c.head_dim});
  ws_.attn = backend_.alloc(dt, {T, int64_t(c.num_heads) * c.head_dim});
  ws_.gate_up = backend_.alloc(dt, {T, 2 * int64_t(c.intermediate_size)});
  ws_.act = backend_.alloc(dt, {T, c.intermediate_size});
}

// A view of the first T rows of a workspace buffer.
static Tensor rows(const Tensor& t, int64_t T) {
  Tensor v = t;
  v.shape[0] = T;
  return v;
}

namespace {
// Decode batches are padded up to one of these sizes so that few graphs serve every batch.
constexpr int kGraphBuckets[] = {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 224, 256};

int graph_bucket(int seqs) {
  for (int b : kGraphBuckets)
    if (seqs <= b) return b;
  return 0;
}

int64_t next_pow2(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}
}  // namespace

void LlamaModel::tune_gemms(int64_t max_tokens, int64_t max_rows) {
  if (backend_.device() == Device::CPU || layers_.empty()) return;
  ensure_workspace(max_tokens, max_rows);
  const Layer& L = layers_[0];  // every layer has the same shapes
  for (int64_t t = 1;; t *= 2) {
    const int64_t T = std::min(t, max_tokens);
    Tensor qkv = rows(ws_.qkv, T), hidden = rows(ws_.hidden, T), gate_up = rows(ws_.gate_up, T);
    backend_.linear(rows(ws_.normed, T), L.qkv, L.qkv_bias.empty() ? nullptr : &L.qkv_bias, qkv);
    backend_.linear(rows(ws_.attn, T), L.o_proj, nullptr, hidden);
    backend_.linear(rows(ws_.normed, T), L.gate_up, nullptr, gate_up);
    backend_.linear(rows(ws_.act, T), L.down, nullptr, hidden);
    if (T <= max_rows) {
      Tensor logits = rows(ws_.logits, T);
      backend_.linear(rows(ws_.last, T), lm_head_, nullptr, logits);
    }
    if (T >= max_tokens) break;
  }
  backend_.synchronize();
}

void LlamaModel::run_step(const DeviceBatch& b, int64_t T, int64_t R, std::vector<KvLayer>& kv) {
  const ModelConfig& c = config_;
  Tensor hidden = rows(ws_.hidden, T), residual = rows(ws_.residual, T), normed = rows(ws_.normed, T);
  Tensor qkv = rows(ws_.qkv, T), attn = rows(ws_.attn, T), gate_up = rows(ws_.gate_up, T), act = rows(ws_.act, T);
  const float scale = 1.0f / std::sqrt(float(c.head_dim));

  backend_.embed(embed_, b, residual);
  for (int i = 0; i < c.num_layers; ++i) {
    Layer& L = layers_[i];
    if (i == 0)
      backend_.rms_norm(residual, L.input_norm, c.rms_norm_eps, normed, nullptr);
    else
      backend_.rms_norm(hidden, L.input_norm, c.rms_norm_eps, normed, &residual);  // residual += mlp out
    backend_.linear(normed, L.qkv, L.qkv_bias.empty() ? nullptr : &L.qkv_bias, qkv);
    backend_.rope_write_kv(qkv, b, rope_, c.num_heads, c.num_kv_heads, kv[i]);
    backend_.attention(qkv, kv[i], b, c.num_heads, c.num_kv_heads, scale, attn);
    backend_.linear(attn, L.o_proj, nullptr, hidden);
    backend_.rms_norm(hidden, L.post_norm, c.rms_norm_eps, normed, &residual);  // residual += attn out
    backend_.linear(normed, L.gate_up, nullptr, gate_up);
    backend_.silu_mul(gate_up, act);
    backend_.linear(act, L.down, nullptr, hidden);
  }
  backend_.rms_norm(hidden, final_norm_, c.rms_norm_eps, normed, &residual);
  if (R == 0) return;
  Tensor last = rows(ws_.last, R), logits = rows(ws_.logits, R);
  backend_.gather_rows(normed, b, last);
  backend_.linear(last, lm_head_, nullptr, logits);
}

Tensor LlamaModel::forward_device(const BatchPlan& plan, std::vector<KvLayer>& kv) {
  const ModelConfig& c = config_;
  const int64_t T = plan.num_tokens(), R = int64_t(plan.logits_rows.size());
  LLM_CHECK(T > 0) << "empty batch";
  LLM_CHECK(int(kv.size()) == c.num_layers) << "KV cache has " << kv.size() << " layers";
  const int block_size = int(kv[0].k.dim(1)), pool_blocks = int(kv[0].k.dim(0));
  plan.validate(block_size, pool_blocks);

  bool rows_in_order = R == plan.num_seqs();
  for (int64_t r = 0; rows_in_order && r < R; ++r) rows_in_order = plan.logits_rows[r] == r;
  const int bucket = graph_bucket(plan.num_seqs());
  if (backend_.graphs_enabled() && plan.decode_only() && rows_in_order && bucket > 0) {
    const int64_t need = std::max<int64_t>({plan.max_context_len(), int64_t(plan.max_blocks_per_seq) * block_size, 512});
    const int ctx = int(next_pow2((need + block_size - 1) / block_size) * block_size);
    std::vector<const void*> kv_addresses;  // graphs hold every layer's cache address: a new cache, new graphs
    for (const KvLayer& l : kv) kv_addresses.insert(kv_addresses.end(), {l.k.data, l.v.data});
    if (kv_addresses != graph_kv_) {
      backend_.clear_graphs();
      graph_kv_ = std::move(kv_addresses);
    }
    BatchPlan padded = pad_decode_plan(plan, bucket, ctx, block_size, pool_blocks - 1);
    ensure_workspace(bucket, bucket);
    DeviceBatch b = backend_.prepare_batch(padded);
    const uint64_t key = (uint64_t(bucket) << 32) | uint64_t(ctx);
    backend_.run_graph(key, [&] { run_step(b, bucket, bucket, kv); });
    return rows(ws_.logits, R);
  }
  ensure_workspace(T, R);
  DeviceBatch b = backend_.prepare_batch(plan);
  run_step(b, T, R, kv);
  return R == 0 ? Tensor::empty_host(DType::F32, {0, c.vocab_size}) : rows(ws_.logits, R);
}

Tensor LlamaModel::forward(const BatchPlan& plan, std::vector<KvLayer>& kv) {
  Tensor logits = forward_device(plan, kv);
  if (logits.numel() == 0) return logits;
  // A copy: the workspace is overwritten by the next step (and a host backend may return it as is).
  Tensor host = logits.device == Device::CPU ? convert_host(logits, DType::F32) : backend_.to_host_f32(logits);
  backend_.synchronize();
  return host;
}

}  // namespace llmctl
