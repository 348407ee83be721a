// llmctl_random_model: writes an HF directory with a Llama of random f32 weights, shaped like a
// base model's config.json with some sizes changed, and the base's tokenizer files: models of
// shapes no published checkpoint has (e.g. heads that divide by 2 for a tensor-parallel benchmark).
// Usage: llmctl_random_model BASE_HF_DIR OUT_DIR [--hidden N] [--heads N] [--kv-heads N] [--layers N]
//                            [--intermediate N] [--seed S] [--stddev F] [--set KEY=JSON]...
// head_dim becomes hidden / heads unless --set gives it; --set sets any config.json key to a JSON
// value (e.g. --set 'layer_types=["sliding_attention","full_attention"]'), after the size options.
// The vocabulary is the base's (its tokenizer is copied).
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "engine/model/random_checkpoint.h"
#include "engine/model/registry.h"
#include "engine/model/safetensors.h"

using namespace llmctl;
namespace fs = std::filesystem;

int main(int argc, char** argv) try {
  LLM_REQUIRE(argc >= 3) << "usage: llmctl_random_model BASE_HF_DIR OUT_DIR [--hidden N] [--heads N] [--kv-heads N] "
                            "[--layers N] [--intermediate N] [--seed S] [--stddev F] [--set KEY=JSON]...";
  const fs::path base = argv[1], out = argv[2];
  std::ifstream in(base / "config.json");
  LLM_REQUIRE(in) << "cannot read " << (base / "config.json").string();
  nlohmann::json cfg = nlohmann::json::parse(in);
  uint32_t seed = 1;
  float stddev = 0.02f;
  nlohmann::json sets = nlohmann::json::object();
  const std::pair<const char*, const char*> keys[] = {{"--hidden", "hidden_size"},
                                                      {"--heads", "num_attention_heads"},
                                                      {"--kv-heads", "num_key_value_heads"},
                                                      {"--layers", "num_hidden_layers"},
                                                      {"--intermediate", "intermediate_size"}};
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    bool known = false;
    for (const auto& [flag, key] : keys)
      if (k == flag) cfg[key] = std::stoi(v), known = true;
    if (k == "--seed") seed = uint32_t(std::stoul(v)), known = true;
    if (k == "--stddev") stddev = std::stof(v), known = true;
    if (k == "--set") {
      const size_t eq = v.find('=');
      LLM_REQUIRE(eq != std::string::npos && eq > 0) << "--set expects KEY=JSON, got '" << v << "'";
      sets[v.substr(0, eq)] = nlohmann::json::parse(v.substr(eq + 1));
      known = true;
    }
    LLM_REQUIRE(known) << "unknown option " << k;
  }
  cfg["head_dim"] = cfg["hidden_size"].get<int>() / cfg["num_attention_heads"].get<int>();
  for (const auto& [key, value] : sets.items()) cfg[key] = value;
  cfg["torch_dtype"] = "float32";
  const ModelConfig c = parse_hf_config(cfg);
  c.validate();
  const Checkpoint ck = random_checkpoint(c, seed, stddev);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const WeightSpec& s : model_tensor_specs(c))
    if (ck.has(s.name)) tensors.emplace_back(s.name, ck.get(s.name));
  fs::create_directories(out);
  const ShardedWrite w = write_sharded_safetensors(out.string(), tensors, 2000000000);
  std::ofstream(out / "config.json") << cfg.dump(2) << "\n";
  for (const char* f : {"tokenizer.json", "tokenizer_config.json", "tokenizer.model", "special_tokens_map.json",
                        "generation_config.json"})
    if (fs::exists(base / f)) fs::copy_file(base / f, out / f, fs::copy_options::overwrite_existing);
  std::cout << out.string() << ": " << tensors.size() << " tensors, " << w.total_bytes / 1e6 << " MB in " << w.num_shards
            << " shard(s)\n";
  return 0;
} catch (const std::exception& e) {
  std::cerr << "llmctl_random_model: error: " << e.what() << "\n";
  return 1;
}
