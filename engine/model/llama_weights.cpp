// Weight loading of the Llama family, in one function (load_llama_weights): the staged loader
// (name map -> shard -> pack -> upload) replaces its body.
#include <cstring>
#include <string>

#include "engine/core/error.h"
#include "engine/model/llama.h"
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

LlamaWeights load_llama_weights(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype) {
  const ModelConfig& c = ckpt.config;
  check_llama_tensors(ckpt);  // every shape against the config before a kernel reads a weight
  LlamaWeights w;
  const Tensor& embed_host = ckpt.get("model.embed_tokens.weight");
  w.weight_dtype = weight_dtype.value_or(embed_host.dtype);
  auto up = [&](const Tensor& t) { return backend.upload(t, w.weight_dtype); };
  auto up_f32 = [&](const Tensor& t) { return backend.upload(t, DType::F32); };  // norms, biases
  auto norm = [&](const std::string& name) { return RmsNorm{up_f32(ckpt.get(name)), c.rms_norm_eps}; };

  LLM_REQUIRE(embed_host.rank() == 2 && embed_host.dim(0) == c.vocab_size && embed_host.dim(1) == c.hidden_size)
      << "model.embed_tokens.weight has shape " << embed_host.shape_str() << ", expected [" << c.vocab_size << ", "
      << c.hidden_size << "]";
  w.embed = up(embed_host);
  w.final_norm = norm("model.norm.weight");
  w.lm_head = (c.tie_word_embeddings || !ckpt.has("lm_head.weight")) ? w.embed : up(ckpt.get("lm_head.weight"));

  const int64_t qkv_rows = int64_t(c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  for (int i = 0; i < c.num_layers; ++i) {
    LlamaWeights::Layer L;
    L.input_norm = norm(layer_name(i, "input_layernorm.weight"));
    L.post_norm = norm(layer_name(i, "post_attention_layernorm.weight"));
    const Tensor& q = ckpt.get(layer_name(i, "self_attn.q_proj.weight"));
    const Tensor& k = ckpt.get(layer_name(i, "self_attn.k_proj.weight"));
    const Tensor& v = ckpt.get(layer_name(i, "self_attn.v_proj.weight"));
    Tensor qkv = concat_rows({&q, &k, &v});
    LLM_REQUIRE(qkv.dim(0) == qkv_rows && qkv.dim(1) == c.hidden_size)
        << "layer " << i << ": q/k/v projections do not match the config (fused shape " << qkv.shape_str() << ")";
    L.attention.qkv = up(qkv);
    if (c.attention_bias) {
      Tensor qb = convert_host(ckpt.get(layer_name(i, "self_attn.q_proj.bias")), DType::F32);
      Tensor kb = convert_host(ckpt.get(layer_name(i, "self_attn.k_proj.bias")), DType::F32);
      Tensor vb = convert_host(ckpt.get(layer_name(i, "self_attn.v_proj.bias")), DType::F32);
      L.attention.qkv_bias = up_f32(concat_rows({&qb, &kb, &vb}));
    }
    L.attention.o_proj = up(ckpt.get(layer_name(i, "self_attn.o_proj.weight")));
    L.attention.num_q_heads = c.num_heads;
    L.attention.num_kv_heads = c.num_kv_heads;
    const Tensor& g = ckpt.get(layer_name(i, "mlp.gate_proj.weight"));
    const Tensor& u = ckpt.get(layer_name(i, "mlp.up_proj.weight"));
    L.mlp.gate_up = up(concat_rows({&g, &u}));
    LLM_REQUIRE(L.mlp.gate_up.dim(0) == 2 * int64_t(c.intermediate_size)) << "layer " << i << ": mlp shape mismatch";
    L.mlp.down = up(ckpt.get(layer_name(i, "mlp.down_proj.weight")));
    w.layers.push_back(std::move(L));
  }
  return w;
}

}  // namespace llmctl
