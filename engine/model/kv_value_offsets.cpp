#include "engine/model/kv_value_offsets.h"

#include <cmath>

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"
#include "engine/model/config.h"

namespace llmctl {

namespace {
constexpr const char* kFormat = "llmctl.kv_cache_value_offsets";
constexpr int kVersion = 1;
// The largest model llmctl might meet has a few hundred layers of 8-16 kv heads of 128-256 dims:
// well under a million numbers, about 20 MB of text.
constexpr JsonLimits kLimits{size_t(64) << 20, 8};

// j[key] as `n` floats, each finite (and > 0 when `positive`); `where` names it in errors.
std::vector<float> floats(const nlohmann::json& j, size_t n, bool positive, const std::string& where) {
  LLM_REQUIRE(j.is_array() && j.size() == n) << where << " must be an array of " << n << " numbers";
  std::vector<float> out;
  out.reserve(n);
  for (const nlohmann::json& x : j) {
    LLM_REQUIRE(x.is_number()) << where << " holds " << x.dump() << ", not a number";
    const float f = float(x.get<double>());
    LLM_REQUIRE(std::isfinite(f) && (!positive || f > 0))
        << where << " holds " << x.dump() << "; it must be finite" << (positive ? " and > 0" : " (as an f32)");
    out.push_back(f);
  }
  return out;
}

int integer(const nlohmann::json& j, const char* key, const std::string& file) {
  LLM_REQUIRE(j.contains(key) && j[key].is_number_integer()) << file << ": '" << key << "' must be an integer";
  return j[key].get<int>();
}
}  // namespace

nlohmann::json kv_value_offsets_json(const std::vector<KvValueOffsets>& layers, int num_kv_heads, int head_dim) {
  nlohmann::json out = {{"format", kFormat},         {"version", kVersion},       {"num_layers", layers.size()},
                        {"num_kv_heads", num_kv_heads}, {"head_dim", head_dim}, {"layers", nlohmann::json::array()}};
  for (const KvValueOffsets& l : layers) {
    LLM_CHECK(l.v_scale.size() == size_t(num_kv_heads) && l.v_offset.size() == size_t(num_kv_heads) * head_dim)
        << "kv value offsets: " << l.v_scale.size() << " scales and " << l.v_offset.size() << " offsets for "
        << num_kv_heads << " kv heads of " << head_dim;
    nlohmann::json rows = nlohmann::json::array();
    for (int h = 0; h < num_kv_heads; ++h)
      rows.push_back(std::vector<float>(l.v_offset.begin() + h * head_dim, l.v_offset.begin() + (h + 1) * head_dim));
    out["layers"].push_back({{"v_scale", l.v_scale}, {"v_offset", rows}});
  }
  return out;
}

std::vector<KvValueOffsets> read_kv_value_offsets(const std::string& path, const ModelConfig& c) {
  const std::string file = "'" + path + "'";
  const nlohmann::json j = read_json_file_bounded(path, kLimits);
  LLM_REQUIRE(j.is_object() && j.value("format", std::string()) == kFormat)
      << file << " is not an llmctl KV value offsets file (its \"format\" must be \"" << kFormat << "\")";
  LLM_REQUIRE(integer(j, "version", file) == kVersion)
      << file << ": version " << j["version"].dump() << " (this llmctl reads version " << kVersion << ")";
  const int L = integer(j, "num_layers", file), H = integer(j, "num_kv_heads", file), D = integer(j, "head_dim", file);
  LLM_REQUIRE(L == c.num_layers && H == c.num_kv_heads && D == c.head_dim)
      << file << " is for " << L << " layers of " << H << " kv heads of dim " << D << "; the model has "
      << c.num_layers << " layers of " << c.num_kv_heads << " kv heads of dim " << c.head_dim;
  LLM_REQUIRE(j.contains("layers") && j["layers"].is_array() && j["layers"].size() == size_t(L))
      << file << ": \"layers\" must be an array of " << L << " entries";
  std::vector<KvValueOffsets> out(static_cast<size_t>(L));
  for (int i = 0; i < L; ++i) {
    const nlohmann::json& e = j["layers"][size_t(i)];
    const std::string at = file + ": layer " + std::to_string(i);
    LLM_REQUIRE(e.is_object() && e.contains("v_scale") && e.contains("v_offset"))
        << at << " must be an object with \"v_scale\" and \"v_offset\"";
    out[size_t(i)].v_scale = floats(e["v_scale"], size_t(H), true, at + " v_scale");
    const nlohmann::json& rows = e["v_offset"];
    LLM_REQUIRE(rows.is_array() && rows.size() == size_t(H)) << at << " v_offset must be " << H << " rows";
    for (int h = 0; h < H; ++h) {
      const std::vector<float> r = floats(rows[size_t(h)], size_t(D), false, at + " v_offset row " + std::to_string(h));
      out[size_t(i)].v_offset.insert(out[size_t(i)].v_offset.end(), r.begin(), r.end());
    }
  }
  return out;
}

}  // namespace llmctl
