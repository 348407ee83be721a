// A mixture of experts on the CUDA backend (its gather / scatter-add / zero row ops, routing on the
// host): a tiny random Qwen3-MoE's logits over a prefill and decode steps of two sequences against
// the CPU backend's, in f32; in bf16 with graphs enabled, decode steps run eagerly (the routing reads
// the router's logits on the host mid-step) and stay near f32's.
#include <algorithm>
#include <cmath>

#include "engine/backend/backend.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/registry.h"
#include "engine/runner/model_runner.h"
#include "gpu_test_util.h"

using namespace llmctl;
using namespace llmctl::gpu_test;

namespace {

constexpr int kB = 16;

Checkpoint tiny_moe(uint32_t seed) {
  ModelConfig c;
  c.architecture = "Qwen3MoeForCausalLM";
  c.qk_norm = true;
  c.hidden_size = 128;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.intermediate_size = 256;
  c.num_experts = 8;
  c.experts_per_token = 2;
  c.moe_intermediate_size = 64;
  c.moe_renormalize = true;
  c.vocab_size = 500;
  c.max_position_embeddings = 512;
  c.tie_word_embeddings = true;
  return random_checkpoint(c, seed, 0.1f);
}

// Two sequences: a prefill of 37 and 20 tokens, then 4 decode steps of both; the logits of each
// step's last token of each sequence, concatenated.
std::vector<float> run(Model& model) {
  ModelRunner m(model);
  m.alloc_kv_cache(m.kv_spec(kB), 16);
  std::vector<std::vector<int32_t>> tokens(2, std::vector<int32_t>(64));
  for (size_t s = 0; s < 2; ++s)
    for (size_t i = 0; i < 64; ++i) tokens[s][i] = int32_t((s * 131 + i * 37 + 5) % 500);
  std::vector<float> out;
  int begin[2] = {0, 0}, end[2] = {37, 20};
  for (int step = 0; step < 5; ++step) {
    BatchPlan plan;
    plan.max_blocks_per_seq = 4;
    for (int s = 0; s < 2; ++s) {
      for (int p = begin[s]; p < end[s]; ++p) {
        plan.token_ids.push_back(tokens[size_t(s)][size_t(p)]);
        plan.positions.push_back(p);
        plan.slot_mapping.push_back((s * 4 + p / kB) * kB + p % kB);
      }
      plan.query_start.push_back(plan.num_tokens());
      plan.context_len.push_back(end[s]);
      for (int i = 0; i < 4; ++i) plan.block_table.push_back(s * 4 + i);
      plan.logits_rows.push_back(plan.num_tokens() - 1);
    }
    Tensor h = m.backend().to_host_f32(m.execute(plan));
    out.insert(out.end(), h.ptr<float>(), h.ptr<float>() + h.numel());
    for (int s = 0; s < 2; ++s) begin[s] = end[s], end[s] += 1;
  }
  return out;
}

double worst_relative(const std::vector<float>& got, const std::vector<float>& ref) {
  double worst = 0, scale = 1e-6;
  for (float r : ref) scale = std::max(scale, double(std::fabs(r)));
  for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::fabs(double(got[i]) - ref[i]) / scale);
  return worst;
}

}  // namespace

TEST_CASE("cuda: a mixture of experts runs as on the CPU") {
  Checkpoint ck = tiny_moe(31);
  std::unique_ptr<Backend> cpu = make_cpu_backend(0);
  std::unique_ptr<Model> cpu_model = make_model(ck, *cpu, DType::F32);
  const std::vector<float> ref = run(*cpu_model);

  CudaOptions opts;
  opts.graphs = false;
  CudaBackend f32(DType::F32, 0, opts);
  std::unique_ptr<Model> m32 = make_model(ck, f32, DType::F32);
  const std::vector<float> got = run(*m32);
  REQUIRE(got.size() == ref.size());
  const double err32 = worst_relative(got, ref);
  std::printf("  MoE f32 on CUDA vs CPU: worst |dlogit| / max|logit| = %.2e over %zu logits\n", err32, ref.size());
  CHECK(err32 < 1e-3);

  opts.graphs = true;
  CudaBackend bf16(DType::BF16, 0, opts);
  std::unique_ptr<Model> m16 = make_model(ck, bf16, DType::BF16);
  const std::vector<float> half = run(*m16);
  const double err16 = worst_relative(half, ref);
  std::printf("  MoE bf16 on CUDA (graphs allowed, %zu captured) vs CPU f32: %.2e\n", bf16.num_graphs(), err16);
  CHECK(bf16.num_graphs() == 0);
  CHECK(err16 < 5e-2);
}
