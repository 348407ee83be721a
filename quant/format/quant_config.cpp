// config.json "quantization_config" of the three checkpoint layouts: writing (the keys the reference
// tools write) and reading (untrusted: every field checked, anything not understood refused by name).
#include <cctype>
#include <cstdint>
#include <regex>
#include <stdexcept>

#include "quant/format/checkpoint_layout.h"

namespace llmctl::quant {

using nlohmann::json;

const char* quant_layout_name(QuantLayout l) {
  switch (l) {
    case QuantLayout::CompressedTensors: return "compressed-tensors";
    case QuantLayout::AutoAwqGemm: return "awq";
    case QuantLayout::Gptq: return "gptq";
  }
  return "?";
}

QuantLayout parse_quant_layout(const std::string& s) {
  if (s == "compressed-tensors") return QuantLayout::CompressedTensors;
  if (s == "awq") return QuantLayout::AutoAwqGemm;
  if (s == "gptq") return QuantLayout::Gptq;
  throw std::invalid_argument("unknown checkpoint format '" + s + "' (compressed-tensors, awq, gptq)");
}

const char* quantized_marker_suffix(QuantLayout l) {
  return l == QuantLayout::CompressedTensors ? "weight_packed" : "qweight";
}

const std::vector<std::string>& layout_tensor_suffixes(QuantLayout l) {
  static const std::vector<std::string> ct = {"weight_packed", "weight_scale", "weight_zero_point", "weight_shape",
                                              "weight_g_idx"};
  static const std::vector<std::string> awq = {"qweight", "qzeros", "scales"};
  static const std::vector<std::string> gptq = {"qweight", "qzeros", "scales", "g_idx"};
  return l == QuantLayout::CompressedTensors ? ct : l == QuantLayout::AutoAwqGemm ? awq : gptq;
}

namespace {
std::regex compile_pattern(const std::string& pat) {
  try {
    return std::regex(pat);
  } catch (const std::regex_error& e) {
    throw std::invalid_argument("ignore pattern 're:" + pat + "' is not a valid regular expression");
  }
}
}  // namespace

std::string QuantConfigInfo::label() const { return std::string(quant_layout_name(layout)) + " " + scheme.label(); }

bool QuantConfigInfo::ignores(const std::string& module) const {
  for (const std::string& pat : ignore) {
    if (pat.rfind("re:", 0) == 0) {
      // compressed-tensors matches with Python's re.match: anchored at the start only.
      if (std::regex_search(module, compile_pattern(pat.substr(3)), std::regex_constants::match_continuous)) return true;
    } else if (pat == module) {
      return true;
    }
  }
  return false;
}

namespace {

constexpr size_t kMaxIgnore = 4096, kMaxName = 1024;

[[noreturn]] void refuse(const std::string& what) {
  throw std::invalid_argument("quantization_config: " + what);
}

const json* find(const json& j, const char* key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

int64_t get_int(const json& j, const char* key, int64_t lo, int64_t hi, const json* dflt = nullptr) {
  const json* v = find(j, key);
  if (!v) v = dflt;
  if (!v) refuse(std::string("missing '") + key + "'");
  if (!v->is_number_integer()) refuse(std::string("'") + key + "' must be an integer, got " + v->dump());
  // An unsigned value past int64's range would wrap to a negative one: refused as written.
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(INT64_MAX))
    refuse(std::string("'") + key + "' = " + v->dump() + " is out of range");
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) refuse(std::string("'") + key + "' = " + std::to_string(x) + " is out of range");
  return x;
}

bool get_bool(const json& j, const char* key, bool dflt) {
  const json* v = find(j, key);
  if (!v) return dflt;
  if (!v->is_boolean()) refuse(std::string("'") + key + "' must be true or false, got " + v->dump());
  return v->get<bool>();
}

std::string get_str(const json& j, const char* key, const std::string& dflt) {
  const json* v = find(j, key);
  if (!v) return dflt;
  if (!v->is_string() || v->get_ref<const std::string&>().size() > kMaxName)
    refuse(std::string("'") + key + "' must be a short string");
  return v->get<std::string>();
}

std::vector<std::string> get_names(const json& j, const char* key) {
  std::vector<std::string> out;
  const json* v = find(j, key);
  if (!v) return out;
  if (!v->is_array() || v->size() > kMaxIgnore) refuse(std::string("'") + key + "' must be a list of module names");
  for (const json& s : *v) {
    if (!s.is_string() || s.get_ref<const std::string&>().size() > kMaxName)
      refuse(std::string("'") + key + "' holds something other than a module name");
    out.push_back(s.get<std::string>());
    if (out.back().rfind("re:", 0) == 0) compile_pattern(out.back().substr(3));  // refused now, not at use
  }
  return out;
}

// group_size as the formats spell it: positive, or -1 (per channel).
int check_group(int64_t g) {
  if (g != -1 && (g <= 0 || g > (int64_t(1) << 20))) refuse("group_size " + std::to_string(g) + " is not supported");
  return int(g);
}

int check_bits(int64_t b, const char* format) {
  if (b != 4 && b != 8)
    refuse(std::to_string(b) + "-bit weights are not supported in " + format + " (4 or 8 bits)");
  return int(b);
}

bool empty_or_null(const json* v) { return !v || (v->is_object() && v->empty()); }

QuantConfigInfo parse_compressed_tensors(const json& qc) {
  QuantConfigInfo info;
  info.layout = QuantLayout::CompressedTensors;
  const std::string status = get_str(qc, "quantization_status", "compressed");
  if (status != "compressed")
    refuse("quantization_status '" + status + "': only compressed checkpoints are supported (weights packed)");
  const std::string top_format = get_str(qc, "format", "pack-quantized");
  if (!empty_or_null(find(qc, "sparsity_config"))) refuse("sparse compressed-tensors checkpoints are not supported");
  if (!empty_or_null(find(qc, "transform_config"))) refuse("compressed-tensors transforms are not supported");
  const json* groups = find(qc, "config_groups");
  if (!groups || !groups->is_object() || groups->empty() || groups->size() > 64)
    refuse("compressed-tensors: 'config_groups' must be a non-empty object");
  bool first = true;
  for (const auto& [name, g] : groups->items()) {
    if (!g.is_object()) refuse("config group '" + name + "' is not an object");
    const std::string format = get_str(g, "format", top_format);
    if (format != "pack-quantized")
      refuse("compressed-tensors format '" + format + "' is not supported (only pack-quantized)");
    if (find(g, "input_activations") || find(g, "output_activations"))
      refuse("config group '" + name + "' quantizes activations; only weight-only (W4A16/W8A16) is supported");
    const json* w = find(g, "weights");
    if (!w || !w->is_object()) refuse("config group '" + name + "' has no 'weights'");
    const std::string type = get_str(*w, "type", "int");
    if (type != "int") refuse("weights of type '" + type + "' are not supported (int only)");
    if (find(*w, "dynamic") && !(w->at("dynamic").is_boolean() && !w->at("dynamic").get<bool>()))
      refuse("dynamic weight quantization is not supported");
    QuantScheme s;
    s.bits = check_bits(get_int(*w, "num_bits", 1, 64), "compressed-tensors");
    s.symmetric = get_bool(*w, "symmetric", true);
    const std::string strategy = get_str(*w, "strategy", "");
    if (strategy == "group") {
      s.group_size = check_group(get_int(*w, "group_size", 1, int64_t(1) << 20));
    } else if (strategy == "channel") {
      s.group_size = -1;
    } else {
      refuse("weight strategy '" + strategy + "' is not supported (group, channel)");
    }
    bool act_order = false;
    if (const json* a = find(*w, "actorder")) {
      if (a->is_boolean()) act_order = a->get<bool>();
      else if (a->is_string() && (*a == "weight" || *a == "static" || *a == "group" || *a == "dynamic")) act_order = true;
      else refuse("actorder " + a->dump() + " is not understood");
    }
    if (first) {
      info.scheme = s;
      info.act_order = act_order;
      first = false;
    } else if (s.bits != info.scheme.bits || s.group_size != info.scheme.group_size ||
               s.symmetric != info.scheme.symmetric) {
      refuse("config groups with different weight schemes are not supported");
    }
  }
  info.ignore = get_names(qc, "ignore");
  if (const json* kv = find(qc, "kv_cache_scheme")) {
    if (!kv->is_object() || kv->size() > 64) refuse("kv_cache_scheme must be an object");
    info.kv_cache_scheme = *kv;
  }
  return info;
}

QuantConfigInfo parse_awq(const json& qc) {
  QuantConfigInfo info;
  info.layout = QuantLayout::AutoAwqGemm;
  const json* bits = find(qc, "bits") ? find(qc, "bits") : find(qc, "w_bit");
  const json* group = find(qc, "group_size") ? find(qc, "group_size") : find(qc, "q_group_size");
  if (!bits || !bits->is_number_integer()) refuse("awq: 'bits' missing or not an integer");
  if (bits->get<int64_t>() != 4) refuse("awq: " + bits->dump() + "-bit weights are not supported (AutoAWQ GEMM is 4-bit)");
  info.scheme.bits = 4;
  if (!group || !group->is_number_integer()) refuse("awq: 'group_size' missing or not an integer");
  info.scheme.group_size = check_group(group->get<int64_t>());
  if (!get_bool(qc, "zero_point", true)) refuse("awq: checkpoints without zero points are not supported");
  info.scheme.symmetric = false;
  std::string version = get_str(qc, "version", "gemm");
  for (char& c : version) c = char(std::tolower(static_cast<unsigned char>(c)));
  if (version != "gemm") refuse("awq version '" + version + "' is not supported (only gemm)");
  info.ignore = get_names(qc, "modules_to_not_convert");
  return info;
}

QuantConfigInfo parse_gptq(const json& qc) {
  QuantConfigInfo info;
  info.layout = QuantLayout::Gptq;
  info.scheme.bits = check_bits(get_int(qc, "bits", 1, 64), "gptq");
  info.scheme.group_size = check_group(get_int(qc, "group_size", -1, int64_t(1) << 20));
  info.scheme.symmetric = get_bool(qc, "sym", true);
  info.act_order = get_bool(qc, "desc_act", false);
  const std::string fmt = get_str(qc, "checkpoint_format", get_str(qc, "format", "gptq"));
  if (fmt != "gptq") refuse("gptq checkpoint_format '" + fmt + "' is not supported (only gptq, v1)");
  const std::string pack = get_str(qc, "pack_dtype", "int32");
  if (pack != "int32") refuse("gptq pack_dtype '" + pack + "' is not supported (int32)");
  if (!get_bool(qc, "lm_head", false)) info.ignore.push_back("lm_head");
  return info;
}

}  // namespace

QuantConfigInfo parse_quantization_config(const json& qc) {
  if (!qc.is_object()) refuse("not a JSON object");
  const std::string method = get_str(qc, "quant_method", "");
  if (method.empty()) refuse("no 'quant_method'");
  if (method == "compressed-tensors") return parse_compressed_tensors(qc);
  if (method == "awq") return parse_awq(qc);
  if (method == "gptq") return parse_gptq(qc);
  refuse("quant_method '" + method + "' is not supported (compressed-tensors pack-quantized, awq gemm, gptq)");
}

json make_quantization_config(const QuantConfigInfo& info) {
  const QuantScheme& s = info.scheme;
  if (s.bits != 4 && s.bits != 8) refuse("bits must be 4 or 8");
  check_group(s.group_size);
  switch (info.layout) {
    case QuantLayout::CompressedTensors: {
      const bool channel = s.group_size <= 0;
      json weights = {{"actorder", info.act_order ? json("weight") : json(nullptr)},
                      {"block_structure", nullptr},
                      {"dynamic", false},
                      {"group_size", channel ? json(nullptr) : json(s.group_size)},
                      {"num_bits", s.bits},
                      {"observer", "minmax"},
                      {"observer_kwargs", json::object()},
                      {"scale_dtype", nullptr},
                      {"strategy", channel ? "channel" : "group"},
                      {"symmetric", s.symmetric},
                      {"type", "int"},
                      {"zp_dtype", s.symmetric ? json(nullptr) : json("torch.int8")}};  // as QuantizationArgs fills it in
      json group = {{"format", "pack-quantized"},
                    {"input_activations", nullptr},
                    {"output_activations", nullptr},
                    {"targets", json::array({"Linear"})},
                    {"weights", weights}};
      return {{"config_groups", {{"group_0", group}}},
              {"format", "pack-quantized"},
              {"global_compression_ratio", nullptr},
              {"ignore", info.ignore},
              {"kv_cache_scheme", info.kv_cache_scheme},
              {"quant_method", "compressed-tensors"},
              {"quantization_status", "compressed"},
              {"sparsity_config", json::object()},
              {"transform_config", json::object()},
              {"version", "0.19.0"}};
    }
    case QuantLayout::AutoAwqGemm:
      if (s.bits != 4) refuse("AutoAWQ GEMM holds 4-bit weights only");
      return {{"bits", 4},
              {"group_size", s.group_size},
              {"modules_to_not_convert", info.ignore.empty() ? json(nullptr) : json(info.ignore)},
              {"quant_method", "awq"},
              {"version", "gemm"},
              {"zero_point", true}};
    case QuantLayout::Gptq: {
      bool lm_head = true;
      for (const std::string& m : info.ignore) lm_head &= m != "lm_head";
      return {{"bits", s.bits},
              {"checkpoint_format", "gptq"},
              {"damp_percent", 0.01},
              {"desc_act", info.act_order},
              {"group_size", s.group_size},
              {"lm_head", lm_head},
              {"pack_dtype", "int32"},
              {"quant_method", "gptq"},
              {"static_groups", info.act_order},
              {"sym", s.symmetric},
              {"true_sequential", true}};
    }
  }
  refuse("unknown layout");
}

}  // namespace llmctl::quant
