// The host-side pieces of quantize's calibration: a decoder layer's weights as f32 tensors under their
// HF roles (what the quantizer rounds, scales and writes), the calibration batch as one prefill plan,
// and the per-head maxima fp8 KV scales come from. The forward itself is the family's own
// (family_calibration.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/core/batch_plan.h"
#include "engine/model/checkpoint.h"
#include "engine/model/weights/weight_source.h"

namespace llmctl::quant {

// A mixture-of-experts layer's shared expert (Qwen2-MoE), beside its routed experts 0..E-1.
inline constexpr int kSharedExpert = -2;

// One expert MLP of a mixture-of-experts layer: f32 [N, K] weights and the HF modules they are
// written as ("model.layers.3.mlp.experts.5.gate_proj"; Mixtral's "block_sparse_moe.experts.5.w1").
struct ExpertMlp {
  int expert = 0;  // the routed expert's index, or kSharedExpert
  Tensor gate, up, down;
  std::string gate_module, up_module, down_module;
};

// One decoder layer's weights as f32 host tensors, linears [N, K] under their HF roles.
struct DenseLayer {
  // [H]: the norms q/k/v and gate/up read their input through (Llama's post_attention_layernorm,
  // Gemma's pre_feedforward_layernorm: Architecture::mlp_input_norm, named by mlp_norm_name); the
  // family runs them as (norm_offset + w) * x / rms(x).
  Tensor input_norm, mlp_norm;
  std::string mlp_norm_name;  // "post_attention_layernorm"
  float norm_offset = 0.0f;
  Tensor q, k, v, o, gate, up, down; // [N, K]; gate, up and down empty in a mixture-of-experts layer
  // A mixture-of-experts layer's experts (routed ones in index order, then the shared one); its
  // router and shared-expert gate stay dense and are not read here.
  std::vector<ExpertMlp> experts;
  Tensor q_bias, k_bias, v_bias;     // [N] (Qwen2) or empty
  int window = 0;                    // the layer's sliding window (ModelConfig::layer_window)
  // The checkpoint stores q/k/v as one qkv_proj and gate/up as one gate_up_proj (Phi-3): read
  // split into the parts above; quantize writes them fused again.
  bool fused = false;

  // f32 copies of layer `layer`'s tensors (converted from the stored dtype).
  // sources: the family's name map (Architecture::weight_sources) where the caller made it once for
  // every layer; null: made here when the layer is a mixture of experts.
  static DenseLayer from_checkpoint(const Checkpoint& ck, int layer, const std::vector<WeightSource>* sources = nullptr);
};

// The calibration batch as one prefill step: sample s is sequence s at positions 0..L-1, its cache
// blocks numbered s * ceil(L / block_size) on; *num_blocks is the blocks the plan uses. Throws
// InputError for no samples, samples of different lengths or ids outside the vocabulary.
inline constexpr int kCalibrationBlockSize = 16;
BatchPlan calibration_plan(const std::vector<std::vector<int32_t>>& samples, int vocab_size, int block_size,
                           int* num_blocks);

// The module a tensor belongs to: "model.layers.0.mlp.gate.weight" -> "model.layers.0.mlp.gate"
// (a name without ".weight" as it is).
std::string module_of(const std::string& tensor);

// Rows of several f32 [n_i, K] tensors stacked into one [sum n_i, K] (or [sum n_i] for biases):
// a layer's fused q/k/v or gate/up.
Tensor stack_rows(const std::vector<const Tensor*>& parts);

// Per-kv-head absolute maxima of the rotated keys and of the values the cache would hold: what an
// fp8 KV cache's per-head k_scale / v_scale are calibrated from.
struct KvAbsMax {
  std::vector<float> k, v;  // [Hkv]
};

}  // namespace llmctl::quant
