// DecoderModel: the decoder every family here shares (embedding -> layers -> final norm -> lm_head),
// with tensor parallelism (Megatron splits, all-reduces, vocab-parallel lm_head) and pipeline
// stages. A family (engine/model/<family>/) gives its name map and writes its layer composition
// (run_layers); everything else lives here once.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/model/checkpoint.h"
#include "engine/model/model.h"
#include "engine/model/weights/decoder_weights.h"
#include "engine/parallel/parallel_context.h"

namespace llmctl {

class DecoderModel : public Model {
 public:
  // Loads the weights the name map `sources` lists (load_decoder_weights; norm weights plus
  // norm_offset) and the rope of the config.
  DecoderModel(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype, const ParallelContext& par,
               const std::vector<WeightSource>& sources, float norm_offset = 0.0f);

  const ModelConfig& config() const override { return config_; }
  Backend& backend() const override { return backend_; }
  DType weight_dtype() const override { return w_.weight_dtype; }
  std::vector<WeightSpec> weight_specs() const override;
  std::vector<KvScales> kv_scales() const override { return w_.kv_scales; }
  int kv_heads() const override { return num_kv_heads(); }
  int num_local_layers() const override { return int(w_.layers.size()); }
  int local_layer_window(int i) const override { return config_.layer_window(w_.layer_begin + i); }
  ActivationWidths activation_widths() const override;
  void forward(const AttentionPlan& plan, StepBuffers& buf, std::vector<KvLayer>& kv) override;
  int pipeline_stages() const override { return par_.stages; }
  bool syncs_in_forward() const override { return config_.num_experts > 0; }
  void collect_logits(Tensor& logits) override;
  int64_t post_collect_logits(Tensor& logits) override;
  void finish_collect_logits(int64_t handle) override;
  void run_linears(StepBuffers& buf, int64_t T, int64_t R) override;
  // This stage's weights as loaded (quantize's calibration finds each layer's linears here).
  const DecoderWeights& weights() const { return w_; }

 protected:
  // The step's buffers as the layers use them ([T, ...] views).
  struct LayerBuffers {
    Tensor hidden, residual, normed, qkv, attn, gate_up, act;
    Tensor router, expert_in, expert_out, expert_gate_up, expert_act;  // mixture-of-experts models only
  };
  // This stage's layers. On entry the stream is residual (the first stage: the embeddings) or
  // residual + hidden (a later stage); on return it must be residual + hidden (the final norm adds
  // them). Tensor parallel: call all_reduce on the row-parallel outputs (o, down).
  virtual void run_layers(const AttentionPlan& plan, LayerBuffers& b, std::vector<KvLayer>& kv) = 0;
  // After the embedding lookup (and its all-reduce), on the first stage. Default: nothing.
  virtual void after_embed(Tensor& residual) { (void)residual; }

  // A layer's MLP on x into out: its dense one, or its mixture of experts.
  void run_mlp(const DecoderWeights::Layer& L, const Tensor& x, LayerBuffers& b, Tensor& out);
  // Whether layer i of this stage is the model's first (its input is the embeddings alone).
  bool first_layer(size_t i) const { return w_.layer_begin + i == 0; }
  // Through the communicator whenever there is one (at world 1 only to check the NCCL path).
  void all_reduce(Tensor& x) {
    if (par_.comm) par_.comm->all_reduce_sum(x);
  }
  // The rope of a layer: the config's, or its sliding layers' own base (Gemma 3).
  const RopeParams& rope_of(int layer) const;

  ModelConfig config_;
  Backend& backend_;
  ParallelContext par_;
  DecoderWeights w_;

 private:
  // The pipeline communicator's rank of the last stage's tensor-parallel rank 0 (ranks are
  // numbered stage-major).
  int last_stage_rank() const { return par_.pp_comm->world() - par_.world; }
  int num_kv_heads() const {
    return config_.num_kv_heads >= par_.world ? config_.num_kv_heads / par_.world : 1;
  }
  // A step's activations to / from the same tensor-parallel rank of another pipeline stage.
  void send(const Tensor& x, int stage) { send_to(x, par_.rank_in_stage(stage)); }
  void recv(Tensor& x, int stage) { recv_from(x, par_.rank_in_stage(stage)); }
  void send_to(const Tensor& x, int peer);
  void recv_from(Tensor& x, int peer);

  RopeParams rope_, sliding_rope_;
  std::vector<uint8_t> staging_;  // host bytes of a device tensor on its way between stages
};

}  // namespace llmctl
