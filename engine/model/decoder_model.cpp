#include "engine/model/decoder_model.h"

#include <algorithm>

#include "engine/core/error.h"
#include "engine/model/layers/rope.h"
#include "engine/model/registry.h"

namespace llmctl {

DecoderModel::DecoderModel(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype,
                           const ParallelContext& par, const std::vector<WeightSource>& sources, float norm_offset)
    : config_(ckpt.config), backend_(backend), par_(par) {
  LLM_CHECK(par_.comm ? par_.comm->world() == par_.world && par_.comm->rank() == par_.rank : par_.world == 1)
      << "tensor parallel rank " << par_.rank << " of " << par_.world << " without its communicator";
  LLM_CHECK(par_.stages == 1 || (par_.pp_comm && par_.pp_comm->world() == par_.world * par_.stages &&
                                 par_.pp_comm->rank() == par_.rank_in_stage(par_.stage)))
      << "pipeline stage " << par_.stage << " of " << par_.stages << " without its communicator";
  config_.validate();
  w_ = load_decoder_weights(ckpt, backend_, weight_dtype, par_, sources, norm_offset);
  rope_ = make_rope_params(config_);
  if (config_.sliding_rope_theta > 0) {  // the sliding layers' own base, plain rope
    ModelConfig local = config_;
    local.rope_theta = config_.sliding_rope_theta;
    local.rope_scaling = RopeScaling{};
    sliding_rope_ = make_rope_params(local);
  }
}

std::vector<WeightSpec> DecoderModel::weight_specs() const { return model_tensor_specs(config_); }

const RopeParams& DecoderModel::rope_of(int layer) const {
  return config_.sliding_rope_theta > 0 && config_.layer_window(layer) > 0 ? sliding_rope_ : rope_;
}

// This rank's widths (tensor parallel: its heads, its intermediate features, its vocab shard).
ActivationWidths DecoderModel::activation_widths() const {
  const ModelConfig& c = config_;
  const int64_t world = par_.world;
  ActivationWidths w;
  w.hidden = c.hidden_size;
  w.qkv = int64_t(c.num_heads / world + 2 * num_kv_heads()) * c.head_dim;
  w.attn = int64_t(c.num_heads / world) * c.head_dim;
  // The widest MLP a layer runs: the dense one, an expert, the shared expert.
  int64_t I = 0;
  for (int l = 0; l < c.num_layers; ++l) I = std::max<int64_t>(I, c.layer_is_moe(l) ? c.moe_intermediate_size : c.intermediate_size);
  I = std::max<int64_t>(I, c.shared_expert_intermediate_size);
  w.gate_up = 2 * I / world;
  w.act = I / world;
  w.experts = c.num_experts;
  w.expert_slots = c.num_experts > 0 ? c.experts_per_token : 0;
  w.expert_gate_up = 2 * int64_t(c.moe_intermediate_size) / world;
  w.vocab = c.vocab_size;
  w.vocab_local = par_.comm ? c.vocab_size / world : 0;  // logits gathered through the communicator
  return w;
}

// Embedding -> the family's layers -> final norm -> lm_head. The residual stream stays f32. Tensor parallel: the
// embedding rows of other ranks' vocab come in by an all-reduce, so do the row-parallel o and
// down outputs; the lm_head's logits shards are gathered into full rows on every rank. Pipeline
// parallel: a stage after the first starts from the previous stage's (hidden, residual), a stage
// before the last hands its own on; the last stage's logits go to rank 0.
void DecoderModel::forward(const AttentionPlan& plan, StepBuffers& buf, std::vector<KvLayer>& kv) {
  const int64_t T = plan.tokens, R = plan.rows;
  Backend& be = backend_;
  Tensor hidden = first_rows(buf.hidden, T), residual = first_rows(buf.residual, T);
  Tensor normed = first_rows(buf.normed, T), qkv = first_rows(buf.qkv, T), attn = first_rows(buf.attn, T);
  Tensor gate_up = first_rows(buf.gate_up, T), act = first_rows(buf.act, T);
  if (par_.first_stage()) {
    be.embed(w_.embed, *plan.batch, residual, w_.vocab_begin);
    all_reduce(residual);
    after_embed(residual);
  } else {
    recv(hidden, par_.stage - 1);
    recv(residual, par_.stage - 1);
  }
  auto rows_of = [&](const Tensor& t) { return t.empty() ? t : first_rows(t, T); };
  LayerBuffers lb{hidden, residual, normed, qkv, attn, gate_up, act,
                  rows_of(buf.router), rows_of(buf.expert_in), rows_of(buf.expert_out),
                  rows_of(buf.expert_gate_up), rows_of(buf.expert_act)};
  run_layers(plan, lb, kv);
  if (!par_.last_stage()) {
    send(hidden, par_.stage + 1);
    send(residual, par_.stage + 1);
    return;
  }
  w_.final_norm(be, hidden, normed, &residual);
  if (R == 0) return;
  Tensor last = first_rows(buf.last, R), logits = first_rows(buf.logits, R);
  be.gather_rows(normed, *plan.batch, last);
  if (!par_.comm) {
    be.linear(last, w_.lm_head, nullptr, logits);
  } else {
    Tensor shard = first_rows(buf.logits_local, R);
    be.linear(last, w_.lm_head, nullptr, shard);
    par_.comm->all_gather_cols(shard, logits);
  }
  if (config_.final_logit_softcapping > 0) be.soft_cap(logits, config_.final_logit_softcapping);
}

void DecoderModel::run_mlp(const DecoderWeights::Layer& L, const Tensor& x, LayerBuffers& b, Tensor& out) {
  if (L.moe.empty()) {
    L.mlp.run(backend_, x, b.gate_up, b.act, out);
    return;
  }
  MoeBlock::Scratch scratch{b.router, b.expert_in, b.expert_out, b.expert_gate_up, b.expert_act, b.gate_up, b.act};
  L.moe.run(backend_, x, scratch, out);
}

// rank 0 samples: the last stage's logits come back to it (one message a step, after every
// micro-batch, so no stage waits on rank 0 while it still feeds the pipeline).
void DecoderModel::collect_logits(Tensor& logits) {
  if (par_.stages == 1 || par_.rank != 0 || logits.numel() == 0) return;
  if (par_.last_stage())
    send_to(logits, 0);
  else if (par_.first_stage())
    recv_from(logits, last_stage_rank());
}
int64_t DecoderModel::post_collect_logits(Tensor& logits) {
  if (par_.stages == 1 || par_.rank != 0 || logits.numel() == 0 || !par_.first_stage() || par_.last_stage()) {
    collect_logits(logits);
    return -1;
  }
  LLM_CHECK(logits.device == Device::CPU) << "post_collect_logits into a device tensor";
  return par_.pp_comm->irecv(logits.data, logits.nbytes(), last_stage_rank());
}
void DecoderModel::finish_collect_logits(int64_t handle) {
  if (handle >= 0) par_.pp_comm->wait(handle);
}

void DecoderModel::run_linears(StepBuffers& buf, int64_t T, int64_t R) {
  if (w_.layers.empty()) return;
  if (!par_.last_stage()) R = 0;  // no lm_head here
  const DecoderWeights::Layer& L = w_.layers[0];  // every layer has the same shapes
  Tensor qkv = first_rows(buf.qkv, T), hidden = first_rows(buf.hidden, T), gate_up = first_rows(buf.gate_up, T);
  L.attention.run_linears(backend_, first_rows(buf.normed, T), qkv, first_rows(buf.attn, T), hidden);
  L.mlp.run_linears(backend_, first_rows(buf.normed, T), gate_up, first_rows(buf.act, T), hidden);
  if (R > 0) {
    Tensor logits = first_rows(par_.comm ? buf.logits_local : buf.logits, R);
    backend_.linear(first_rows(buf.last, R), w_.lm_head, nullptr, logits);
  }
}

// Stages talk through pp_comm in host memory: a device tensor (CUDA ranks) goes through a host
// staging buffer, both ways (a few hundred KB a step; graphs are off under pipeline parallel).
void DecoderModel::send_to(const Tensor& x, int peer) {
  if (x.device == Device::CPU) return par_.pp_comm->send(x.data, x.nbytes(), peer);
  staging_.resize(x.nbytes());
  backend_.copy_to_host(x, staging_.data());
  par_.pp_comm->send(staging_.data(), staging_.size(), peer);
}
void DecoderModel::recv_from(Tensor& x, int peer) {
  if (x.device == Device::CPU) return par_.pp_comm->recv(x.data, x.nbytes(), peer);
  staging_.resize(x.nbytes());
  par_.pp_comm->recv(staging_.data(), staging_.size(), peer);
  backend_.copy_from_host(staging_.data(), x);
}

}  // namespace llmctl
