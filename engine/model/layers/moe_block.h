// A mixture-of-experts MLP (Qwen3-MoE, Mixtral, Qwen2-MoE):
//
//   x [T, H] -> router [T, E] -> softmax over the experts -> per token the top k (ties: the lower
//   expert index), weights renormalized to sum 1 when asked -> out[t] = sum_j w[t][j] * expert_j(x[t])
//   (+ sigmoid(shared_gate . x[t]) * shared(x[t]) when there is a shared expert)
//
// Only the experts a step routes tokens to run: the routing groups tokens by expert (one pass), the
// routed rows are gathered into one buffer ordered by expert (T k rows), every active expert's
// gate/up runs over its stretch of it in one grouped linear, the activation over all of it at once,
// the downs in one grouped linear, and the outputs are added into each token's row in expert order.
// A token's output therefore never depends on which other tokens share the step (beyond what a
// linear's batch size does to it).
#pragma once
#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/layers/gated_mlp.h"

namespace llmctl {

// The routing of T tokens: for each expert, the tokens routed to it and their weights.
struct MoeRouting {
  std::vector<std::vector<int32_t>> tokens;  // [E] token indices, ascending
  std::vector<std::vector<float>> weights;   // [E] their routing weights
};
// logits [T, E] (host, f32).
MoeRouting route_tokens(const float* logits, int64_t T, int E, int k, bool renormalize);

struct MoeBlock {
  LinearWeight router;            // [E, H]
  std::vector<GatedMlp> experts;  // E: gate_up [2I, H], down [H, I] (tensor parallel: this rank's I)
  GatedMlp shared;                // gate_up.n == 0: no shared expert
  LinearWeight shared_gate;       // [1, H]
  int top_k = 1;
  bool renormalize = false;

  bool empty() const { return experts.empty(); }

  // Scratch of the step: router_logits [T, E] f32; the routed rows grouped by expert (k per token):
  // rows_in / rows_out [T k, H], gate_up [T k, 2I], act [T k, I]; the shared expert's
  // shared_gate_up [T, 2I_shared], shared_act [T, I_shared]. Each at least that many elements.
  struct Scratch {
    Tensor router_logits, rows_in, rows_out, gate_up, act, shared_gate_up, shared_act;
  };
  // out [T, H] = the block's output for x [T, H] (tensor parallel: this rank's partial sum, to be
  // all-reduced as a dense MLP's down output is).
  void run(Backend& be, const Tensor& x, Scratch& s, Tensor& out) const;
};

}  // namespace llmctl
