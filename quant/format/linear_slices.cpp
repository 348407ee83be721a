// slice_linear_rows / slice_linear_columns (checkpoint_layout.h): a quantized module's packed
// tensors cut to some of its output rows or input columns, so that a tensor-parallel rank unpacks
// only its own. Each layout keeps output rows (N) on one axis of each tensor, plain or packed
// 32 / bits to an int32:
//   compressed-tensors  weight_packed [N, words], weight_scale [N, G], weight_zero_point [N, G] (I8)
//                       or [ceil(N * bits / 32), G] (packed rows), weight_shape rewritten, g_idx as is
//   AWQ                 qweight [K, N / 8], qzeros [G, N / 8] (packed rows), scales [G, N]
//   GPTQ                qweight [K / per, N], qzeros [G, N / per] (packed rows), scales [G, N], g_idx
// and input columns (K) on the other axis of the codes (packed into int32s for compressed-tensors
// and GPTQ) and, a group to an element, of the scales and zero points (which a per-channel module
// keeps whole).
// A packed axis can only be cut on whole int32s (a partly used last one only at the end of the
// last range), and columns only on whole groups: ranges that are not are refused (nullopt), and the
// caller unpacks the whole module. So is a weight_shape that does not say [N, K] (the whole
// module's unpacking reports it).
#include <cstring>
#include <stdexcept>

#include "quant/format/checkpoint_layout.h"

namespace llmctl::quant {

namespace {

using Views = std::map<std::string, PackedTensorView>;

// The rows `ranges` of axis `axis` (0 or 1) of a 2-d tensor, `per` rows an element (1: plain);
// nullopt when a range does not fall on whole elements or the tensor is not 2-d / too small.
std::optional<std::vector<uint8_t>> cut(const PackedTensorView& v, int axis, int per, int64_t n,
                                        const std::vector<IndexRange>& ranges, std::vector<int64_t>& shape) {
  if (v.shape.size() != 2) return std::nullopt;
  const size_t esize = packed_dtype_size(v.dtype);
  const int64_t rows = v.shape[0], cols = v.shape[1];
  if (size_t(rows * cols) * esize != v.nbytes || v.shape[size_t(axis)] != (n + per - 1) / per) return std::nullopt;
  std::vector<std::pair<int64_t, int64_t>> at;  // element ranges along the axis
  int64_t kept = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const auto& [begin, length] = ranges[i];
    // A packed axis may end in a partly used element, if nothing comes after it.
    const bool to_end = begin + length == n && i + 1 == ranges.size();
    if (begin % per != 0 || (length % per != 0 && !to_end)) return std::nullopt;
    const int64_t e0 = begin / per, e1 = to_end ? (n + per - 1) / per : (begin + length) / per;
    at.emplace_back(e0, e1 - e0);
    kept += e1 - e0;
  }
  std::vector<uint8_t> out;
  if (axis == 0) {
    out.reserve(size_t(kept * cols) * esize);
    for (const auto& [e0, count] : at)
      out.insert(out.end(), v.data + size_t(e0 * cols) * esize, v.data + size_t((e0 + count) * cols) * esize);
    shape = {kept, cols};
  } else {
    out.reserve(size_t(rows * kept) * esize);
    for (int64_t r = 0; r < rows; ++r)
      for (const auto& [e0, count] : at)
        out.insert(out.end(), v.data + size_t(r * cols + e0) * esize, v.data + size_t(r * cols + e0 + count) * esize);
    shape = {rows, kept};
  }
  return out;
}

// compressed-tensors' weight_shape tensor [2] of I64 for a module of [n, k], its bytes in storage.
PackedTensorView shape_view(int64_t n, int64_t k, std::vector<std::vector<uint8_t>>& storage) {
  const int64_t s[2] = {n, k};
  storage.emplace_back(reinterpret_cast<const uint8_t*>(s), reinterpret_cast<const uint8_t*>(s) + sizeof s);
  return {"I64", {2}, storage.back().data(), sizeof s};
}

// Whether compressed-tensors' weight_shape tensor says [n, k]. A cut writes its own, so it must
// not replace a wrong one: the whole module's unpacking then refuses it, as on a single rank.
bool says_shape(const PackedTensorView& v, int64_t n, int64_t k) {
  try {
    return read_int_any(v, "weight_shape") == std::vector<int64_t>{n, k};
  } catch (const std::invalid_argument&) {
    return false;
  }
}

}  // namespace

bool plain_g_idx(const PackedTensorView& v, int64_t k, int group) {
  if (v.dtype != "I32" || v.shape != std::vector<int64_t>{k} || v.nbytes != size_t(k) * 4) return false;
  for (int64_t c = 0; c < k; ++c) {
    int32_t g;
    std::memcpy(&g, v.data + c * 4, 4);
    if (g != (group <= 0 ? 0 : c / group)) return false;
  }
  return true;
}

std::optional<Views> slice_linear_rows(QuantLayout layout, const QuantConfigInfo& info, int64_t n, int64_t k,
                                       const Views& by, const std::vector<IndexRange>& ranges,
                                       std::vector<std::vector<uint8_t>>& storage) {
  const int per = 32 / info.scheme.bits;
  int64_t rows = 0;
  for (const auto& [begin, length] : ranges) {
    if (begin < 0 || length <= 0 || begin + length > n) return std::nullopt;
    rows += length;
  }
  if (rows == 0 || (n % per != 0 && layout != QuantLayout::CompressedTensors)) return std::nullopt;
  Views out;
  for (const auto& [suffix, v] : by) {
    int axis = 0, pack = 1;
    if (layout == QuantLayout::CompressedTensors) {
      if (suffix == "weight_g_idx") {
        out[suffix] = v;
        continue;
      }
      if (suffix == "weight_shape") {  // [n, k] again, as the rows' module
        if (!says_shape(v, n, k)) return std::nullopt;
        out[suffix] = shape_view(rows, k, storage);
        continue;
      }
      if (suffix == "weight_zero_point" && v.dtype != "I8") pack = per;
      else if (suffix != "weight_packed" && suffix != "weight_scale" && suffix != "weight_zero_point")
        return std::nullopt;
    } else {
      if (suffix == "g_idx") {
        out[suffix] = v;
        continue;
      }
      axis = 1;
      if (suffix == "qzeros" || (suffix == "qweight" && layout == QuantLayout::AutoAwqGemm)) pack = per;
      else if (suffix != "qweight" && suffix != "scales") return std::nullopt;
    }
    std::vector<int64_t> shape;
    std::optional<std::vector<uint8_t>> bytes = cut(v, axis, pack, n, ranges, shape);
    if (!bytes) return std::nullopt;
    storage.push_back(std::move(*bytes));
    out[suffix] = {v.dtype, shape, storage.back().data(), storage.back().size()};
  }
  return out;
}

int64_t linear_column_unit(QuantLayout layout, const QuantConfigInfo& info) {
  const int64_t pack = layout == QuantLayout::AutoAwqGemm ? 1 : 32 / info.scheme.bits;  // codes per K element
  const int64_t group = info.scheme.group_size;
  if (group <= 0) return pack;
  return group % pack == 0 ? group : 0;
}

std::optional<Views> slice_linear_columns(QuantLayout layout, const QuantConfigInfo& info, int64_t n, int64_t k,
                                          const Views& by, const std::vector<IndexRange>& ranges,
                                          std::vector<std::vector<uint8_t>>& storage) {
  const int per = 32 / info.scheme.bits, group = info.scheme.group_size;
  const bool per_channel = group <= 0;
  const int64_t unit = linear_column_unit(layout, info);
  int64_t cols = 0;
  for (const auto& [begin, length] : ranges) {
    if (begin < 0 || length <= 0 || begin + length > k) return std::nullopt;
    cols += length;
  }
  if (cols == 0 || unit == 0) return std::nullopt;
  Views out;
  for (const auto& [suffix, v] : by) {
    int axis = 0, pack = 1;  // the K axis, and K indices per element along it
    bool keep = false;       // per-channel scales and zero points: one group, whole
    if (layout == QuantLayout::CompressedTensors) {
      if (suffix == "weight_g_idx") {
        if (!plain_g_idx(v, k, group)) return std::nullopt;
        continue;
      }
      if (suffix == "weight_shape") {  // [n, k] again, as the columns' module
        if (!says_shape(v, n, k)) return std::nullopt;
        out[suffix] = shape_view(n, cols, storage);
        continue;
      }
      axis = 1;
      if (suffix == "weight_packed") pack = per;
      else if (suffix == "weight_scale" || suffix == "weight_zero_point") {
        keep = per_channel;
        pack = group;
      } else {
        return std::nullopt;
      }
    } else {
      if (suffix == "g_idx") {
        if (!plain_g_idx(v, k, group)) return std::nullopt;
        continue;
      }
      if (suffix == "qweight") pack = layout == QuantLayout::Gptq ? per : 1;
      else if (suffix == "qzeros" || suffix == "scales") {
        keep = per_channel;
        pack = group;
      } else {
        return std::nullopt;
      }
    }
    if (keep) {
      out[suffix] = v;
      continue;
    }
    std::vector<int64_t> shape;
    std::optional<std::vector<uint8_t>> bytes = cut(v, axis, pack, k, ranges, shape);
    if (!bytes) return std::nullopt;
    storage.push_back(std::move(*bytes));
    out[suffix] = {v.dtype, shape, storage.back().data(), storage.back().size()};
  }
  return out;
}

}  // namespace llmctl::quant
