// llmctl_score: runs the golden cases of tests/golden/*.json through llmctl and prints, per case,
// our log-probabilities at the reference's top-k ids, our own top-k ids, and our greedy
// continuation (argmax at every step, no EOS stop) — as one JSON object on stdout.
// Usage: llmctl_score GOLDEN.json [--model PATH] [--dtype f32|bf16|f16] [--device auto|cpu|cuda] [--nccl-single-rank]
//                     [--act-quant none|int8] [--tensor-parallel-size N] [--pipeline-parallel-size M]
//                     [--deterministic]
// With N x M > 1 it must run under `mpirun -np N*M`; rank 0 prints.
// Quantized linears on the CPU run with exact f32 activations unless --act-quant int8 is given: the
// goldens are transformers' fp32 activations against the same (dequantized) weights.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/generate_one.h"
#include "engine/scorer.h"
#include "engine/runtime.h"

using namespace llmctl;

int main(int argc, char** argv) try {
  LLM_REQUIRE(argc >= 2) << "usage: llmctl_score GOLDEN.json [--model PATH] [--dtype f32|bf16|f16] [--device auto|cpu|cuda] "
                             "[--act-quant none|int8] [--tensor-parallel-size N] [--pipeline-parallel-size M] "
                             "[--quantized-weights auto|keep|dequantize] [--cpu-isa ISA] [--deterministic] [--nccl-single-rank]";
  RuntimeOptions ro;
  ro.act_quant = ActQuantMode::None;
  for (int i = 2; i < argc; i += 2) {
    std::string k = argv[i];
    if (k == "--deterministic") {  // batch-invariant CUDA kernels (runs compared bit for bit)
      ro.deterministic = true;
      --i;
      continue;
    }
    if (k == "--nccl-single-rank") {  // CUDA: the collectives through NCCL at world size 1
      ro.nccl_single_rank = true;
      --i;
      continue;
    }
    LLM_REQUIRE(i + 1 < argc) << k << " needs a value";
    if (k == "--model") ro.model = argv[i + 1];
    else if (k == "--dtype") ro.dtype = parse_dtype(argv[i + 1]);
    else if (k == "--device") ro.device = argv[i + 1];
    else if (k == "--tensor-parallel-size") ro.tensor_parallel = std::stoi(argv[i + 1]);
    else if (k == "--pipeline-parallel-size") ro.pipeline_parallel = std::stoi(argv[i + 1]);
    else if (k == "--cpu-isa") ro.cpu_kernels.isa = argv[i + 1];  // auto, avx512-vnni, avx-vnni, avx2, scalar
    else if (k == "--quantized-weights") {
      const auto q = parse_quantized_weights(argv[i + 1]);
      LLM_REQUIRE(q) << "--quantized-weights: expected auto, keep or dequantize, got '" << argv[i + 1] << "'";
      ro.quantized_weights = *q;
    }
    else if (k == "--act-quant") {
      const auto m = parse_act_quant(argv[i + 1]);
      LLM_REQUIRE(m) << "--act-quant: expected none or int8, got '" << argv[i + 1] << "'";
      ro.act_quant = *m;
    }
    else LLM_THROW() << "unknown option " << k;
  }
  std::ifstream in(argv[1]);
  LLM_REQUIRE(in) << "cannot read " << argv[1];
  nlohmann::json golden = nlohmann::json::parse(in);
  Runtime rt = load_runtime(ro);
  if (rt.is_worker_rank()) {
    serve_ranks(rt);
    return 0;
  }
  Scorer scorer(*rt.executor, *rt.tokenizer);
  const int topk = golden.value("top_k", 20);
  nlohmann::json out = {{"model", rt.model_path}, {"backend", rt.backend->name()}, {"cases", nlohmann::json::array()}};
  for (const auto& c : golden["cases"]) {
    nlohmann::json r = {{"name", c["name"]}};
    if (c.contains("input_ids")) {
      auto rows = scorer.score(c["input_ids"].get<std::vector<int>>());
      nlohmann::json at_ref = nlohmann::json::array(), own_top = nlohmann::json::array();
      for (size_t p = 0; p < rows.size(); ++p) {
        std::vector<float> vals;
        for (int id : c["top_ids"][p]) vals.push_back(rows[p][id]);
        at_ref.push_back(vals);
        std::vector<int> idx(rows[p].size());
        std::iota(idx.begin(), idx.end(), 0);
        std::partial_sort(idx.begin(), idx.begin() + topk, idx.end(),
                          [&](int a, int b) { return rows[p][a] > rows[p][b]; });
        own_top.push_back(std::vector<int>(idx.begin(), idx.begin() + topk));
      }
      r["logprobs_at_ref_ids"] = at_ref;
      r["top_ids"] = own_top;
    }
    SamplingParams sp;
    sp.temperature = 0;
    sp.ignore_eos = true;
    sp.max_tokens = int(c["greedy_ids"].size());
    // Through the engine, as generate runs it (device sampling on a GPU).
    r["greedy_ids"] = generate_one(*rt.executor, *rt.tokenizer, c["greedy_prompt_ids"].get<std::vector<int>>(), sp)
                          .output.token_ids;
    out["cases"].push_back(r);
  }
  std::cout << out.dump() << "\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "llmctl_score: error: " << e.what() << "\n";
  return 1;
}
