// The Llama-family decoder forward, written once against the Backend interface.
// Weights are uploaded once (q/k/v fused into one [(Hq+2Hkv)*D, H] matrix, gate/up into [2I, H]);
// forward() runs one BatchPlan step and returns logits for plan.logits_rows.
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/checkpoint.h"

namespace llmctl {

RopeParams make_rope_params(const ModelConfig& c);

class LlamaModel {
 public:
  // weight_dtype: dtype the linear weights are kept in on the backend (nullopt: as stored).
  LlamaModel(const Checkpoint& ckpt, Backend& backend, std::optional<DType> weight_dtype = std::nullopt);

  const ModelConfig& config() const { return config_; }
  Backend& backend() { return backend_; }
  DType weight_dtype() const { return weight_dtype_; }

  // KV cache for num_blocks blocks of block_size tokens, one KvLayer per layer, plus one scratch
  // block (id num_blocks) that padded graph rows write to and no request owns.
  std::vector<KvLayer> alloc_kv_cache(int num_blocks, int block_size);
  size_t kv_bytes_per_block(int block_size) const;
  // Device memory the activations of a step of `tokens` tokens and `rows` logits rows take.
  size_t activation_bytes(int64_t tokens, int64_t rows) const;

  // On a device backend: runs every linear shape of a step at each power-of-two token count up to
  // max_tokens (the lm_head up to max_rows), so that GEMM algorithms are measured at start-up and
  // not inside the first steps. No-op on the CPU.
  void tune_gemms(int64_t max_tokens, int64_t max_rows);

  // One step. Returns f32 logits [plan.logits_rows.size(), vocab] on the backend's device: a view
  // of a workspace that the next step overwrites. Decode-only steps on a backend with graphs are
  // padded to a bucket of sequences and replayed from a graph.
  Tensor forward_device(const BatchPlan& plan, std::vector<KvLayer>& kv);
  // The same, copied to the host.
  Tensor forward(const BatchPlan& plan, std::vector<KvLayer>& kv);

 private:
  struct Layer {
    Tensor input_norm, qkv, qkv_bias, o_proj, post_norm, gate_up, down;
  };
  struct Workspace {
    int64_t tokens = 0, rows = 0;
    Tensor hidden, residual, normed, qkv, attn, gate_up, act;
    Tensor last, logits;  // [rows, H] activation dtype, [rows, V] f32
  };
  void ensure_workspace(int64_t T, int64_t R);
  // Enqueues the whole step for device batch b (T tokens, R logits rows) into ws_.logits.
  void run_step(const DeviceBatch& b, int64_t T, int64_t R, std::vector<KvLayer>& kv);

  ModelConfig config_;
  Backend& backend_;
  DType weight_dtype_;
  RopeParams rope_;
  Tensor embed_, final_norm_, lm_head_;
  std::vector<Layer> layers_;
  Workspace ws_;
  std::vector<const void*> graph_kv_;  // the KV cache (every layer's k and v) the graphs were captured with
};

}  // namespace llmctl
