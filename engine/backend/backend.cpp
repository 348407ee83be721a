#include "engine/backend/backend.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "engine/core/error.h"

namespace llmctl {

bool BackendCaps::supports(WeightFormat f) const {
  return std::find(weight_formats.begin(), weight_formats.end(), f) != weight_formats.end();
}

bool BackendCaps::supports_kv_cache(KvCacheDtype d) const {
  return std::find(kv_dtypes.begin(), kv_dtypes.end(), d) != kv_dtypes.end();
}

bool BackendCaps::supports_kv_exact_rows(KvCacheDtype d) const {
  return std::find(kv_exact_rows.begin(), kv_exact_rows.end(), d) != kv_exact_rows.end();
}

namespace {
// "a,b,c" from the names of items.
template <class T, class NameFn>
std::string join_names(const std::vector<T>& items, NameFn name) {
  std::string s;
  for (const T& x : items) s += (s.empty() ? "" : ",") + std::string(name(x));
  return s;
}
}  // namespace

std::string BackendCaps::describe() const {
  std::string s = "weights " + join_names(weight_formats, weight_format_name);
  if (input_perm) s += " (act-order)";
  if (quantized_embed) s += ", quantized embeddings";
  s += "; kv " + join_names(kv_dtypes, kv_cache_dtype_name);
  if (!kv_exact_rows.empty()) s += " (exact " + join_names(kv_exact_rows, kv_cache_dtype_name) + ")";
  if (sampling) s += "; sampling";
  if (graphs) s += "; graphs";
  return s;
}

std::vector<int32_t> Backend::sample(const Tensor&, const std::vector<SampleJob>&) {
  LLM_CHECK(false) << name() << " does not sample on the device";
  return {};
}

void Backend::copy_to_host(const Tensor& t, void* host) {
  LLM_CHECK(t.device == Device::CPU) << name() << ": copy_to_host of a device tensor";
  if (t.nbytes() > 0) std::memcpy(host, t.data, t.nbytes());
}

void Backend::copy_from_host(const void* host, Tensor& t) {
  LLM_CHECK(t.device == Device::CPU) << name() << ": copy_from_host into a device tensor";
  if (t.nbytes() > 0) std::memcpy(t.data, host, t.nbytes());
}

void Backend::require_support(WeightFormat f) const {
  LLM_REQUIRE(caps_.supports(f)) << "backend " << name() << " cannot run linear weights in format " << weight_format_name(f);
}

LinearWeight Backend::upload_quantized(const LinearWeight& canonical) {
  LLM_REQUIRE(false) << "backend " << name() << " cannot load linear weights in format "
                     << weight_format_name(canonical.format);
  return {};
}

namespace {
uint64_t weight_bytes(const LinearWeight& w) {
  if (const PackedWeightView* v = packed_view_of(w)) return v->bytes;
  return w.data.nbytes() + w.scales.nbytes() + w.zeros.nbytes();
}
}  // namespace

void Backend::linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) {
  weight_bytes_ += weight_bytes(w);
  dispatch_linear(x, w, bias, out);
}

void Backend::linear_group(std::span<const GroupedLinear> items) {
  for (const GroupedLinear& g : items) weight_bytes_ += weight_bytes(*g.w);
  run_linear_group(items);
}

void Backend::dispatch_linear(const Tensor& x, const LinearWeight& w, const Tensor* bias, Tensor& out) {
  require_support(w.format);
  if (!is_dense(w.format)) return linear_quantized(x, w, bias, out);
  LLM_CHECK(w.data.dtype == dense_dtype(w.format) && w.data.rank() == 2 && w.data.dim(0) == w.n &&
            w.data.dim(1) == w.k)
      << "linear weight " << weight_format_name(w.format) << " [" << w.n << ", " << w.k << "] holds "
      << dtype_name(w.data.dtype) << " " << w.data.shape_str();
  linear(x, w.data, bias, out);
}

void Backend::run_linear_group(std::span<const GroupedLinear> items) {
  for (const GroupedLinear& g : items) {
    Tensor out = g.out;
    dispatch_linear(g.x, *g.w, nullptr, out);
  }
}

void Backend::embed(const LinearWeight& table, const DeviceBatch& b, Tensor& out, int64_t vocab_begin) {
  if (is_dense(table.format)) return embed(table.data, b, out, vocab_begin);
  embed_quantized(table, b, out, vocab_begin);  // the default refuses, by name
}

void Backend::embed_quantized(const LinearWeight& table, const DeviceBatch&, Tensor&, int64_t) {
  LLM_THROW() << "backend " << name() << " has no embedding lookup into " << weight_format_name(table.format) << " rows";
}

void Backend::gelu_tanh_mul(const Tensor&, Tensor&) {
  LLM_THROW() << "backend " << name() << " has no GeGLU (gelu_tanh_mul), which this model's MLP needs";
}

void Backend::gather_token_rows(const Tensor&, std::span<const int32_t>, Tensor&) {
  LLM_THROW() << "backend " << name() << " has no gather_token_rows, which mixture-of-experts layers need";
}

void Backend::scatter_add_rows(const Tensor&, std::span<const int32_t>, std::span<const float>, Tensor&) {
  LLM_THROW() << "backend " << name() << " has no scatter_add_rows, which mixture-of-experts layers need";
}

void Backend::fill_zero(Tensor&) {
  LLM_THROW() << "backend " << name() << " has no fill_zero, which mixture-of-experts layers need";
}

void Backend::scale(Tensor&, float) {
  LLM_THROW() << "backend " << name() << " has no in-place scale, which this model's embedding needs";
}

void Backend::soft_cap(Tensor&, float) {
  LLM_THROW() << "backend " << name() << " has no soft_cap, which this model's final logit soft-capping needs";
}

void Backend::head_rms_norm(Tensor&, const Tensor&, const Tensor&, float, int, int) {
  LLM_THROW() << "backend " << name() << " has no per-head RMSNorm of q and k (Qwen3's q_norm / k_norm)";
}

void Backend::linear_quantized(const Tensor&, const LinearWeight& w, const Tensor*, Tensor&) {
  LLM_THROW() << "backend " << name() << " has no quantized linear kernel for " << weight_format_name(w.format);
}

void Backend::copy_exact_rows(std::vector<KvLayer>& cache, const std::vector<int32_t>& pairs) {
  LLM_CHECK(pairs.size() % 2 == 0) << "copy_exact_rows: (src, dst) pairs";
  for (KvLayer& l : cache) {
    LLM_CHECK(l.exact) << "copy_exact_rows: the " << name() << " backend keeps no exact KV rows";
    KvExactStore& e = *l.exact;
    for (size_t i = 0; i < pairs.size(); i += 2) {
      const int src = pairs[i], dst = pairs[i + 1];
      e.ensure_slot(std::max(src, dst));
      const int64_t n = e.slot_floats();
      std::copy_n(e.k.begin() + src * n, n, e.k.begin() + dst * n);
      std::copy_n(e.v.begin() + src * n, n, e.v.begin() + dst * n);
    }
  }
}

}  // namespace llmctl
