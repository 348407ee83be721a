// The architecture registry: which architectures run, which are refused by name, and the sliding
// window refusal (Mistral with a window shorter than the context it would run). A refused model
// never produces outputs; a Mistral without an active window runs as a Llama.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "engine/backend/backend.h"
#include "engine/core/error.h"
#include "engine/engine.h"
#include "engine/executor/local_executor.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/registry.h"
#include "tiny_config.h"

using namespace llmctl;
using nlohmann::json;

namespace {

ModelConfig tiny_config(const char* arch) {
  ModelConfig c = test::tiny_llama_config();
  c.architecture = arch;
  return c;
}

json hf_json(const char* arch) {
  return {{"architectures", {arch}}, {"hidden_size", 32},     {"num_hidden_layers", 2},
          {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"intermediate_size", 48},
          {"vocab_size", 50},         {"max_position_embeddings", 256}};
}

// Token i is the text "<i>".
class NumberTokenizer final : public Tokenizer {
 public:
  std::vector<int> encode(std::string_view, bool) const override { return {1, 2, 3}; }
  std::string decode(const std::vector<int>& ids, bool) const override {
    std::string s;
    for (int id : ids) s += token_bytes(id);
    return s;
  }
  std::string token_bytes(int id) const override { return "<" + std::to_string(id) + ">"; }
  std::string token_text(int id) const override { return token_bytes(id); }
  int token_to_id(std::string_view) const override { return -1; }
  int vocab_size() const override { return 50; }
  bool is_special(int) const override { return false; }
  nlohmann::json to_hf_tokenizer_json() const override { return nullptr; }
};

// Logits of the last token of `tokens`, one prefill step on a fresh cache.
std::vector<float> last_logits(Model& m, const std::vector<int32_t>& tokens) {
  LocalExecutor ex(m);
  const int B = 16;
  const int blocks = int(tokens.size() + B - 1) / B;
  ex.alloc_kv_cache(ex.kv_spec(B), blocks);
  BatchPlan plan;
  for (int p = 0; p < int(tokens.size()); ++p) {
    plan.token_ids.push_back(tokens[p]);
    plan.positions.push_back(p);
    plan.slot_mapping.push_back(p);  // blocks 0.. in order
  }
  plan.query_start = {0, int(tokens.size())};
  plan.context_len = {int(tokens.size())};
  for (int b = 0; b < blocks; ++b) plan.block_table.push_back(b);
  plan.max_blocks_per_seq = blocks;
  plan.logits_rows = {int(tokens.size()) - 1};
  Tensor host = ex.execute_to_host(plan);
  return std::vector<float>(host.ptr<float>(), host.ptr<float>() + host.numel());
}

}  // namespace

TEST_CASE("registry: the supported architectures, and others refused by name") {
  std::vector<std::string> names;
  for (const Architecture& a : architectures()) names.push_back(a.name);
  CHECK(names == std::vector<std::string>{"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                                          "Phi3ForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM",
                                          "Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM", "MixtralForCausalLM"});
  CHECK(find_architecture("Qwen3ForCausalLM").qk_norm);
  CHECK_FALSE(find_architecture("Qwen2ForCausalLM").gguf_qk_permuted);
  CHECK(find_architecture("LlamaForCausalLM").gguf_qk_permuted);
  CHECK(find_architecture("Qwen2ForCausalLM").attention_bias);
  CHECK_FALSE(find_architecture("LlamaForCausalLM").attention_bias);
  for (const char* refused : {"GemmaForCausalLM", "DeepseekV3ForCausalLM", "GptOssForCausalLM", "llama", ""}) {
    CAPTURE(refused);
    const std::string msg = "architecture '" + std::string(refused) + "' is not supported";
    CHECK_THROWS_WITH_AS(find_architecture(refused), doctest::Contains(msg.c_str()), InputError);
  }
  // The message lists what runs.
  CHECK_THROWS_WITH_AS(find_architecture("PhiForCausalLM"),
                       doctest::Contains("LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
                                         "Phi3ForCausalLM, Gemma2ForCausalLM, Gemma3ForCausalLM, Qwen3MoeForCausalLM, "
                                         "Qwen2MoeForCausalLM, MixtralForCausalLM"),
                       InputError);
  // config.json goes through the same table.
  CHECK_THROWS_WITH_AS(parse_hf_config(hf_json("GemmaForCausalLM")), doctest::Contains("GemmaForCausalLM"), InputError);
}

TEST_CASE("registry: GGUF general.architecture maps to the HF name") {
  CHECK(std::string(find_gguf_architecture("llama").name) == "LlamaForCausalLM");
  CHECK(std::string(find_gguf_architecture("qwen2").name) == "Qwen2ForCausalLM");
  CHECK(std::string(find_gguf_architecture("qwen3").name) == "Qwen3ForCausalLM");
  CHECK(std::string(find_gguf_architecture("phi3").name) == "Phi3ForCausalLM");
  CHECK(std::string(find_gguf_architecture("gemma2").name) == "Gemma2ForCausalLM");
  CHECK(std::string(find_gguf_architecture("qwen3moe").name) == "Qwen3MoeForCausalLM");
  CHECK(std::string(find_gguf_architecture("qwen2moe").name) == "Qwen2MoeForCausalLM");
  for (const char* refused : {"deepseek2", "gemma", "LlamaForCausalLM"}) {
    CAPTURE(refused);
    const std::string msg = "GGUF architecture '" + std::string(refused) + "' is not supported";
    CHECK_THROWS_WITH_AS(find_gguf_architecture(refused), doctest::Contains(msg.c_str()), InputError);
  }
}

TEST_CASE("registry: make_model builds each family and refuses an unregistered one") {
  auto be = make_cpu_backend(1);
  const std::vector<int32_t> tokens = {3, 17, 5, 41, 8, 22, 9};
  std::vector<std::vector<float>> outs;
  for (const char* arch : {"LlamaForCausalLM", "Qwen2ForCausalLM"}) {
    CAPTURE(arch);
    ModelConfig c = tiny_config(arch);
    c.attention_bias = find_architecture(arch).attention_bias;
    Checkpoint ck = random_checkpoint(c, 11, 0.3f);
    std::unique_ptr<Model> m = make_model(ck, *be);
    CHECK(m->config().architecture == arch);
    CHECK(m->weight_dtype() == DType::F32);
    // The weight-name map is the checkpoint's tensor list (q/k/v biases for Qwen2).
    std::vector<WeightSpec> specs = m->weight_specs();
    CHECK(specs.size() == ck.tensors.size());
    for (const WeightSpec& s : specs) CHECK(ck.has(s.name));
    bool has_bias = false;
    for (const WeightSpec& s : specs) has_bias |= s.name.find("q_proj.bias") != std::string::npos;
    CHECK(has_bias == c.attention_bias);
    std::vector<float> lg = last_logits(*m, tokens);
    REQUIRE(lg.size() == size_t(c.vocab_size));
    bool finite = true, varied = false;
    for (float x : lg) finite &= std::isfinite(x), varied |= x != lg[0];
    CHECK(finite);
    CHECK(varied);
    outs.push_back(lg);
  }
  CHECK(outs[0] != outs[1]);  // the biases change the output: the Qwen2 path reads them

  Checkpoint ck = random_checkpoint(tiny_config("LlamaForCausalLM"), 1, 0.3f);
  ck.config.architecture = "GemmaForCausalLM";
  CHECK_THROWS_WITH_AS(make_model(ck, *be), doctest::Contains("'GemmaForCausalLM' is not supported"), InputError);
}

TEST_CASE("Phi-3: a Llama whose q/k/v and gate/up are stored fused gives the Llama's logits bit for bit") {
  auto be = make_cpu_backend(1);
  const std::vector<int32_t> tokens = {3, 17, 5, 41, 8, 22, 9};
  const ModelConfig lc = tiny_config("LlamaForCausalLM");
  Checkpoint llama = random_checkpoint(lc, 5, 0.3f);
  Checkpoint phi;
  phi.config = lc;
  phi.config.architecture = "Phi3ForCausalLM";
  phi.config.model_type = "phi3";
  // rows of a, then b (, then c): the fusion the Phi-3 checkpoint stores
  const auto cat = [](std::vector<const Tensor*> parts) {
    int64_t rows = 0;
    for (const Tensor* t : parts) rows += t->dim(0);
    Tensor out = Tensor::empty_host(DType::F32, {rows, parts[0]->dim(1)});
    char* dst = static_cast<char*>(out.data);
    for (const Tensor* t : parts) dst = static_cast<char*>(std::memcpy(dst, t->data, t->nbytes())) + t->nbytes();
    return out;
  };
  for (const auto& [name, t] : llama.tensors) {
    const bool fused_part = name.find("_proj.weight") != std::string::npos && name.find("o_proj") == std::string::npos &&
                            name.find("down_proj") == std::string::npos;
    if (!fused_part) phi.tensors[name] = t;
  }
  for (int l = 0; l < lc.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    phi.tensors[p + "self_attn.qkv_proj.weight"] = cat({&llama.get(p + "self_attn.q_proj.weight"),
                                                        &llama.get(p + "self_attn.k_proj.weight"),
                                                        &llama.get(p + "self_attn.v_proj.weight")});
    phi.tensors[p + "mlp.gate_up_proj.weight"] =
        cat({&llama.get(p + "mlp.gate_proj.weight"), &llama.get(p + "mlp.up_proj.weight")});
  }
  std::unique_ptr<Model> a = make_model(llama, *be), b = make_model(phi, *be);
  std::vector<WeightSpec> specs = b->weight_specs();
  CHECK(specs.size() == phi.tensors.size());
  for (const WeightSpec& s : specs) CHECK(phi.has(s.name));
  CHECK(last_logits(*a, tokens) == last_logits(*b, tokens));
}

TEST_CASE("registry: half-supported variants are refused by name") {
  json j = hf_json("LlamaForCausalLM");
  j["hidden_act"] = "gelu";
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("hidden_act \"gelu\" is not supported"), InputError);
  j["hidden_act"] = "silu";
  CHECK_NOTHROW(parse_hf_config(j));
  j["mlp_bias"] = true;
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("mlp_bias is not supported"), InputError);
  j["mlp_bias"] = false;
  CHECK_NOTHROW(parse_hf_config(j));
  // Llama's attention_bias biases o_proj too: refused with every bias tensor present; Qwen2's runs.
  auto be = make_cpu_backend(1);
  ModelConfig c = tiny_config("LlamaForCausalLM");
  c.attention_bias = true;
  Checkpoint ck = random_checkpoint(c, 3, 0.3f);
  CHECK_THROWS_WITH_AS(make_model(ck, *be), doctest::Contains("LlamaForCausalLM with attention_bias"), InputError);
  ck.config.architecture = "Qwen2ForCausalLM";
  CHECK_NOTHROW(make_model(ck, *be));
}

TEST_CASE("sliding windows: which layers slide, in every spelling of the config") {
  json j = hf_json("MistralForCausalLM");
  j["sliding_window"] = 64;
  CHECK(parse_hf_config(j).sliding_window == 64);
  CHECK(parse_hf_config(j).sliding_layers.empty());  // Mistral: every layer
  CHECK(parse_hf_config(j).layer_window(1) == 64);
  CHECK(parse_hf_config(j).to_hf_json()["sliding_window"] == 64);
  CHECK(!parse_hf_config(j).to_hf_json().contains("layer_types"));
  j["sliding_window"] = nullptr;
  CHECK(parse_hf_config(j).sliding_window == 0);
  j.erase("sliding_window");
  CHECK(parse_hf_config(j).sliding_window == 0);
  // Qwen2 writes a window that applies only with use_sliding_window (default false), and then to
  // the layers from max_window_layers (default 28) on.
  json q = hf_json("Qwen2ForCausalLM");
  q["sliding_window"] = 64;
  CHECK(parse_hf_config(q).sliding_window == 0);
  q["use_sliding_window"] = true;
  CHECK(parse_hf_config(q).sliding_window == 0);  // 2 layers, none from layer 28
  q["max_window_layers"] = 1;
  ModelConfig qc = parse_hf_config(q);
  CHECK(qc.layer_window(0) == 0);
  CHECK(qc.layer_window(1) == 64);
  // Written back as transformers 5 writes it, and read again the same.
  const json written = qc.to_hf_json();
  CHECK(written["layer_types"] == json({"full_attention", "sliding_attention"}));
  CHECK(written["use_sliding_window"] == true);
  ModelConfig again = parse_hf_config(written);
  CHECK(again.sliding_window == 64);
  CHECK(again.sliding_layers == qc.sliding_layers);
  // transformers 5's layer_types decides over max_window_layers; a sliding layer needs a window.
  q["layer_types"] = {"sliding_attention", "full_attention"};
  CHECK(parse_hf_config(q).layer_window(0) == 64);
  CHECK(parse_hf_config(q).layer_window(1) == 0);
  q["use_sliding_window"] = false;
  CHECK_THROWS_WITH_AS(parse_hf_config(q), doctest::Contains("no sliding_window applies"), InputError);
  q["layer_types"] = {"full_attention", "chunked_attention"};
  CHECK_THROWS_WITH_AS(parse_hf_config(q), doctest::Contains("chunked_attention"), InputError);
  json neg = hf_json("MistralForCausalLM");
  neg["sliding_window"] = -1;
  CHECK_THROWS_WITH_AS(parse_hf_config(neg), doctest::Contains("sliding_window"), InputError);
}

TEST_CASE("Mistral: a sliding window runs at every context; a window at least the context is a Llama") {
  auto be = make_cpu_backend(1);
  ModelConfig c = tiny_config("MistralForCausalLM");
  c.sliding_window = 4;  // context 256 by max_position_embeddings
  Checkpoint ck = random_checkpoint(c, 5, 0.3f);
  std::unique_ptr<Model> m = make_model(ck, *be);
  CHECK_NOTHROW(m->check_context(256));
  LocalExecutor ex(*m);
  NumberTokenizer tok;
  EngineConfig ec;
  ec.num_blocks = 16;
  Engine engine(ex, tok, ec);
  CHECK(engine.max_context() == 256);

  // A window at least the context (or none) is a plain Llama: the same outputs as the Llama
  // built from the same weights.
  c.sliding_window = 256;
  ck.config = c;
  std::unique_ptr<Model> wide = make_model(ck, *be);
  ck.config.architecture = "LlamaForCausalLM";
  ck.config.sliding_window = 0;
  std::unique_ptr<Model> llama = make_model(ck, *be);
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
  CHECK(last_logits(*wide, tokens) == last_logits(*llama, tokens));
  // The 4-token window reads less than the 18 tokens: its last logits differ from the Llama's.
  CHECK(last_logits(*m, tokens) != last_logits(*llama, tokens));
}

TEST_CASE("Gemma 3: its own tensors and layers on a random checkpoint; the window and the norms' 1 + w matter") {
  auto be = make_cpu_backend(1);
  ModelConfig c = tiny_config("Gemma3ForCausalLM");
  c.qk_norm = true;
  c.hidden_act = "gelu_pytorch_tanh";
  c.tie_word_embeddings = true;
  c.sliding_window = 4;
  c.sliding_layers = {true, false};
  c.sliding_rope_theta = 10000.0f;
  c.rope_theta = 1000000.0f;
  Checkpoint ck = random_checkpoint(c, 7, 0.3f);
  for (const char* norm : {"pre_feedforward_layernorm", "post_feedforward_layernorm"})
    CHECK(ck.has("model.layers.1." + std::string(norm) + ".weight"));
  std::unique_ptr<Model> m = make_model(ck, *be);
  CHECK(m->weight_specs().size() == ck.tensors.size());
  const std::vector<int32_t> tokens = {1, 5, 9, 2, 7, 3, 8, 4, 6, 11, 12};
  const std::vector<float> logits = last_logits(*m, tokens);
  bool finite = true;
  for (float x : logits) finite &= std::isfinite(x);
  CHECK(finite);
  // The window reads fewer keys than the 11 tokens: the last logits change without it.
  ck.config.sliding_window = 0;
  ck.config.sliding_layers.clear();
  CHECK(last_logits(*make_model(ck, *be), tokens) != logits);
  // A Llama built from the same tensors (no feed-forward norms) is refused by name: they have no place.
  ck.config = c;
  ck.config.architecture = "LlamaForCausalLM";
  CHECK_THROWS_WITH_AS(make_model(ck, *be), doctest::Contains("pre_feedforward_layernorm"), InputError);
}
