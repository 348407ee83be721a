// parse_hf_config / validate / to_hf_json.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/model/config.h"
#include "engine/model/layers/rope.h"
#include "source_dir.h"

using namespace llmctl;
using nlohmann::json;

namespace {

json smollm2_json() {
  return json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576,
    "num_hidden_layers": 30, "num_attention_heads": 9, "num_key_value_heads": 3,
    "intermediate_size": 1536, "vocab_size": 49152, "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-05, "rope_theta": 100000, "rope_scaling": null, "tie_word_embeddings": true,
    "bos_token_id": 1, "eos_token_id": 2, "torch_dtype": "bfloat16"})");
}

}  // namespace

TEST_CASE("config: Llama fields and defaults") {
  ModelConfig c = parse_hf_config(smollm2_json());
  CHECK(c.architecture == "LlamaForCausalLM");
  CHECK(c.hidden_size == 576);
  CHECK(c.num_layers == 30);
  CHECK(c.num_heads == 9);
  CHECK(c.num_kv_heads == 3);
  CHECK(c.head_dim == 64);  // hidden / heads when absent
  CHECK(c.intermediate_size == 1536);
  CHECK(c.vocab_size == 49152);
  CHECK(c.max_position_embeddings == 8192);
  CHECK(c.rms_norm_eps == 1e-5f);
  CHECK(c.rope_theta == 100000.0f);
  CHECK(c.rope_scaling.type == "none");
  CHECK(c.tie_word_embeddings);
  CHECK_FALSE(c.attention_bias);
  CHECK(c.bos_token_ids == std::vector<int>{1});
  CHECK(c.eos_token_ids == std::vector<int>{2});
  CHECK(c.torch_dtype == "bfloat16");

  json j = smollm2_json();
  j.erase("num_key_value_heads");
  j["head_dim"] = 128;
  j["eos_token_id"] = {2, 0};
  ModelConfig d = parse_hf_config(j);
  CHECK(d.num_kv_heads == 9);
  CHECK(d.head_dim == 128);
  CHECK(d.eos_token_ids == std::vector<int>{2, 0});
}

TEST_CASE("config: Mistral and Qwen2") {
  json j = smollm2_json();
  j["architectures"] = {"MistralForCausalLM"};
  j["model_type"] = "mistral";
  CHECK(parse_hf_config(j).architecture == "MistralForCausalLM");
  j["architectures"] = {"Qwen2ForCausalLM"};
  j["model_type"] = "qwen2";
  ModelConfig q = parse_hf_config(j);
  CHECK(q.attention_bias);
  CHECK(q.model_type == "qwen2");
}

TEST_CASE("config: rope scaling") {
  json j = smollm2_json();
  j["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  ModelConfig c = parse_hf_config(j);
  CHECK(c.rope_scaling.type == "llama3");
  CHECK(c.rope_scaling.factor == 8.0f);
  CHECK(c.rope_scaling.original_max_position_embeddings == 8192);
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  CHECK(parse_hf_config(j).rope_scaling.type == "linear");
  CHECK(parse_hf_config(j).rope_scaling.factor == 2.0f);
  j["rope_scaling"] = {{"rope_type", "dynamic"}, {"factor", 2.0}};
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("dynamic"), InputError);
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}};
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("original_max_position_embeddings"), InputError);
}

TEST_CASE("config: YaRN rope (Qwen2.5's long context) and its attention factor") {
  json j = smollm2_json();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768}};
  ModelConfig c = parse_hf_config(j);
  CHECK(c.rope_scaling.type == "yarn");
  CHECK(c.rope_scaling.original_max_position_embeddings == 32768);
  CHECK(c.rope_scaling.beta_fast == 32.0f);
  CHECK(c.rope_scaling.beta_slow == 1.0f);
  CHECK(c.rope_scaling.truncate);
  CHECK(c.rope_scaling.attention_factor == doctest::Approx(0.1 * std::log(4.0) + 1.0));  // transformers' get_mscale
  // The factor multiplies rope's cos and sin (the turning part of q and k), not the softmax scale.
  CHECK(make_rope_params(c).attention_scaling == c.rope_scaling.attention_factor);
  CHECK(c.softmax_scale() == doctest::Approx(1 / std::sqrt(64.0)));
  // mscale / mscale_all_dim (DeepSeek's spelling) and an explicit factor
  j["rope_scaling"] = {{"type", "yarn"},  {"factor", 40.0},         {"original_max_position_embeddings", 4096},
                       {"mscale", 1.0},   {"mscale_all_dim", 0.707}, {"beta_fast", 16}, {"truncate", false}};
  c = parse_hf_config(j);
  CHECK(c.rope_scaling.attention_factor ==
        doctest::Approx((0.1 * std::log(40.0) + 1.0) / (0.1 * 0.707 * std::log(40.0) + 1.0)));
  CHECK(c.rope_scaling.beta_fast == 16.0f);
  CHECK_FALSE(c.rope_scaling.truncate);
  j["rope_scaling"]["attention_factor"] = 0.5;
  CHECK(parse_hf_config(j).rope_scaling.attention_factor == 0.5f);
  // Round trip through config.json keeps every field.
  const json out = parse_hf_config(j).to_hf_json();
  CHECK(parse_hf_config(out).to_hf_json() == out);
  CHECK(parse_hf_config(out).rope_scaling.attention_factor == 0.5f);
  // Partial rotary with YaRN: its frequencies span the rotary dimensions only.
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 32768},
                       {"partial_rotary_factor", 0.5}};
  CHECK(parse_hf_config(j).rotary_dim == 32);
  // What llmctl does not implement is refused by name, never ignored.
  j["rope_scaling"] = {{"type", "yarn"}, {"original_max_position_embeddings", 32768}};
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("factor"), InputError);
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}};
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("original_max_position_embeddings"), InputError);
}

TEST_CASE("config: Phi-3 with LongRoPE (4.x's su spelling and 5.x's), and partial rotary") {
  json j = smollm2_json();
  j["architectures"] = {"Phi3ForCausalLM"};
  j.erase("model_type");
  j["hidden_size"] = 64, j["num_attention_heads"] = 4, j["num_key_value_heads"] = 4;  // head_dim 16: 8 factors
  j["max_position_embeddings"] = 131072;
  j["original_max_position_embeddings"] = 4096;
  j["sliding_window"] = 262144;
  j["resid_pdrop"] = 0.0, j["embd_pdrop"] = 0.0;
  json shortf = json::array(), longf = json::array();
  for (int i = 0; i < 8; ++i) shortf.push_back(1.0 + 0.1 * i), longf.push_back(2.0 + i);
  j["rope_scaling"] = {{"type", "su"}, {"short_factor", shortf}, {"long_factor", longf}};
  ModelConfig c = parse_hf_config(j);
  CHECK(c.model_type == "phi3");
  CHECK(c.rope_scaling.type == "longrope");
  CHECK(c.rope_scaling.original_max_position_embeddings == 4096);
  CHECK(c.rope_scaling.factor == 32.0f);  // 131072 / 4096
  CHECK(c.rope_scaling.attention_factor == doctest::Approx(std::sqrt(1 + std::log(32.0) / std::log(4096.0))));
  CHECK(c.rope_scaling.short_factor[1] == doctest::Approx(1.1f));
  CHECK(c.sliding_window == 262144);  // Phi-3's window applies to every layer
  CHECK(c.sliding_layers.empty());
  const json out = c.to_hf_json();
  CHECK(parse_hf_config(out).to_hf_json() == out);
  // transformers 5: rope_parameters with the original context and partial_rotary_factor 1
  j.erase("rope_scaling");
  j["rope_parameters"] = {{"rope_type", "longrope"}, {"rope_theta", 100000.0}, {"partial_rotary_factor", 1.0},
                          {"original_max_position_embeddings", 4096}, {"short_factor", shortf}, {"long_factor", longf}};
  CHECK(parse_hf_config(j).rope_scaling.attention_factor == doctest::Approx(c.rope_scaling.attention_factor));
  // Phi-4-mini: rope over 3/4 of each head, so 6 factors for head_dim 16, not 8
  j["rope_parameters"]["partial_rotary_factor"] = 0.75;
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("longrope has 8 factors for 12 rotary dimensions"),
                       InputError);
  json short6 = json::array(), long6 = json::array();
  for (int i = 0; i < 6; ++i) short6.push_back(1.0), long6.push_back(2.0);
  j["rope_parameters"]["short_factor"] = short6, j["rope_parameters"]["long_factor"] = long6;
  const ModelConfig p = parse_hf_config(j);
  CHECK(p.rotary_dim == 12);
  CHECK(p.rotary() == 12);
  CHECK(parse_hf_config(p.to_hf_json()).rotary_dim == 12);  // written as 4.x's top-level field
  j["partial_rotary_factor"] = 0.5;  // 4.x's top-level spelling, disagreeing
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("disagree"), InputError);
  j.erase("partial_rotary_factor");
  j["rope_parameters"]["partial_rotary_factor"] = 0.01;  // int(16 x 0.01) = 0 dimensions
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("leaves no rotary dimension"), InputError);
  j["rope_parameters"]["partial_rotary_factor"] = 1.0;
  j["rope_parameters"]["short_factor"] = shortf, j["rope_parameters"]["long_factor"] = longf;
  j["rope_parameters"]["short_factor"] = json::array({1.0, 2.0});
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("longrope has 2 factors"), InputError);
}

TEST_CASE("config: transformers 5's rope_parameters read as 4.x's rope_theta + rope_scaling (configs transformers wrote)") {
  auto load = [](const char* name) {
    std::ifstream f(std::string(llmctl::test::source_dir()) + "/tests/unit/data/hf_configs/" + name + ".json");
    REQUIRE(f.good());
    return json::parse(f);
  };
  const json t5 = load("llama3_rope_parameters");
  REQUIRE(t5.contains("rope_parameters"));
  REQUIRE_FALSE(t5.contains("rope_theta"));  // what made llmctl run the default rope before
  const ModelConfig c = parse_hf_config(t5);
  CHECK(c.rope_theta == 500000.0f);
  CHECK(c.rope_scaling.type == "llama3");
  CHECK(c.rope_scaling.factor == 32.0f);
  CHECK(c.rope_scaling.original_max_position_embeddings == 8192);
  json t4 = t5;  // the same model as transformers 4 wrote it
  t4.erase("rope_parameters");
  t4["rope_theta"] = 500000.0;
  t4["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0}, {"high_freq_factor", 4.0},
                        {"original_max_position_embeddings", 8192}};
  CHECK(parse_hf_config(t4).to_hf_json() == c.to_hf_json());
  json both = t5;  // both spellings: they must agree
  both["rope_scaling"] = t4["rope_scaling"];
  CHECK_NOTHROW(parse_hf_config(both));
  both["rope_scaling"]["factor"] = 8.0;
  CHECK_THROWS_WITH_AS(parse_hf_config(both), doctest::Contains("disagree"), InputError);
  both = t5;
  both["rope_theta"] = 10000.0;
  CHECK_THROWS_WITH_AS(parse_hf_config(both), doctest::Contains("disagree"), InputError);
  json extra = t5;  // a rope field llmctl does not apply
  extra["rope_parameters"]["attention_factor"] = 0.5;
  CHECK_THROWS_WITH_AS(parse_hf_config(extra), doctest::Contains("'attention_factor'"), InputError);
  // Per layer type (transformers 5, Gemma 3): full_attention is the model's rope, sliding layers
  // take a plain rope of their own base; anything else is refused.
  extra = t5;
  extra["rope_parameters"] = {{"full_attention", t5["rope_parameters"]},
                              {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 10000.0}}}};
  const ModelConfig per_type = parse_hf_config(extra);
  CHECK(per_type.rope_scaling.type == parse_hf_config(t5).rope_scaling.type);
  CHECK(per_type.rope_theta == parse_hf_config(t5).rope_theta);
  CHECK(per_type.sliding_rope_theta == 10000.0f);
  const json written = per_type.to_hf_json();  // written back in the same form, read the same
  CHECK(written.contains("rope_parameters"));
  CHECK(!written.contains("rope_theta"));
  CHECK(parse_hf_config(written).sliding_rope_theta == 10000.0f);
  CHECK(parse_hf_config(written).rope_theta == per_type.rope_theta);
  CHECK(parse_hf_config(written).rope_scaling.factor == per_type.rope_scaling.factor);
  extra["rope_parameters"]["sliding_attention"] = t5["rope_parameters"];  // scaled: not supported
  CHECK_THROWS_WITH_AS(parse_hf_config(extra), doctest::Contains("scaled rope on sliding layers"), InputError);
  extra["rope_parameters"] = {{"full_attention", t5["rope_parameters"]}, {"chunked_attention", t5["rope_parameters"]}};
  CHECK_THROWS_WITH_AS(parse_hf_config(extra), doctest::Contains("'chunked_attention'"), InputError);

  const ModelConfig d = parse_hf_config(load("llama_default_rope"));
  CHECK(d.rope_theta == 10000.0f);
  CHECK(d.rope_scaling.type == "none");
  CHECK_NOTHROW(parse_hf_config(load("llama_every_field")));
  CHECK(parse_hf_config(load("mistral_window")).sliding_window == 4096);
  CHECK(parse_hf_config(load("qwen2_no_window")).sliding_window == 0);  // every layer full_attention
  CHECK(parse_hf_config(load("qwen2_window")).sliding_window == 64);
}

TEST_CASE("config: Gemma 2's soft-capping and alternating sliding layers") {
  // google/gemma-2-2b-it's config.json as transformers 4.x wrote it: no layer_types, the layers alternate
  json j = json::parse(R"({
    "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 2304, "num_hidden_layers": 26,
    "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 9216,
    "vocab_size": 256000, "max_position_embeddings": 8192, "rms_norm_eps": 1e-06, "rope_theta": 10000.0,
    "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256,
    "sliding_window": 4096, "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
    "cache_implementation": "hybrid", "attention_bias": false, "attention_dropout": 0.0, "bos_token_id": 2,
    "eos_token_id": [1, 107], "pad_token_id": 0, "torch_dtype": "float32"})");
  const ModelConfig c = parse_hf_config(j);
  CHECK(c.attn_logit_softcapping == 50.0f);
  CHECK(c.final_logit_softcapping == 30.0f);
  CHECK_FALSE(c.qk_norm);
  CHECK(c.layer_window(0) == 4096);  // layer 0 slides, layer 1 is global, and so on
  CHECK(c.layer_window(1) == 0);
  CHECK(c.layer_window(24) == 4096);
  CHECK(c.layer_window(25) == 0);
  CHECK(c.softmax_scale() == doctest::Approx(1.0 / 16));
  // Written back (transformers 5's form: layer_types), read the same.
  const json out = c.to_hf_json();
  CHECK(out["layer_types"].size() == 26);
  CHECK(out["attn_logit_softcapping"] == 50.0);
  CHECK(out["query_pre_attn_scalar"].is_number_integer());  // transformers 5 refuses 256.0
  const ModelConfig b = parse_hf_config(out);
  CHECK(b.sliding_layers == c.sliding_layers);
  CHECK(b.final_logit_softcapping == 30.0f);
  CHECK(b.to_hf_json() == out);
  // null is none; out of range is refused
  j["final_logit_softcapping"] = nullptr;
  CHECK(parse_hf_config(j).final_logit_softcapping == 0.0f);
  for (double bad : {-1.0, 1e9}) {
    j["attn_logit_softcapping"] = bad;
    CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("soft-capping"), InputError);
  }
}

TEST_CASE("config: a field llmctl does not know is refused by name, never ignored") {
  json j = smollm2_json();
  j["logit_scale"] = 0.5;  // Cohere's
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("field 'logit_scale'"), InputError);
  j["rope_partial"] = 0.5;
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("fields 'logit_scale', 'rope_partial'"), InputError);
  j = smollm2_json();  // read, and refused while llmctl does not apply it
  j["use_bidirectional_attention"] = true;
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("use_bidirectional_attention is not supported"),
                       InputError);
  j["use_bidirectional_attention"] = nullptr;
  CHECK_NOTHROW(parse_hf_config(j));
  j = smollm2_json();
  j["_name_or_path"] = "x";  // private bookkeeping, and generation defaults: known inert
  j["temperature"] = 0.7;
  j["auto_map"] = json::object();
  j["is_llama_config"] = true;  // what SmolLM2's own config.json carries (written by nanotron)
  j["rope_interleaved"] = false;
  j["transformers.js_config"] = json::object();
  CHECK_NOTHROW(parse_hf_config(j));
  j["rope_interleaved"] = true;
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("rope_interleaved"), InputError);
  j["rope_interleaved"] = false;
  j["layer_types"] = {"full_attention"};  // one entry for 30 layers
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("one entry for each"), InputError);
}

TEST_CASE("config: refusals") {
  json j = smollm2_json();
  j["architectures"] = {"GPT2LMHeadModel"};
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("GPT2LMHeadModel"), InputError);
  j = smollm2_json();
  j.erase("architectures");
  CHECK_THROWS_AS(parse_hf_config(j), InputError);
  j = smollm2_json();
  j.erase("hidden_size");
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("hidden_size"), InputError);
  j = smollm2_json();
  j["num_key_value_heads"] = 4;  // 9 heads are not a multiple of 4
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("num_key_value_heads"), InputError);
  j = smollm2_json();
  j["vocab_size"] = "many";
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("vocab_size"), InputError);
  j = smollm2_json();
  j["eos_token_id"] = 50000;
  CHECK_THROWS_WITH_AS(parse_hf_config(j), doctest::Contains("eos_token_id"), InputError);
  CHECK_THROWS_AS(parse_hf_config(json::array()), InputError);
}

TEST_CASE("config: to_hf_json round trip") {
  for (const char* arch : {"LlamaForCausalLM", "Qwen2ForCausalLM"}) {
    json j = smollm2_json();
    j["architectures"] = {arch};
    j.erase("model_type");
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", 32.0},
                         {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0},
                         {"original_max_position_embeddings", 8192}};
    ModelConfig a = parse_hf_config(j);
    json out = a.to_hf_json();
    CHECK(out["rms_norm_eps"].get<double>() == 1e-5);  // written as the short decimal
    CHECK(out["architectures"][0] == arch);
    CHECK(out["rope_scaling"]["rope_type"] == "llama3");
    ModelConfig b = parse_hf_config(out);
    CHECK(b.to_hf_json() == out);
    CHECK(b.model_type == a.model_type);
    CHECK(b.head_dim == a.head_dim);
    CHECK(b.attention_bias == a.attention_bias);
    CHECK(b.rope_scaling.factor == 32.0f);
  }
}

TEST_CASE("config: mixtures of experts (Qwen3-MoE, Qwen2-MoE, Mixtral), their layers and limits") {
  json j = smollm2_json();
  j["num_hidden_layers"] = 4;
  j["architectures"] = {"Qwen3MoeForCausalLM"};
  j["model_type"] = "qwen3_moe";
  j["num_experts"] = 16;
  j["num_experts_per_tok"] = 4;
  j["moe_intermediate_size"] = 64;
  j["norm_topk_prob"] = true;
  j["mlp_only_layers"] = {2};
  j["decoder_sparse_step"] = 1;
  j["router_aux_loss_coef"] = 0.001;  // training only
  ModelConfig c = parse_hf_config(j);
  CHECK(c.num_experts == 16);
  CHECK(c.experts_per_token == 4);
  CHECK(c.moe_renormalize);
  CHECK(c.qk_norm);
  CHECK((c.layer_is_moe(0) && c.layer_is_moe(1) && !c.layer_is_moe(2) && c.layer_is_moe(3)));
  // written back as read
  const ModelConfig back = parse_hf_config(c.to_hf_json());
  CHECK(back.num_experts == 16);
  CHECK(back.dense_layers == c.dense_layers);
  CHECK(back.moe_renormalize);
  // transformers 5 writes num_local_experts; decoder_sparse_step 2 keeps every other layer dense
  json v5 = j;
  v5.erase("num_experts");
  v5["num_local_experts"] = 8;
  v5.erase("mlp_only_layers");
  v5["decoder_sparse_step"] = 2;
  c = parse_hf_config(v5);
  CHECK(c.num_experts == 8);
  CHECK((!c.layer_is_moe(0) && c.layer_is_moe(1) && !c.layer_is_moe(2) && c.layer_is_moe(3)));

  json q2 = j;
  q2["architectures"] = {"Qwen2MoeForCausalLM"};
  q2["shared_expert_intermediate_size"] = 96;
  q2["qkv_bias"] = true;
  c = parse_hf_config(q2);
  CHECK(c.shared_expert_intermediate_size == 96);
  CHECK(c.attention_bias);

  json mx = smollm2_json();
  mx["architectures"] = {"MixtralForCausalLM"};
  mx["num_local_experts"] = 8;
  mx["num_experts_per_tok"] = 2;
  mx["router_jitter_noise"] = 0.0;
  c = parse_hf_config(mx);
  CHECK(c.moe_intermediate_size == c.intermediate_size);
  CHECK(c.moe_renormalize);
  CHECK(c.layer_is_moe(0));

  auto refused = [](json bad, const char* what) {
    CHECK_THROWS_WITH_AS(parse_hf_config(bad), doctest::Contains(what), InputError);
  };
  json b = j;
  b["num_experts_per_tok"] = 17;
  refused(b, "num_experts_per_tok = 17 must be in [1, num_experts = 16]");
  b = j;
  b["mlp_only_layers"] = {4};
  refused(b, "mlp_only_layers lists 4");
  b = j;
  b["num_experts"] = 5000;
  refused(b, "num_experts = 5000 is outside");
  b = j;
  b.erase("moe_intermediate_size");
  refused(b, "missing field 'moe_intermediate_size'");
  // a dense architecture does not take expert fields: it would run without them
  json llama = smollm2_json();
  llama["num_experts"] = 8;
  refused(llama, "'num_experts'");
}
