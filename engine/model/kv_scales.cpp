#include "engine/model/kv_scales.h"

#include <cmath>
#include <regex>

#include "engine/core/error.h"
#include "engine/model/checkpoint.h"

namespace llmctl {

namespace {
std::string scale_name(int layer, char kv) {
  return "model.layers." + std::to_string(layer) + ".self_attn." + kv + "_scale";
}

std::vector<float> read_scale(const Checkpoint& ck, const std::string& name, int num_kv_heads) {
  const Tensor& t = ck.get(name);
  const bool per_tensor = t.shape.empty() || t.shape == std::vector<int64_t>{1};
  LLM_REQUIRE(per_tensor || t.shape == std::vector<int64_t>{num_kv_heads})
      << "checkpoint '" << ck.source_path << "': " << name << " has shape " << t.shape_str()
      << ", expected [], [1] or [" << num_kv_heads << "] (num_key_value_heads)";
  LLM_REQUIRE(t.dtype == DType::F32 || t.dtype == DType::F16 || t.dtype == DType::BF16)
      << "checkpoint '" << ck.source_path << "': " << name << " has dtype " << dtype_name(t.dtype)
      << ", expected f32, f16 or bf16";
  const Tensor f = convert_host(t, DType::F32);
  std::vector<float> s(size_t(num_kv_heads), f.ptr<float>()[0]);
  if (!per_tensor) s.assign(f.ptr<float>(), f.ptr<float>() + num_kv_heads);
  for (float x : s)
    LLM_REQUIRE(std::isfinite(x) && x > 0) << "checkpoint '" << ck.source_path << "': " << name << " holds " << x
                                           << "; a KV cache scale must be finite and > 0";
  return s;
}
}  // namespace

bool is_kv_scale_name(const std::string& name) {
  static const std::regex re(R"(model\.layers\.\d+\.self_attn\.[kv]_scale)");
  return std::regex_match(name, re);
}

std::vector<KvScales> load_kv_scales(const Checkpoint& ck) {
  const ModelConfig& c = ck.config;
  int found = 0;
  for (const auto& [name, t] : ck.tensors) found += is_kv_scale_name(name);
  if (found == 0) return {};
  std::vector<KvScales> out(size_t(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    LLM_REQUIRE(ck.has(scale_name(i, 'k')) && ck.has(scale_name(i, 'v')))
        << "checkpoint '" << ck.source_path << "' has KV cache scales for some layers but not "
        << (ck.has(scale_name(i, 'k')) ? scale_name(i, 'v') : scale_name(i, 'k'));
    out[size_t(i)].k = read_scale(ck, scale_name(i, 'k'), c.num_kv_heads);
    out[size_t(i)].v = read_scale(ck, scale_name(i, 'v'), c.num_kv_heads);
  }
  LLM_REQUIRE(found == 2 * c.num_layers) << "checkpoint '" << ck.source_path << "' has " << found
                                         << " KV cache scales for " << c.num_layers << " layers (expected "
                                         << 2 * c.num_layers << ")";
  return out;
}

}  // namespace llmctl
