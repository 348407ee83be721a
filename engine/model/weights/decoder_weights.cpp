// Weight loading of a decoder through the staged loader (engine/model/weights/): the family's name
// map -> shard (megatron_shard: this rank's share under tensor parallelism, everything on a single
// rank) -> pack -> upload. Linears become LinearWeights in the weight dtype, or quantized ones where
// the checkpoint kept them quantized and the backend runs them; the embedding is a table in the
// weight dtype; norms and the qkv bias are f32.
#include "engine/model/weights/decoder_weights.h"

#include <iostream>
#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/model/check_tensors.h"
#include "engine/model/weights/load_weights.h"
#include "engine/model/weights/megatron_split.h"

namespace llmctl {

namespace {

// The kv heads rank `rank` of `world` holds: its share, or (fewer heads than ranks) one replica.
std::vector<int> local_kv_heads(int heads, int rank, int world) {
  std::vector<int> h;
  if (heads >= world)
    for (int i = rank * heads / world; i < (rank + 1) * heads / world; ++i) h.push_back(i);
  else
    h.push_back(rank * heads / world);
  return h;
}

}  // namespace

DecoderWeights load_decoder_weights(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                                    const ParallelContext& par, const std::vector<WeightSource>& sources,
                                    float norm_offset) {
  const ModelConfig& c = ckpt.config;
  check_checkpoint_tensors(ckpt);  // every shape against the config before a kernel reads a weight
  const int kRank = par.rank, kWorld = par.world;
  check_tensor_parallel(c, kWorld);  // sizes that do not divide, refused before any weight is read
  check_pipeline_parallel(c, par.stages);
  const int first = par.layer_begin(c.num_layers), last = par.layer_end(c.num_layers);
  DecoderWeights w;
  w.layer_begin = first;
  const char* kEmbed = "model.embed_tokens.weight";  // absent when kept only packed (quantized_embedding)
  w.weight_dtype = weight_dtype.value_or(ckpt.has(kEmbed) ? ckpt.get(kEmbed).dtype : DType::F32);
  w.vocab_begin = int64_t(c.vocab_size) / kWorld * kRank;
  const std::vector<int> kv_heads = local_kv_heads(c.num_kv_heads, kRank, kWorld);
  w.layers.resize(size_t(last - first));  // this pipeline stage's
  for (size_t i = 0; i < w.layers.size(); ++i) {
    AttentionBlock& a = w.layers[i].attention;
    a.num_q_heads = c.num_heads / kWorld;
    a.num_kv_heads = int(kv_heads.size());
    a.window = c.layer_window(first + int(i));
    a.softcap = c.attn_logit_softcapping;
    w.layers[i].mlp.gelu_tanh = c.hidden_act == "gelu_pytorch_tanh";
    if (c.layer_is_moe(first + int(i))) {
      MoeBlock& m = w.layers[i].moe;
      m.experts.resize(size_t(c.num_experts));
      m.top_k = c.experts_per_token;
      m.renormalize = c.moe_renormalize;
    }
  }
  bool have_embed = false;
  // A tied table the checkpoint also keeps quantized as the lm_head: embed_is_lm_head when the
  // embedding lookup reads that same packed copy. Only a GGUF's copy is the table itself (decoded
  // from token_embd); an HF checkpoint's quantized lm_head is an approximation of its table.
  const bool tied_quantized = c.tie_word_embeddings && ckpt.quantized.count("lm_head.weight");
  const bool table_is_lm_head = tied_quantized && ckpt.source_format == "gguf";
  bool embed_is_lm_head = false;
  auto quantized_lm_head = [](const WeightSource& s) {
    return WeightSource{s.name, WeightRole::LmHead, s.layer, {"lm_head.weight"}, false};
  };
  std::vector<std::string> dense_fallbacks;  // quantized weights loaded dense, "<name>: <why>"
  for (const WeightSource& s : sources) {
    // Pipeline parallel: the first stage embeds, the last one normalizes and projects (and needs
    // the embedding too when the lm_head is tied to it); each holds its own layers.
    const bool mine = s.layer >= 0 ? s.layer >= first && s.layer < last
                      : s.role == WeightRole::Embed
                          ? par.first_stage() || (par.last_stage() && c.tie_word_embeddings)
                          : par.last_stage();  // lm_head, final norm
    if (!mine) continue;
    const ShardSpec spec = megatron_shard(s.role, c, kRank, kWorld);
    auto linear = [&] { return load_linear(ckpt, s, spec, w.weight_dtype, backend, &dense_fallbacks); };
    auto f32 = [&] { return load_tensor(ckpt, s, spec, DType::F32, backend); };
    auto norm_weight = [&] {  // (1 + w) for Gemma, added in f32 as transformers does
      Tensor t = f32();
      if (norm_offset == 0.0f) return t;
      // A copy: the CPU backend's f32 tensor may be the checkpoint's own (read-only) mapping.
      const Tensor stored = backend.to_host_f32(t);
      Tensor host = Tensor::empty_host(DType::F32, stored.shape);
      for (int64_t i = 0; i < host.numel(); ++i) host.ptr<float>()[i] = stored.ptr<float>()[i] + norm_offset;
      return backend.upload(host, DType::F32);
    };
    DecoderWeights::Layer* L = s.layer >= 0 ? &w.layers.at(size_t(s.layer - first)) : nullptr;
    switch (s.role) {
      case WeightRole::Embed:
        if (table_is_lm_head && backend.caps().quantized_embed) {
          // One packed table for both ends: rows dequantized at lookup, the lm_head on the codes;
          // the float table is never uploaded.
          w.embed = load_linear(ckpt, quantized_lm_head(s), spec, w.weight_dtype, backend, &dense_fallbacks);
          embed_is_lm_head = true;
        } else if (ckpt.quantized.count(kEmbed) && backend.caps().quantized_embed) {
          // an untied table kept packed (a GGUF's block types: whole groups the kernels take), rows
          // dequantized at lookup
          w.embed = load_linear(ckpt, s, spec, w.weight_dtype, backend, &dense_fallbacks);
        } else {
          LLM_REQUIRE(ckpt.has(kEmbed)) << "the checkpoint was loaded without its float embedding table (kept "
                                        << "packed for a backend that looks rows up in it), and backend "
                                        << backend.name() << " does not";
          w.embed = dense_linear(load_tensor(ckpt, s, spec, w.weight_dtype, backend), spec);
        }
        have_embed = true;
        break;
      case WeightRole::LmHead:
        if (s.tied && embed_is_lm_head) {
          w.lm_head = w.embed;
        } else if (s.tied && tied_quantized) {
          // A quantized embedding (GGUF) also kept as a quantized lm_head: the output projection
          // then reads the packed codes, not the f32 table (the largest linear of small models).
          w.lm_head = load_linear(ckpt, quantized_lm_head(s), spec, w.weight_dtype, backend, &dense_fallbacks);
        } else if (s.tied) {  // the embedding's device copy, not a second one
          LLM_CHECK(have_embed) << "the name map lists a tied lm_head before the embedding";
          w.lm_head = w.embed;
        } else {
          w.lm_head = linear();
        }
        break;
      case WeightRole::Norm: {  // "layers.<i>.input_norm" / "post_norm" / "pre_ff_norm" / "post_ff_norm", "final_norm"
        if (L && (s.name.ends_with(".q_norm") || s.name.ends_with(".k_norm"))) {  // [D], the same for every head
          (s.name.ends_with(".q_norm") ? L->attention.q_norm : L->attention.k_norm) = norm_weight();
          L->attention.qk_norm_eps = c.rms_norm_eps;
          break;
        }
        RmsNorm* norm = !L                                  ? &w.final_norm
                        : s.name.ends_with(".input_norm")   ? &L->input_norm
                        : s.name.ends_with(".post_norm")    ? &L->post_norm
                        : s.name.ends_with(".pre_ff_norm")  ? &L->pre_ff_norm
                        : s.name.ends_with(".post_ff_norm") ? &L->post_ff_norm
                                                            : nullptr;
        LLM_CHECK(norm) << "the name map's norm '" << s.name << "' has no place";
        *norm = RmsNorm{norm_weight(), c.rms_norm_eps};
        break;
      }
      case WeightRole::Qkv: L->attention.qkv = linear(); break;
      case WeightRole::QkvBias: L->attention.qkv_bias = f32(); break;
      case WeightRole::O: L->attention.o_proj = linear(); break;
      case WeightRole::GateUp: L->mlp.gate_up = linear(); break;
      case WeightRole::Down: L->mlp.down = linear(); break;
      case WeightRole::Router: L->moe.router = linear(); break;
      case WeightRole::ExpertGateUp: L->moe.experts.at(size_t(s.expert)).gate_up = linear(); break;
      case WeightRole::ExpertDown: L->moe.experts.at(size_t(s.expert)).down = linear(); break;
      case WeightRole::SharedGateUp: L->moe.shared.gate_up = linear(); break;
      case WeightRole::SharedDown: L->moe.shared.down = linear(); break;
      case WeightRole::SharedGate: L->moe.shared_gate = linear(); break;
    }
  }
  w.kv_scales = load_kv_scales(ckpt);
  if (!w.kv_scales.empty())  // this stage's layers only
    w.kv_scales = std::vector<KvScales>(w.kv_scales.begin() + first, w.kv_scales.begin() + last);
  if (kWorld > 1)  // this rank's kv heads only
    for (KvScales& s : w.kv_scales) {
      KvScales mine;
      for (int h : kv_heads) mine.k.push_back(s.k.at(size_t(h))), mine.v.push_back(s.v.at(size_t(h)));
      s = std::move(mine);
    }
  if (!dense_fallbacks.empty() && kRank == 0)  // one note per model, with the first weight's reason
    std::cerr << "llmctl: note: " << dense_fallbacks.size() << " quantized linear weight"
              << (dense_fallbacks.size() > 1 ? "s are" : " is") << " loaded dense (dequantized), e.g. "
              << dense_fallbacks.front() << "\n";
  return w;
}

}  // namespace llmctl
