// --deterministic and CUDA graphs: the batch-invariant GEMM against a reference and against itself
// at other batch sizes; a tiny random model whose sequence logits do not change (bit for bit) with
// what shares the batch or how the prompt is chunked, and whose graph-replayed decode steps equal
// eager ones.
#include <cstring>

#include "engine/model/random_checkpoint.h"
#include "engine/model/registry.h"
#include "engine/runner/model_runner.h"
#include "gpu_test_util.h"
#include "kernels/cuda/gemm.cuh"

using namespace llmctl;
using namespace llmctl::gpu_test;

TEST_CASE("cuda: batch-invariant GEMM") {
  std::mt19937 rng(11);
  for (DType dt : kHalfTypes) {
    CudaBackend& be = backend(dt);
    const int N = 200, K = 136, Tmax = 300;
    HostData x = random_host(dt, {Tmax, K}, rng), w = random_host(dt, {N, K}, rng);
    Tensor dx = be.upload(x.t, dt), dw = be.upload(w.t, dt);
    std::vector<std::vector<float>> outs;
    for (int T : {1, 5, 16, 17, Tmax}) {
      Tensor xt = dx;
      xt.shape = {T, K};
      Tensor out = poisoned(be, DType::F32, {T, N});
      cuda::gemm_invariant({xt.data, dw.data, out.data, dt, DType::F32, T, N, K}, be.stream());
      outs.push_back(to_vec(be, out));
      std::vector<double> ref(size_t(T) * N);
      for (int t = 0; t < T; ++t)
        for (int n = 0; n < N; ++n) {
          double acc = 0;
          for (int k = 0; k < K; ++k) acc += double(x.f[size_t(t) * K + k]) * w.f[size_t(n) * K + k];
          ref[size_t(t) * N + n] = acc;
        }
      expect_close("gemm_invariant T=" + std::to_string(T), DType::F32, outs.back(), ref, 1e2);  // f32 out: ~1e-6
    }
    // Row t of every launch is the same bits.
    const std::vector<float>& big = outs.back();
    for (const auto& o : outs)
      CHECK(std::memcmp(o.data(), big.data(), o.size() * sizeof(float)) == 0);
  }
}

namespace {

Checkpoint tiny_model(uint32_t seed) {
  ModelConfig c;
  c.hidden_size = 256;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 64;
  c.intermediate_size = 384;
  c.vocab_size = 1000;
  c.max_position_embeddings = 2048;
  c.tie_word_embeddings = true;
  return random_checkpoint(c, seed, 0.08f);
}

constexpr int kB = 16;

struct Seq {
  std::vector<int32_t> tokens;
  int first_block = 0;  // blocks first_block, first_block + 1, ...
};

// One step: sequence s computes tokens [begin[s], end[s]); logits of each sequence's last token.
std::vector<float> step(ModelRunner& m, const std::vector<Seq>& seqs,
                        const std::vector<int>& begin, const std::vector<int>& end) {
  BatchPlan plan;
  int mb = 0;
  for (size_t s = 0; s < seqs.size(); ++s) mb = std::max(mb, (end[s] + kB - 1) / kB);
  plan.max_blocks_per_seq = mb;
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int p = begin[s]; p < end[s]; ++p) {
      plan.token_ids.push_back(seqs[s].tokens[size_t(p)]);
      plan.positions.push_back(p);
      plan.slot_mapping.push_back((seqs[s].first_block + p / kB) * kB + p % kB);
    }
    plan.query_start.push_back(plan.num_tokens());
    plan.context_len.push_back(end[s]);
    for (int i = 0; i < mb; ++i) plan.block_table.push_back(i < (end[s] + kB - 1) / kB ? seqs[s].first_block + i : -1);
    plan.logits_rows.push_back(plan.num_tokens() - 1);
  }
  Tensor h = m.backend().to_host_f32(m.execute(plan));
  return std::vector<float>(h.ptr<float>(), h.ptr<float>() + h.numel());
}

// Prefill in chunks of `chunk`, then `decodes` single-token steps; the logits of every step of seq 0,
// with `others` sequences decoding beside it in the decode steps.
std::vector<std::vector<float>> run_seq0(Model& model, int chunk, int others, int decodes) {
  ModelRunner m(model);
  m.alloc_kv_cache(m.kv_spec(kB), 12 * (1 + others));
  std::mt19937 rng(3);
  std::vector<Seq> seqs(size_t(1 + others));
  for (size_t s = 0; s < seqs.size(); ++s) {
    seqs[s].tokens.resize(200);
    for (auto& t : seqs[s].tokens) t = int32_t(rng() % 1000);
    seqs[s].first_block = int(s) * 12;
  }
  const int prompt = 150 - 7;  // not a multiple of the block size
  std::vector<std::vector<float>> out;
  for (int p = 0; p < prompt; p += chunk) step(m, {seqs[0]}, {p}, {std::min(prompt, p + chunk)});
  for (size_t s = 1; s < seqs.size(); ++s) step(m, {seqs[s]}, {0}, {prompt - 20 + int(s)});
  for (int d = 0; d < decodes; ++d) {
    std::vector<int> begin, end;
    for (size_t s = 0; s < seqs.size(); ++s) {
      const int at = (s == 0 ? prompt : prompt - 20 + int(s)) + d;
      begin.push_back(at);
      end.push_back(at + 1);
    }
    std::vector<float> lg = step(m, seqs, begin, end);
    out.emplace_back(lg.begin(), lg.begin() + 1000);
  }
  return out;
}

}  // namespace

TEST_CASE("cuda: --deterministic: batch- and chunk-invariant, graphs equal eager") {
  Checkpoint ck = tiny_model(21);
  for (bool graphs : {false, true}) {
    CudaOptions opts;
    opts.deterministic = true;
    opts.graphs = graphs;
    CudaBackend be(DType::BF16, 0, opts);
    std::unique_ptr<Model> model = make_model(ck, be, DType::BF16);
    Model& m = *model;
    const auto alone = run_seq0(m, 1000, 0, 6);
    const auto batched = run_seq0(m, 37, 5, 6);
    const auto crowded = run_seq0(m, 16, 20, 6);
    for (size_t d = 0; d < alone.size(); ++d) {
      CHECK(alone[d] == batched[d]);
      CHECK(alone[d] == crowded[d]);
    }
    std::printf("  deterministic, graphs %s: seq 0 logits identical alone, with 5 and with 20 others (%zu steps); "
                "graphs captured %zu\n",
                graphs ? "on" : "off", alone.size(), be.num_graphs());
    if (graphs) CHECK(be.num_graphs() > 0);
    static std::vector<std::vector<float>> eager;
    if (!graphs) eager = alone;
    else
      for (size_t d = 0; d < alone.size(); ++d) CHECK(alone[d] == eager[d]);
  }
}

TEST_CASE("cuda: graph-replayed decode steps match eager ones (cuBLAS path)") {
  Checkpoint ck = tiny_model(22);
  CudaOptions eager_opts;
  eager_opts.graphs = false;
  CudaBackend be_e(DType::BF16, 0, eager_opts), be_g(DType::BF16, 0, CudaOptions{});
  std::unique_ptr<Model> me = make_model(ck, be_e, DType::BF16), mg = make_model(ck, be_g, DType::BF16);
  const auto a = run_seq0(*me, 64, 3, 8), b = run_seq0(*mg, 64, 3, 8);
  double max_diff = 0;
  for (size_t d = 0; d < a.size(); ++d)
    for (size_t i = 0; i < a[d].size(); ++i) max_diff = std::max(max_diff, double(std::fabs(a[d][i] - b[d][i])));
  std::printf("  graphs vs eager (padded batch 4 -> 4, cuBLAS): max |logit diff| %.3e, graphs %zu\n", max_diff,
              be_g.num_graphs());
  CHECK(be_g.num_graphs() > 0);
  CHECK(max_diff < 5e-2);
}
