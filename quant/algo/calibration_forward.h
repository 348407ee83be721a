// The f32 forward of one Llama-family decoder layer over the whole calibration batch (S samples of
// L tokens run as one prefill step) on a CPU backend, with the activation each linear reads exposed:
// what AWQ searches its scales on (it re-runs the attention and MLP sub-blocks with trial weights).
// GPTQ and fp8 KV scales calibrate through the family's own forward instead (family_calibration.h).
// The quantize driver runs it layer by layer: only one layer's f32 weights and the batch's
// activations are in memory at once.
//
//   x [T, H] --input_norm--> attn_in [T, H] --q,k,v + rope + causal attention--> o_in [T, Hq D]
//     --o--> + x = h [T, H] --post_norm--> mlp_in [T, H] --gate, up, silu*--> down_in [T, I]
//     --down--> + h = next x [T, H]                                    (T = S * L)
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/checkpoint.h"

namespace llmctl::quant {

// One decoder layer's weights as f32 host tensors, linears [N, K] under their HF roles.
struct DenseLayer {
  Tensor input_norm, post_norm;      // [H]
  Tensor q, k, v, o, gate, up, down; // [N, K]
  Tensor q_bias, k_bias, v_bias;     // [N] (Qwen2) or empty
  int window = 0;                    // the layer's sliding window (ModelConfig::layer_window)
  // The checkpoint stores q/k/v as one qkv_proj and gate/up as one gate_up_proj (Phi-3): read
  // split into the parts above; quantize writes them fused again.
  bool fused = false;

  // f32 copies of layer `layer`'s tensors (converted from the stored dtype).
  static DenseLayer from_checkpoint(const Checkpoint& ck, int layer);
};

// The calibration batch as one prefill step: sample s is sequence s at positions 0..L-1, its cache
// blocks numbered s * ceil(L / block_size) on; *num_blocks is the blocks the plan uses. Throws
// InputError for no samples, samples of different lengths or ids outside the vocabulary.
inline constexpr int kCalibrationBlockSize = 16;
BatchPlan calibration_plan(const std::vector<std::vector<int32_t>>& samples, int vocab_size, int block_size,
                           int* num_blocks);

// Rows of several f32 [n_i, K] tensors stacked into one [sum n_i, K] (or [sum n_i] for biases):
// a layer's fused q/k/v or gate/up.
Tensor stack_rows(const std::vector<const Tensor*>& parts);

// Per-kv-head absolute maxima of the rotated keys and of the values the cache would hold: what an
// fp8 KV cache's per-head k_scale / v_scale are calibrated from.
struct KvAbsMax {
  std::vector<float> k, v;  // [Hkv]
};

class CalibrationForward {
 public:
  // samples: S token sequences of one length L. The backend must be a CPU backend (f32).
  // chunk_rows: rows per GEMM of gated_act (its [rows, 2I] scratch is the layer's largest).
  CalibrationForward(Backend& be, const ModelConfig& c, const std::vector<std::vector<int32_t>>& samples,
                     int64_t chunk_rows = 4096);

  int64_t tokens() const { return tokens_; }
  int64_t seq_len() const { return seq_len_; }
  Backend& backend() { return be_; }
  const ModelConfig& config() const { return c_; }

  Tensor alloc(int64_t cols) const;                // [T, cols] f32
  Tensor embed(const Tensor& table);               // [T, H]: the first layer's input
  // out = rmsnorm(x) * w
  void norm(const Tensor& x, const Tensor& w, Tensor& out);
  // out = x @ w^T (+ bias); x [T, K], w [N, K]
  void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out);
  // o_in = causal attention of q, k, v projections of attn_in (with rope); amax, when given, takes
  // the maxima of the cached keys/values.
  void attention(const DenseLayer& L, const Tensor& attn_in, Tensor& o_in, KvAbsMax* amax = nullptr);
  // down_in = silu(attn_in @ gate^T) * (mlp_in @ up^T)
  void gated_act(const DenseLayer& L, const Tensor& mlp_in, Tensor& down_in);
  // a += b, elementwise over [T, C]
  static void add(Tensor& a, const Tensor& b);

  // What each linear of a layer read: attn_in [T, H] (q, k, v), o_in [T, Hq D], mlp_in [T, H]
  // (gate, up), down_in [T, I].
  struct LayerInputs {
    Tensor attn_in, o_in, mlp_in, down_in;
  };
  // The whole layer L on x [T, H] (advanced in place to the layer's output), keeping each linear's
  // input; amax as in attention().
  LayerInputs layer(const DenseLayer& L, Tensor& x, KvAbsMax* amax = nullptr);

 private:
  Backend& be_;
  ModelConfig c_;
  int64_t tokens_ = 0, seq_len_ = 0;
  BatchPlan plan_;
  DeviceBatch batch_;
  KvLayer kv_;
  RopeParams rope_;
  int64_t chunk_rows_ = 4096;
  Tensor qkv_, gate_up_;  // scratch [T, (Hq + 2 Hkv) D], [min(T, chunk_rows), 2 I]
  Tensor qkv_w_, qkv_b_;  // fused q/k/v weight and bias of the layer attention() last ran
};

}  // namespace llmctl::quant
