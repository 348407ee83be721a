#include "engine/model/weights/load_weights.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "engine/core/error.h"
#include "engine/core/mapped_file.h"
#include "engine/model/weights/shard.h"
#include "quant/format/half_float.h"

namespace llmctl {

namespace {

// A quantized part as a dense f32 host tensor [N, K].
Tensor dequantized_tensor(const quant::GroupAffineWeight& w) {
  const std::vector<float> v = quant::dequantize(w);
  Tensor t = Tensor::empty_host(DType::F32, {w.n, w.k});
  std::memcpy(t.data, v.data(), v.size() * sizeof(float));
  return t;
}

bool exact_in_f16(const std::vector<float>& v) {
  for (float x : v) {
    const float back = quant::half_bits_to_f32(quant::f32_to_half_bits(x));
    if (std::memcmp(&back, &x, sizeof x) != 0) return false;  // NaN, out of range, or rounded
  }
  return true;
}

Tensor host_tensor(DType dtype, const std::vector<int64_t>& shape, const void* data) {
  Tensor t = Tensor::empty_host(dtype, shape);
  std::memcpy(t.data, data, t.nbytes());
  return t;
}

Tensor scale_tensor(const std::vector<float>& v, int64_t n, int64_t g, bool f16) {
  if (!f16) return host_tensor(DType::F32, {n, g}, v.data());
  std::vector<uint16_t> h(v.size());
  for (size_t i = 0; i < v.size(); ++i) h[i] = quant::f32_to_half_bits(v[i]);
  return host_tensor(DType::F16, {n, g}, h.data());
}

// Once a weight is loaded as a copy (a tensor-parallel slice, another dtype, a device upload), the
// checkpoint pages of its parts leave this process's resident memory (release_mapped_pages); a
// part the loaded tensor is a view of stays.
void release_sources(const Checkpoint& ck, const WeightSource& src, const Tensor& loaded) {
  const auto* l = static_cast<const uint8_t*>(loaded.data);
  for (const std::string& n : src.parts) {
    auto it = ck.tensors.find(n);
    if (it == ck.tensors.end()) continue;
    const auto* b = static_cast<const uint8_t*>(it->second.data);
    if (loaded.device == Device::CPU && l >= b && l < b + it->second.nbytes()) continue;
    release_mapped_pages(b, it->second.nbytes());
  }
}

// Frees the canonical forms of src's quantized parts once the loader holds its own copy of the
// weight (this rank's slice, or the dense weight made from them), when the checkpoint is consumed
// by one model (Checkpoint::release_after_upload). The checkpoint is the caller's own, non-const
// object: its loader reads it through a const reference.
void release_quantized_sources(const Checkpoint& ck, const WeightSource& src) {
  if (!ck.release_after_upload) return;
  for (const std::string& n : src.parts) {
    auto it = ck.quantized.find(n);
    if (it != ck.quantized.end()) const_cast<QuantizedEntry&>(it->second).release();
  }
}

// Whether src is one quantized part already released: gather_quantized_shard took its weight.
bool taken(const Checkpoint& ck, const WeightSource& src) {
  if (src.parts.size() != 1) return false;
  auto it = ck.quantized.find(src.parts[0]);
  return it != ck.quantized.end() && it->second.released();
}

// A part released by release_quantized_sources, read again, is refused by name (a loader bug).
void require_unreleased(const std::string& name, const QuantizedEntry& e) {
  LLM_CHECK(!e.released()) << "quantized weight '" << name << "' was already loaded and released "
                           << "(Checkpoint::release_after_upload): a checkpoint built for one model was read twice";
}

// A part's weight, decoded if deferred.
const quant::GroupAffineWeight& quantized_part(const std::string& name, const QuantizedEntry& e) {
  require_unreleased(name, e);
  return e.weight();
}

// A split by output rows (column-parallel, vocab-parallel): this rank's rows of each part, in the
// fused order, each part decoding only those rows when it can (QuantizedEntry::rows), then joined.
// The same weight as concat_rows of the whole parts sliced by shard_quantized: the rank's
// segments run in increasing order, so taking them part by part keeps their order.
std::optional<quant::GroupAffineWeight> rank_rows(const std::vector<const QuantizedEntry*>& entries,
                                                  const ShardSpec& spec, std::string* why_not) {
  int64_t total = 0;
  for (const QuantizedEntry* e : entries) total += e->n();
  const std::vector<ShardSegment> segs = shard_segments(total, spec);
  std::vector<quant::GroupAffineWeight> pieces;
  int64_t offset = 0;
  for (const QuantizedEntry* e : entries) {
    std::vector<quant::IndexRange> mine;  // this part's rows among the segments, part-local
    for (const ShardSegment& s : segs) {
      const int64_t b = std::max(s.begin, offset), end = std::min(s.begin + s.length, offset + e->n());
      if (b < end) mine.emplace_back(b - offset, end - b);
    }
    if (!mine.empty()) pieces.push_back(e->rows(mine));
    offset += e->n();
  }
  LLM_CHECK(!pieces.empty()) << "a tensor-parallel rank with no rows of a weight";
  if (pieces.size() == 1) return std::move(pieces[0]);
  std::vector<const quant::GroupAffineWeight*> ptrs;
  for (const quant::GroupAffineWeight& p : pieces) ptrs.push_back(&p);
  return quant::concat_rows(ptrs, why_not);
}

// A split by input columns (row-parallel): this rank's columns, decoded alone when the part can
// (QuantizedEntry::columns). nullopt for act-order, whose input columns are permuted across groups.
std::optional<quant::GroupAffineWeight> rank_columns(const QuantizedEntry& e, const ShardSpec& spec,
                                                     std::string* why_not) {
  std::vector<quant::IndexRange> mine;
  for (const ShardSegment& s : shard_segments(e.k(), spec)) mine.emplace_back(s.begin, s.length);
  try {
    return e.columns(mine);
  } catch (const std::invalid_argument&) {  // select_columns: an act-order weight
    if (why_not)
      *why_not = "act-order (input columns permuted into groups) cannot be split by input columns over " +
                 std::to_string(spec.world) + " tensor-parallel ranks";
    return std::nullopt;
  }
}

}  // namespace

Tensor gather_shard(const Checkpoint& ck, const WeightSource& src, const ShardSpec& spec) {
  LLM_CHECK(!src.parts.empty()) << "weight " << src.name << " names no checkpoint tensors";
  std::vector<Tensor> parts;
  parts.reserve(src.parts.size());
  bool dequantized = false;
  for (const std::string& n : src.parts) {
    auto q = ck.quantized.find(n);
    dequantized |= q != ck.quantized.end();
    parts.push_back(q != ck.quantized.end() ? dequantized_tensor(quantized_part(n, q->second)) : ck.get(n));
  }
  if (dequantized)  // fused with dense parts: all in f32, the dtype the dequantized ones have
    for (Tensor& t : parts)
      if (t.dtype != DType::F32) t = convert_host(t, DType::F32);
  return shard_slice(parts, spec);
}

std::optional<quant::GroupAffineWeight> gather_quantized_shard(const Checkpoint& ck, const WeightSource& src,
                                                               const ShardSpec& spec, std::string* why_not) {
  LLM_CHECK(!src.parts.empty()) << "weight " << src.name << " names no checkpoint tensors";
  std::vector<const QuantizedEntry*> entries;
  for (const std::string& n : src.parts) {
    auto q = ck.quantized.find(n);
    if (q == ck.quantized.end()) {
      if (why_not) *why_not = "'" + n + "' is dense and the fused parts must all be quantized";
      return std::nullopt;
    }
    require_unreleased(n, q->second);
    entries.push_back(&q->second);
  }
  if (spec.world > 1 && (spec.kind == ShardKind::Column || spec.kind == ShardKind::Vocab))
    return rank_rows(entries, spec, why_not);
  if (spec.world > 1 && spec.kind == ShardKind::Row && entries.size() == 1)
    return rank_columns(*entries[0], spec, why_not);
  if (entries.size() == 1 && ck.release_after_upload &&
      shard_is_whole(spec.kind == ShardKind::Row ? entries[0]->k() : entries[0]->n(), spec))
    return const_cast<QuantizedEntry*>(entries[0])->take();  // the loader's own: released next anyway
  std::vector<const quant::GroupAffineWeight*> parts;
  for (size_t i = 0; i < entries.size(); ++i) parts.push_back(&quantized_part(src.parts[i], *entries[i]));
  std::optional<quant::GroupAffineWeight> fused;
  if (parts.size() > 1 && !(fused = quant::concat_rows(parts, why_not))) return std::nullopt;
  const quant::GroupAffineWeight& w = fused ? *fused : *parts[0];
  if (!w.perm.empty() && spec.kind == ShardKind::Row && spec.world > 1) {
    if (why_not)
      *why_not = "act-order (input columns permuted into groups) cannot be split by input columns over " +
                 std::to_string(spec.world) + " tensor-parallel ranks";
    return std::nullopt;
  }
  return fused ? shard_quantized(std::move(*fused), spec) : shard_quantized(w, spec);
}

LinearWeight pack_quantized_linear(const quant::GroupAffineWeight& w, const ShardSpec& spec) {
  quant::GroupAffineWeight copy = w;
  return pack_quantized_linear(std::move(copy), spec);
}

LinearWeight pack_quantized_linear(quant::GroupAffineWeight&& w, const ShardSpec& spec) {
  try {
    w.validate();
  } catch (const std::invalid_argument& e) {
    LLM_THROW() << "packing a quantized linear weight: " << e.what();
  }
  LinearWeight lw;
  lw.format = w.bits == 4 ? WeightFormat::Int4Group : WeightFormat::Int8Group;
  lw.n = w.n;
  lw.k = w.k;
  lw.group_size = w.group;
  lw.shard = spec;
  auto codes = std::make_shared<quant::Codes>(std::move(w.codes));  // the tensor owns them: no copy
  lw.data = Tensor::view(codes->data(), DType::U8, {w.n, w.k}, codes);
  const bool f16 = exact_in_f16(w.scale) && exact_in_f16(w.offset);
  lw.scales = scale_tensor(w.scale, w.n, w.groups(), f16);
  lw.zeros = scale_tensor(w.offset, w.n, w.groups(), f16);
  if (!w.perm.empty()) lw.input_perm = host_tensor(DType::I32, {w.k}, w.perm.data());
  lw.part_rows = w.part_rows;
  return lw;
}

bool quantized_group_supported(int group, int64_t k) { return int_group_shape_ok(k, group); }

LinearWeight pack_linear(const Tensor& host_slice, const ShardSpec& spec, WeightFormat format) {
  LLM_REQUIRE(is_dense(format)) << "packing weights into format " << weight_format_name(format)
                                << " is not implemented (dense f32/f16/bf16 only)";
  const DType t = host_slice.dtype;
  LLM_CHECK(t == DType::F32 || t == DType::F16 || t == DType::BF16)
      << "a dense weight must be stored as f32, f16 or bf16, not " << dtype_name(t);
  LinearWeight w = dense_linear(host_slice, spec);
  w.format = format;  // upload converts the stored dtype to it
  return w;
}

LinearWeight upload_linear(const LinearWeight& packed, Backend& backend) {
  backend.require_support(packed.format);
  if (!is_dense(packed.format)) return backend.upload_quantized(packed);
  LLM_CHECK(is_dense(packed.format)) << "upload of format " << weight_format_name(packed.format)
                                     << " is not implemented";
  LinearWeight w = packed;
  w.data = backend.upload(packed.data, dense_dtype(packed.format));
  return w;
}

LinearWeight load_linear(const Checkpoint& ck, const WeightSource& src, const ShardSpec& spec, DType weight_dtype,
                         Backend& backend, std::vector<std::string>* dense_fallbacks) {
  bool any_quantized = false;
  for (const std::string& n : src.parts) any_quantized |= ck.quantized.count(n) != 0;
  if (any_quantized) {
    std::string why;
    std::optional<quant::GroupAffineWeight> q = gather_quantized_shard(ck, src, spec, &why);
    if (q) {
      const WeightFormat f = q->bits == 4 ? WeightFormat::Int4Group : WeightFormat::Int8Group;
      if (!backend.caps().supports(f))
        why = "backend " + backend.name() + " does not run " + weight_format_name(f) + " weights";
      else if (!q->perm.empty() && !backend.caps().input_perm)
        why = "backend " + backend.name() + " does not run act-order (input-permuted) quantized weights";
      else if (!quantized_group_supported(q->group, q->k))
        why = "quantization groups of " + std::to_string(q->group) + " inputs over K = " + std::to_string(q->k) +
              " (the kernels take K a multiple of 32 and groups of 16 or a multiple of 32 dividing it)";
      else {
        release_quantized_sources(ck, src);  // q is this rank's own copy
        return upload_linear(pack_quantized_linear(std::move(*q), spec), backend);
      }
    }
    if (dense_fallbacks) dense_fallbacks->push_back(src.name + ": " + why);
    if (q && taken(ck, src)) {  // the part was moved out of its entry (gather_quantized_shard): it is q
      LinearWeight w =
          upload_linear(pack_linear(shard_slice(dequantized_tensor(*q), spec), spec, dense_format(weight_dtype)), backend);
      release_sources(ck, src, w.data);
      return w;
    }
  }
  LinearWeight w = upload_linear(pack_linear(gather_shard(ck, src, spec), spec, dense_format(weight_dtype)), backend);
  release_sources(ck, src, w.data);
  release_quantized_sources(ck, src);
  return w;
}

Tensor load_tensor(const Checkpoint& ck, const WeightSource& src, const ShardSpec& spec, DType dtype,
                   Backend& backend) {
  Tensor t = backend.upload(gather_shard(ck, src, spec), dtype);
  release_sources(ck, src, t);
  return t;
}

LinearWeight dense_linear(const Tensor& w, const ShardSpec& spec) {
  LLM_CHECK(w.rank() == 2) << "a linear weight is [N, K], not " << w.shape_str();
  LinearWeight lw;
  lw.format = dense_format(w.dtype);
  lw.n = w.dim(0);
  lw.k = w.dim(1);
  lw.data = w;
  lw.shard = spec;
  return lw;
}

}  // namespace llmctl
