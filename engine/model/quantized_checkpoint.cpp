#include "engine/model/quantized_checkpoint.h"

#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "engine/core/error.h"
#include "engine/core/mapped_file.h"
#include "engine/model/registry.h"
#include "engine/model/safetensors.h"
#include "quant/format/checkpoint_layout.h"

namespace llmctl {

namespace {

// One module's packed tensors, by suffix ("weight_packed", "scales", ...), as the unpacker reads them.
std::map<std::string, quant::PackedTensorView> views_of(const std::map<std::string, Tensor>& packed) {
  std::map<std::string, quant::PackedTensorView> v;
  for (const auto& [suffix, t] : packed)
    v[suffix] = {safetensors_dtype_name(t.dtype), t.shape, static_cast<const uint8_t*>(t.data), t.nbytes()};
  return v;
}

// A module without a g_idx (or with a plain one) kept quantized, unpacked into group-affine form
// when the weight loader first reads it: its packed tensors (views into the mapped files, kept alive
// here) are read, and then released from resident memory, only then. With its columns in their own
// order every layout converts, so keeping it needs no unpacking first (an act-order g_idx can leave
// groups uneven, which only the whole unpacking finds). A malformed tensor is found by the decoding,
// as an InputError naming it.
QuantizedEntry deferred_module(const Checkpoint& ck, const quant::QuantConfigInfo& info, const std::string& prefix,
                               int64_t n, int64_t k, std::map<std::string, Tensor> packed) {
  const std::string what = "'" + ck.source_path + "': " + info.label() + " weight '" + prefix + "'";
  // A module of [rows, cols] from these views (all of it, or a cut), in group-affine form.
  auto unpack = [info, what](int64_t rows, int64_t cols, const std::map<std::string, quant::PackedTensorView>& views) {
    std::optional<quant::GroupAffineWeight> kept;
    try {
      kept = quant::group_affine_from_quantized(quant::unpack_linear_weight(info.layout, info, rows, cols, views),
                                                nullptr);
    } catch (const std::invalid_argument& e) {
      LLM_THROW() << what << ": " << e.what();
    }
    LLM_CHECK(kept) << what << ": no group-affine form, though it has no g_idx";
    return std::move(*kept);
  };
  auto packed_ptr = std::make_shared<const std::map<std::string, Tensor>>(std::move(packed));
  auto release = [packed_ptr] {
    for (const auto& [suffix, t] : *packed_ptr) release_mapped_pages(t.data, t.nbytes());
  };
  auto decode = [unpack, release, packed_ptr, n, k] {
    quant::GroupAffineWeight w = unpack(n, k, views_of(*packed_ptr));
    release();
    return w;
  };
  // A tensor-parallel rank's rows alone: the packed tensors cut to them first, so a rank unpacks
  // (and holds) only its share; where the layout's packing cannot be cut there, the whole module.
  auto decode_rows = [info, unpack, release, packed_ptr, n, k](const std::vector<quant::IndexRange>& ranges) {
    std::vector<std::vector<uint8_t>> storage;
    const auto cut = quant::slice_linear_rows(info.layout, info, n, k, views_of(*packed_ptr), ranges, storage);
    int64_t rows = 0;
    for (const auto& r : ranges) rows += r.second;
    quant::GroupAffineWeight w =
        cut ? unpack(rows, k, *cut) : quant::select_rows(unpack(n, k, views_of(*packed_ptr)), ranges);
    release();
    return w;
  };
  // The same for a row-parallel rank's input columns: the tensors cut to the whole groups (or packed
  // int32s) that hold them, unpacked, and the columns taken from that.
  auto decode_columns = [info, unpack, release, packed_ptr, n, k](const std::vector<quant::IndexRange>& ranges) {
    const int64_t unit = quant::linear_column_unit(info.layout, info);
    std::optional<quant::ColumnCover> cover;
    if (unit > 0) cover = quant::cover_columns(ranges, unit, k);
    std::vector<std::vector<uint8_t>> storage;
    std::optional<std::map<std::string, quant::PackedTensorView>> cut;
    if (cover) cut = quant::slice_linear_columns(info.layout, info, n, k, views_of(*packed_ptr), cover->cover, storage);
    quant::GroupAffineWeight w;
    if (cut) {
      int64_t cols = 0;
      for (const auto& r : cover->cover) cols += r.second;
      w = quant::select_columns(unpack(n, cols, *cut), cover->within);
    } else {
      w = quant::select_columns(unpack(n, k, views_of(*packed_ptr)), ranges);
    }
    release();
    return w;
  };
  return QuantizedEntry::deferred(what, n, k, std::move(decode), std::move(decode_rows), std::move(decode_columns));
}

}  // namespace

void read_quantized_linears(Checkpoint& ck, const nlohmann::json& config_json, bool keep_quantized) {
  if (!config_json.is_object() || !config_json.contains("quantization_config") ||
      config_json["quantization_config"].is_null())
    return;
  quant::QuantConfigInfo info;
  try {
    info = quant::parse_quantization_config(config_json["quantization_config"]);
  } catch (const std::invalid_argument& e) {
    LLM_THROW() << "'" << ck.source_path << "': config.json: " << e.what();
  }
  ck.config.source_quantization = info;

  // The dense shape of every linear the model reads, by module prefix.
  std::map<std::string, std::vector<int64_t>> linear_shapes;
  for (const WeightSpec& s : model_tensor_specs(ck.config)) {
    const std::string suffix = ".weight";
    if (!s.norm && s.shape.size() == 2 && s.name.size() > suffix.size() &&
        s.name.compare(s.name.size() - suffix.size(), suffix.size(), suffix) == 0)
      linear_shapes[s.name.substr(0, s.name.size() - suffix.size())] = s.shape;
  }

  const std::string marker = std::string(".") + quant::quantized_marker_suffix(info.layout);
  std::vector<std::string> modules;
  for (const auto& [name, t] : ck.tensors)
    if (name.size() > marker.size() && name.compare(name.size() - marker.size(), marker.size(), marker) == 0)
      modules.push_back(name.substr(0, name.size() - marker.size()));
  LLM_REQUIRE(!modules.empty()) << "'" << ck.source_path << "': config.json declares " << info.label()
                                << " quantization, but no tensor is named '*" << marker << "'";

  int64_t dense_count = 0;  // kept dense although keep_quantized, and the first reason
  std::string why_dense;
  for (const std::string& prefix : modules) {
    auto shape = linear_shapes.find(prefix);
    LLM_REQUIRE(shape != linear_shapes.end())
        << "'" << ck.source_path << "': quantized tensor '" << prefix << marker << "' is not a linear layer of this "
        << ck.config.architecture << " model";
    LLM_REQUIRE(!ck.has(prefix + ".weight"))
        << "'" << ck.source_path << "': module '" << prefix << "' is both quantized and dense ('" << prefix << ".weight')";
    std::map<std::string, Tensor> packed;  // by suffix
    std::vector<std::string> names;
    for (const std::string& suffix : quant::layout_tensor_suffixes(info.layout)) {
      auto it = ck.tensors.find(prefix + "." + suffix);
      if (it == ck.tensors.end()) continue;
      packed[suffix] = it->second;
      names.push_back(it->first);
    }
    const int64_t n = shape->second[0], k = shape->second[1];
    bool plain_columns = true;  // no g_idx, or a plain one: the module converts without unpacking first
    for (const auto& [suffix, v] : views_of(packed))  // anything but a plain g_idx is left to the unpacker
      if (suffix == "g_idx" || suffix == "weight_g_idx")
        plain_columns &= quant::plain_g_idx(v, k, info.scheme.group_size);
    if (keep_quantized && plain_columns) {
      ck.quantized[prefix + ".weight"] = deferred_module(ck, info, prefix, n, k, std::move(packed));
      for (const std::string& name : names) ck.tensors.erase(name);  // the decoder holds them
      continue;
    }
    quant::QuantizedLinear q;
    std::optional<quant::GroupAffineWeight> kept;
    try {
      q = quant::unpack_linear_weight(info.layout, info, n, k, views_of(packed));
      std::string why;
      if (keep_quantized && !(kept = quant::group_affine_from_quantized(q, &why))) {
        if (why_dense.empty()) why_dense = why;
        ++dense_count;
      }
    } catch (const std::invalid_argument& e) {
      LLM_THROW() << "'" << ck.source_path << "': " << info.label() << " weight '" << prefix << "': " << e.what();
    }
    for (const std::string& name : names) {  // unpacked into q: drop the packed pages from memory
      const Tensor& t = ck.tensors.at(name);
      release_mapped_pages(t.data, t.nbytes());
      ck.tensors.erase(name);
    }
    if (kept) {
      ck.quantized[prefix + ".weight"] = std::move(*kept);
      continue;
    }
    const std::vector<float> dense = quant::dequantize(q);
    Tensor w = Tensor::empty_host(DType::F32, {n, k});
    std::memcpy(w.data, dense.data(), dense.size() * sizeof(float));
    ck.tensors[prefix + ".weight"] = std::move(w);
  }
  if (dense_count)
    ck.notes.push_back("'" + ck.source_path + "': " + std::to_string(dense_count) + " of " +
                       std::to_string(modules.size()) + " " + info.label() +
                       " linear weights are loaded dense (dequantized to f32): " + why_dense +
                       " has no group-affine form the quantized kernels run");
}

}  // namespace llmctl
