#include "quant/algo/calibration_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/core/error.h"
#include "engine/model/layers/rope.h"

namespace llmctl::quant {

namespace {

Tensor f32_copy(const Tensor& t) {
  Tensor out = Tensor::empty_host(DType::F32, t.shape);
  if (t.dtype == DType::F32)
    std::memcpy(out.data, t.data, t.nbytes());
  else
    out = convert_host(t, DType::F32);
  return out;
}

// Rows [r0, r1) of an f32 t [N, K].
Tensor rows_of(const Tensor& t, int64_t r0, int64_t r1) {
  LLM_REQUIRE(t.rank() == 2 && r0 >= 0 && r0 <= r1 && r1 <= t.dim(0)) << "rows " << r0 << ".." << r1 << " of "
                                                                      << t.shape_str();
  Tensor out = Tensor::empty_host(DType::F32, {r1 - r0, t.dim(1)});
  std::memcpy(out.data, t.ptr<float>() + r0 * t.dim(1), out.nbytes());
  return out;
}

}  // namespace

Tensor stack_rows(const std::vector<const Tensor*>& parts) {
  int64_t rows = 0;
  for (const Tensor* p : parts) rows += p->dim(0);
  std::vector<int64_t> shape = parts[0]->shape;
  shape[0] = rows;
  Tensor out = Tensor::empty_host(DType::F32, shape);
  char* dst = static_cast<char*>(out.data);
  for (const Tensor* p : parts) {
    std::memcpy(dst, p->data, p->nbytes());
    dst += p->nbytes();
  }
  return out;
}

DenseLayer DenseLayer::from_checkpoint(const Checkpoint& ck, int layer) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  const ModelConfig& c = ck.config;
  DenseLayer L;
  L.input_norm = f32_copy(ck.get(p + "input_layernorm.weight"));
  L.post_norm = f32_copy(ck.get(p + "post_attention_layernorm.weight"));
  L.fused = ck.has(p + "self_attn.qkv_proj.weight");
  if (L.fused) {  // Phi-3: q, k, v rows in one tensor, gate then up rows in another
    LLM_REQUIRE(!ck.has(p + "self_attn.qkv_proj.bias")) << c.architecture << ": a fused qkv_proj bias is not supported";
    const Tensor qkv = f32_copy(ck.get(p + "self_attn.qkv_proj.weight"));  // converted once, then split
    const int64_t q = int64_t(c.num_heads) * c.head_dim, kv = int64_t(c.num_kv_heads) * c.head_dim;
    L.q = rows_of(qkv, 0, q), L.k = rows_of(qkv, q, q + kv), L.v = rows_of(qkv, q + kv, q + 2 * kv);
    const Tensor gate_up = f32_copy(ck.get(p + "mlp.gate_up_proj.weight"));
    L.gate = rows_of(gate_up, 0, c.intermediate_size);
    L.up = rows_of(gate_up, c.intermediate_size, 2 * int64_t(c.intermediate_size));
  } else {
    L.q = f32_copy(ck.get(p + "self_attn.q_proj.weight"));
    L.k = f32_copy(ck.get(p + "self_attn.k_proj.weight"));
    L.v = f32_copy(ck.get(p + "self_attn.v_proj.weight"));
    L.gate = f32_copy(ck.get(p + "mlp.gate_proj.weight"));
    L.up = f32_copy(ck.get(p + "mlp.up_proj.weight"));
  }
  L.o = f32_copy(ck.get(p + "self_attn.o_proj.weight"));
  L.down = f32_copy(ck.get(p + "mlp.down_proj.weight"));
  if (ck.has(p + "self_attn.q_proj.bias")) {
    L.q_bias = f32_copy(ck.get(p + "self_attn.q_proj.bias"));
    L.k_bias = f32_copy(ck.get(p + "self_attn.k_proj.bias"));
    L.v_bias = f32_copy(ck.get(p + "self_attn.v_proj.bias"));
  }
  L.window = ck.config.layer_window(layer);
  return L;
}

BatchPlan calibration_plan(const std::vector<std::vector<int32_t>>& samples, int vocab_size, int block_size,
                           int* num_blocks) {
  LLM_REQUIRE(!samples.empty()) << "no calibration samples";
  const int64_t L = int64_t(samples[0].size());
  const int B = block_size, blocks_per_seq = int((L + B - 1) / B);
  BatchPlan plan;
  plan.max_blocks_per_seq = blocks_per_seq;
  for (size_t s = 0; s < samples.size(); ++s) {
    LLM_REQUIRE(int64_t(samples[s].size()) == L) << "calibration samples differ in length";
    for (int64_t i = 0; i < L; ++i) {
      LLM_REQUIRE(samples[s][size_t(i)] >= 0 && samples[s][size_t(i)] < vocab_size)
          << "calibration token id " << samples[s][size_t(i)] << " outside the vocabulary";
      plan.token_ids.push_back(samples[s][size_t(i)]);
      plan.positions.push_back(int32_t(i));
      plan.slot_mapping.push_back(int32_t(s * blocks_per_seq * B + i));
    }
    plan.query_start.push_back(int32_t((s + 1) * L));
    plan.context_len.push_back(int32_t(L));
    for (int b = 0; b < blocks_per_seq; ++b) plan.block_table.push_back(int32_t(s * blocks_per_seq + b));
  }
  *num_blocks = int(samples.size()) * blocks_per_seq;
  plan.validate(B, *num_blocks);
  return plan;
}

CalibrationForward::CalibrationForward(Backend& be, const ModelConfig& c,
                                       const std::vector<std::vector<int32_t>>& samples, int64_t chunk_rows)
    : be_(be), c_(c), chunk_rows_(chunk_rows) {
  LLM_REQUIRE(chunk_rows > 0) << "chunk rows must be positive";
  LLM_REQUIRE(be.device() == Device::CPU) << "calibration runs on the CPU backend";
  // This forward is the Llama layer rebuilt from backend ops (AWQ searches its sub-blocks); a family
  // part it lacks would make every scale wrong, so it is refused by name.
  LLM_REQUIRE(!c.qk_norm) << c.architecture << ": AWQ does not run q/k head norms yet; "
                          << "quantize it with --method gptq or rtn";
  LLM_REQUIRE(c.hidden_act == "silu" && c.attn_logit_softcapping == 0 && c.final_logit_softcapping == 0)
      << c.architecture << ": AWQ does not run Gemma's layer (GeGLU, sandwich norms, soft-capping) yet; "
      << "quantize it with --method gptq or rtn";
  int num_blocks = 0;
  plan_ = calibration_plan(samples, c.vocab_size, kCalibrationBlockSize, &num_blocks);
  seq_len_ = int64_t(samples[0].size());
  tokens_ = int64_t(plan_.token_ids.size());
  const int B = kCalibrationBlockSize;
  batch_ = be_.prepare_batch(plan_);
  kv_.k = be_.alloc(DType::F32, {num_blocks, B, c.num_kv_heads, c.head_dim});
  kv_.v = be_.alloc(DType::F32, {num_blocks, B, c.num_kv_heads, c.head_dim});
  rope_ = make_rope_params(c);
  qkv_ = alloc(int64_t(c.num_heads + 2 * c.num_kv_heads) * c.head_dim);
  gate_up_ = Tensor::empty_host(DType::F32, {std::min(chunk_rows_, tokens_), 2 * int64_t(c.intermediate_size)});
}

Tensor CalibrationForward::alloc(int64_t cols) const { return Tensor::empty_host(DType::F32, {tokens_, cols}); }

Tensor CalibrationForward::embed(const Tensor& table) {
  Tensor out = alloc(c_.hidden_size);
  be_.embed(table, batch_, out, 0);
  return out;
}

void CalibrationForward::norm(const Tensor& x, const Tensor& w, Tensor& out) {
  be_.rms_norm(x, w, c_.rms_norm_eps, out, nullptr);
}

void CalibrationForward::linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out) {
  be_.linear(x, w, bias, out);
}

void CalibrationForward::attention(const DenseLayer& L, const Tensor& attn_in, Tensor& o_in, KvAbsMax* amax) {
  qkv_w_ = stack_rows({&L.q, &L.k, &L.v});
  qkv_b_ = L.q_bias.empty() ? Tensor{} : stack_rows({&L.q_bias, &L.k_bias, &L.v_bias});
  be_.linear(attn_in, qkv_w_, qkv_b_.empty() ? nullptr : &qkv_b_, qkv_);
  be_.rope_write_kv(qkv_, batch_, rope_, c_.num_heads, c_.num_kv_heads, kv_);
  be_.attention(qkv_, kv_, batch_, c_.num_heads, c_.num_kv_heads, c_.softmax_scale(), o_in,
                L.window);
  if (amax) {
    const int64_t D = c_.head_dim, Hq = c_.num_heads, Hkv = c_.num_kv_heads, W = (Hq + 2 * Hkv) * D;
    amax->k.assign(size_t(Hkv), 0.0f);
    amax->v.assign(size_t(Hkv), 0.0f);
    const float* p = qkv_.ptr<float>();
    for (int64_t t = 0; t < tokens_; ++t)
      for (int64_t h = 0; h < Hkv; ++h)
        for (int64_t d = 0; d < D; ++d) {
          amax->k[size_t(h)] = std::max(amax->k[size_t(h)], std::fabs(p[t * W + (Hq + h) * D + d]));
          amax->v[size_t(h)] = std::max(amax->v[size_t(h)], std::fabs(p[t * W + (Hq + Hkv + h) * D + d]));
        }
  }
}

void CalibrationForward::gated_act(const DenseLayer& L, const Tensor& mlp_in, Tensor& down_in) {
  // In chunks of rows: the [rows, 2I] gate/up scratch is the largest activation of the layer.
  Tensor gate_up_w = stack_rows({&L.gate, &L.up});
  const int64_t H = mlp_in.dim(1), I = down_in.dim(1);
  for (int64_t r0 = 0; r0 < tokens_; r0 += chunk_rows_) {
    const int64_t rows = std::min(chunk_rows_, tokens_ - r0);
    Tensor in = Tensor::view(const_cast<float*>(mlp_in.ptr<float>()) + r0 * H, DType::F32, {rows, H});
    Tensor gu = Tensor::view(gate_up_.data, DType::F32, {rows, 2 * I});
    Tensor out = Tensor::view(down_in.ptr<float>() + r0 * I, DType::F32, {rows, I});
    be_.linear(in, gate_up_w, nullptr, gu);
    be_.silu_mul(gu, out);
  }
}

CalibrationForward::LayerInputs CalibrationForward::layer(const DenseLayer& L, Tensor& x, KvAbsMax* amax) {
  const int64_t H = c_.hidden_size;
  LayerInputs in{alloc(H), alloc(int64_t(c_.num_heads) * c_.head_dim), alloc(H), alloc(c_.intermediate_size)};
  Tensor out = alloc(H);
  norm(x, L.input_norm, in.attn_in);
  attention(L, in.attn_in, in.o_in, amax);
  linear(in.o_in, L.o, nullptr, out);
  add(x, out);
  norm(x, L.post_norm, in.mlp_in);
  gated_act(L, in.mlp_in, in.down_in);
  linear(in.down_in, L.down, nullptr, out);
  add(x, out);
  return in;
}

void CalibrationForward::add(Tensor& a, const Tensor& b) {
  LLM_CHECK(a.numel() == b.numel()) << "add: sizes differ";
  float* x = a.ptr<float>();
  const float* y = b.ptr<float>();
  for (int64_t i = 0; i < a.numel(); ++i) x[i] += y[i];
}

}  // namespace llmctl::quant
