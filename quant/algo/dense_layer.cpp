#include "quant/algo/dense_layer.h"

#include <cstring>
#include <map>
#include <string>

#include "engine/core/error.h"
#include "engine/model/registry.h"

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

// The experts of mixture-of-experts layer `layer`, from the family's name map.
std::vector<ExpertMlp> read_experts(const Checkpoint& ck, const Architecture& arch, int layer,
                                    const std::vector<WeightSource>* sources) {
  std::vector<WeightSource> made;
  if (!sources) {
    LLM_REQUIRE(arch.weight_sources) << arch.name << ": layer " << layer
                                     << " is a mixture of experts, but the family lists no expert weights for quantize";
    made = arch.weight_sources(ck.config);
    sources = &made;
  }
  std::map<int, ExpertMlp> by_expert;  // kSharedExpert sorts first; moved last below
  for (const WeightSource& s : *sources) {
    if (s.layer != layer) continue;
    const bool shared = s.role == WeightRole::SharedGateUp || s.role == WeightRole::SharedDown;
    if (s.role == WeightRole::ExpertGateUp || s.role == WeightRole::SharedGateUp) {
      LLM_CHECK(s.parts.size() == 2) << s.name << ": an expert's gate/up from " << s.parts.size() << " tensors";
      ExpertMlp& m = by_expert[shared ? kSharedExpert : s.expert];
      m.gate = f32_copy(ck.get(s.parts[0]));
      m.up = f32_copy(ck.get(s.parts[1]));
      m.gate_module = module_of(s.parts[0]);
      m.up_module = module_of(s.parts[1]);
    } else if (s.role == WeightRole::ExpertDown || s.role == WeightRole::SharedDown) {
      LLM_CHECK(s.parts.size() == 1) << s.name << ": an expert's down from " << s.parts.size() << " tensors";
      ExpertMlp& m = by_expert[shared ? kSharedExpert : s.expert];
      m.down = f32_copy(ck.get(s.parts[0]));
      m.down_module = module_of(s.parts[0]);
    }
  }
  std::vector<ExpertMlp> out;
  for (auto& [e, m] : by_expert) {
    LLM_CHECK(!m.gate.empty() && !m.down.empty()) << arch.name << ": layer " << layer << " expert " << e
                                                  << " lacks its gate/up or down weight";
    m.expert = e;
    if (e != kSharedExpert) out.push_back(std::move(m));
  }
  if (auto it = by_expert.find(kSharedExpert); it != by_expert.end()) out.push_back(std::move(it->second));
  LLM_CHECK(!out.empty()) << arch.name << ": layer " << layer << " is a mixture of experts without experts";
  return out;
}

}  // namespace

std::string module_of(const std::string& tensor) {
  return tensor.ends_with(".weight") ? tensor.substr(0, tensor.size() - 7) : tensor;
}

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

DenseLayer DenseLayer::from_checkpoint(const Checkpoint& ck, int layer, const std::vector<WeightSource>* sources) {
  const std::string p = "model.layers." + std::to_string(layer) + ".";
  const ModelConfig& c = ck.config;
  DenseLayer L;
  L.input_norm = f32_copy(ck.get(p + "input_layernorm.weight"));
  const Architecture& arch = find_architecture(c.architecture);
  L.mlp_norm_name = arch.mlp_input_norm;
  L.norm_offset = arch.norm_offset;
  L.mlp_norm = f32_copy(ck.get(p + L.mlp_norm_name + ".weight"));
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
    if (!c.layer_is_moe(layer)) {
      L.gate = f32_copy(ck.get(p + "mlp.gate_proj.weight"));
      L.up = f32_copy(ck.get(p + "mlp.up_proj.weight"));
    }
  }
  L.o = f32_copy(ck.get(p + "self_attn.o_proj.weight"));
  if (c.layer_is_moe(layer))
    L.experts = read_experts(ck, arch, layer, sources);
  else
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

}  // namespace llmctl::quant
