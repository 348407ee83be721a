// pack_linear_weight / unpack_linear_weight: one QuantizedLinear to and from the tensors of the
// compressed-tensors pack-quantized, AutoAWQ GEMM and GPTQ v1 layouts (shapes: checkpoint_layout.h).
#include <functional>
#include <stdexcept>

#include "quant/format/checkpoint_layout.h"

namespace llmctl::quant {

namespace {

using Tensors = std::vector<std::pair<std::string, PackedTensor>>;
using Views = std::map<std::string, PackedTensorView>;

// AutoAWQ packs the 8 columns of a word in this order: nibble i holds column AWQ_ORDER[i].
constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

[[noreturn]] void bad(const std::string& what) { throw std::invalid_argument(what); }

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

const PackedTensorView& need(const Views& by, const std::string& suffix) {
  auto it = by.find(suffix);
  if (it == by.end()) bad("missing tensor '" + suffix + "'");
  return it->second;
}

void expect_shape(const PackedTensorView& v, const std::string& name, const std::vector<int64_t>& want) {
  if (v.shape != want) bad("tensor '" + name + "' has shape " + shape_str(v.shape) + ", expected " + shape_str(want));
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The group index of every column, explicit (w.g_idx or column / group_size).
std::vector<int32_t> full_g_idx(const QuantizedLinear& w) {
  std::vector<int32_t> g(size_t(w.k));
  for (int64_t c = 0; c < w.k; ++c) g[size_t(c)] = w.group_of(c);
  return g;
}

// Transposes [N, G] scales to [G, N].
std::vector<float> scales_gn(const QuantizedLinear& w) {
  const int64_t G = w.groups();
  std::vector<float> out(size_t(G * w.n));
  for (int64_t r = 0; r < w.n; ++r)
    for (int64_t g = 0; g < G; ++g) out[size_t(g * w.n + r)] = w.scales[size_t(r * G + g)];
  return out;
}

// Reads [G, N] scales into w.scales [N, G].
void read_scales_gn(QuantizedLinear& w, const PackedTensorView& v, const std::string& name) {
  const int64_t G = w.groups();
  expect_shape(v, name, {G, w.n});
  std::vector<float> s = read_float(v, name);
  w.scales.resize(size_t(w.n * G));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t r = 0; r < w.n; ++r) w.scales[size_t(r * G + g)] = s[size_t(g * w.n + r)];
}

// A g_idx tensor [K]: checked, and dropped when it is the plain column / group_size order.
void read_g_idx(QuantizedLinear& w, const PackedTensorView& v, const std::string& name) {
  expect_shape(v, name, {w.k});
  std::vector<int32_t> g = read_i32(v, name);
  const int64_t G = w.groups();
  bool plain = true;
  for (int64_t c = 0; c < w.k; ++c) {
    if (g[size_t(c)] < 0 || g[size_t(c)] >= G)
      bad("tensor '" + name + "': group " + std::to_string(g[size_t(c)]) + " out of range [0, " + std::to_string(G) + ")");
    plain &= g[size_t(c)] == (w.scheme.group_size <= 0 ? 0 : c / w.scheme.group_size);
  }
  if (!plain) w.g_idx = std::move(g);
}

void check_valid(const QuantizedLinear& w) {
  try {
    w.validate();
  } catch (const std::invalid_argument& e) {
    bad(std::string("invalid quantized weight: ") + e.what());
  }
}

QuantizedLinear start(const QuantConfigInfo& info, int64_t n, int64_t k) {
  QuantizedLinear w;
  w.n = n;
  w.k = k;
  w.scheme = info.scheme;
  if (n <= 0 || k <= 0 || n > (int64_t(1) << 24) || k > (int64_t(1) << 24))
    bad("weight shape [" + std::to_string(n) + ", " + std::to_string(k) + "] out of range");
  w.scheme.check(k);
  return w;
}

// ---- compressed-tensors pack-quantized ----------------------------------------------------------

Tensors pack_ct(const QuantizedLinear& w, const std::string& scale_dtype) {
  if (!w.g_idx.empty())
    bad("compressed-tensors (0.19) stores no g_idx; act-order must use static groups (or write --format gptq)");
  const int bits = w.scheme.bits, per = 32 / bits;
  const int64_t G = w.groups(), words = ceil_div(w.k * bits, 32);
  std::vector<int32_t> packed(size_t(w.n * words), 0);
  for (int64_t r = 0; r < w.n; ++r)
    for (int64_t c = 0; c < w.k; ++c)
      packed[size_t(r * words + c / per)] |= int32_t(uint32_t(w.q[size_t(r * w.k + c)]) << (bits * (c % per)));
  Tensors out;
  out.emplace_back("weight_packed", make_i32({w.n, words}, packed));
  out.emplace_back("weight_scale", make_float({w.n, G}, w.scales, scale_dtype));
  if (!w.scheme.symmetric) {  // zero points packed along N (dim 0)
    const int64_t zrows = ceil_div(w.n * bits, 32);
    std::vector<int32_t> zp(size_t(zrows * G), 0);
    for (int64_t r = 0; r < w.n; ++r)
      for (int64_t g = 0; g < G; ++g)
        zp[size_t((r / per) * G + g)] |= int32_t(uint32_t(w.zeros[size_t(r * G + g)]) << (bits * (r % per)));
    out.emplace_back("weight_zero_point", make_i32({zrows, G}, zp));
  }
  out.emplace_back("weight_shape", make_i64({2}, {w.n, w.k}));
  return out;
}

QuantizedLinear unpack_ct(const QuantConfigInfo& info, int64_t n, int64_t k, const Views& by) {
  QuantizedLinear w = start(info, n, k);
  const int bits = w.scheme.bits, per = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const int64_t G = w.groups(), words = ceil_div(k * bits, 32);
  const PackedTensorView& shape = need(by, "weight_shape");
  std::vector<int64_t> s = read_int_any(shape, "weight_shape");
  if (s != std::vector<int64_t>{n, k})
    bad("tensor 'weight_shape' says " + shape_str(s) + ", the config implies " + shape_str({n, k}));
  const PackedTensorView& pv = need(by, "weight_packed");
  expect_shape(pv, "weight_packed", {n, words});
  std::vector<int32_t> packed = read_i32(pv, "weight_packed");
  w.q.resize(size_t(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c)
      w.q[size_t(r * k + c)] = uint8_t((uint32_t(packed[size_t(r * words + c / per)]) >> (bits * (c % per))) & mask);
  const PackedTensorView& sv = need(by, "weight_scale");
  expect_shape(sv, "weight_scale", {n, G});
  w.scales = read_float(sv, "weight_scale");
  // Symmetric schemes store no zero points (older compressed-tensors wrote zeros anyway): one that
  // is present is read, and validate() refuses it unless every zero point is the symmetric one.
  if (w.scheme.symmetric && !by.count("weight_zero_point")) {
    w.zeros.assign(size_t(n * G), w.scheme.sym_zero());
  } else {
    const PackedTensorView& zv = need(by, "weight_zero_point");
    w.zeros.resize(size_t(n * G));
    if (zv.dtype == "I8") {
      // Unpacked [N, G] int8 in the signed code domain, as compressed-tensors wrote zero points
      // before it packed them: shifted to the unsigned domain like the codes.
      expect_shape(zv, "weight_zero_point", {n, G});
      if (zv.nbytes != size_t(n * G)) bad("tensor 'weight_zero_point': size does not match its shape");
      for (int64_t i = 0; i < n * G; ++i)
        w.zeros[size_t(i)] = int32_t(static_cast<int8_t>(zv.data[i])) + w.scheme.sym_zero();
    } else {
      const int64_t zrows = ceil_div(n * bits, 32);
      expect_shape(zv, "weight_zero_point", {zrows, G});
      std::vector<int32_t> zp = read_i32(zv, "weight_zero_point");
      for (int64_t r = 0; r < n; ++r)
        for (int64_t g = 0; g < G; ++g)
          w.zeros[size_t(r * G + g)] = int32_t((uint32_t(zp[size_t((r / per) * G + g)]) >> (bits * (r % per))) & mask);
    }
  }
  if (auto it = by.find("weight_g_idx"); it != by.end()) read_g_idx(w, it->second, "weight_g_idx");
  check_valid(w);
  return w;
}

// ---- AutoAWQ GEMM ----------------------------------------------------------------------------------

void check_awq_shape(const QuantScheme& s, int64_t n) {
  if (s.bits != 4) bad("AutoAWQ GEMM holds 4-bit weights only, not " + std::to_string(s.bits) + "-bit");
  if (n % 8 != 0) bad("AutoAWQ GEMM needs output features divisible by 8, not " + std::to_string(n));
}

// [rows, N] values (rows = K for qweight, G for qzeros) -> [rows, N/8] words in AWQ order.
std::vector<int32_t> awq_pack_rows(int64_t rows, int64_t n, const std::function<uint32_t(int64_t, int64_t)>& at) {
  std::vector<int32_t> out(size_t(rows * (n / 8)), 0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n / 8; ++j) {
      uint32_t word = 0;
      for (int i = 0; i < 8; ++i) word |= at(r, 8 * j + kAwqOrder[i]) << (4 * i);
      out[size_t(r * (n / 8) + j)] = int32_t(word);
    }
  return out;
}

Tensors pack_awq(const QuantizedLinear& w) {
  check_awq_shape(w.scheme, w.n);
  if (!w.g_idx.empty()) bad("AutoAWQ GEMM has no g_idx (act-order is a GPTQ option)");
  const int64_t G = w.groups();
  Tensors out;
  out.emplace_back("qweight", make_i32({w.k, w.n / 8}, awq_pack_rows(w.k, w.n, [&](int64_t c, int64_t r) {
                                           return uint32_t(w.q[size_t(r * w.k + c)]);
                                         })));
  out.emplace_back("qzeros", make_i32({G, w.n / 8}, awq_pack_rows(G, w.n, [&](int64_t g, int64_t r) {
                                          return uint32_t(w.zeros[size_t(r * G + g)]);
                                        })));
  out.emplace_back("scales", make_float({G, w.n}, scales_gn(w), "F16"));
  return out;
}

QuantizedLinear unpack_awq(const QuantConfigInfo& info, int64_t n, int64_t k, const Views& by) {
  QuantizedLinear w = start(info, n, k);
  check_awq_shape(w.scheme, n);
  const int64_t G = w.groups(), cols = n / 8;
  const PackedTensorView& qv = need(by, "qweight");
  expect_shape(qv, "qweight", {k, cols});
  const PackedTensorView& zv = need(by, "qzeros");
  expect_shape(zv, "qzeros", {G, cols});
  std::vector<int32_t> qw = read_i32(qv, "qweight"), qz = read_i32(zv, "qzeros");
  w.q.resize(size_t(n * k));
  w.zeros.resize(size_t(n * G));
  for (int64_t j = 0; j < cols; ++j)
    for (int i = 0; i < 8; ++i) {
      const int64_t r = 8 * j + kAwqOrder[i];
      for (int64_t c = 0; c < k; ++c)
        w.q[size_t(r * k + c)] = uint8_t((uint32_t(qw[size_t(c * cols + j)]) >> (4 * i)) & 15u);
      for (int64_t g = 0; g < G; ++g)
        w.zeros[size_t(r * G + g)] = int32_t((uint32_t(qz[size_t(g * cols + j)]) >> (4 * i)) & 15u);
    }
  read_scales_gn(w, need(by, "scales"), "scales");
  check_valid(w);
  return w;
}

// ---- GPTQ v1 ---------------------------------------------------------------------------------------

void check_gptq_shape(const QuantScheme& s, int64_t n, int64_t k) {
  const int per = 32 / s.bits;
  if (k % per != 0) bad("GPTQ needs input features divisible by " + std::to_string(per) + ", not " + std::to_string(k));
  if (n % per != 0) bad("GPTQ needs output features divisible by " + std::to_string(per) + ", not " + std::to_string(n));
}

Tensors pack_gptq(const QuantizedLinear& w) {
  check_gptq_shape(w.scheme, w.n, w.k);
  const int bits = w.scheme.bits, per = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const int64_t G = w.groups();
  std::vector<int32_t> qw(size_t((w.k / per) * w.n), 0);
  for (int64_t r = 0; r < w.n; ++r)
    for (int64_t c = 0; c < w.k; ++c)
      qw[size_t((c / per) * w.n + r)] |= int32_t(uint32_t(w.q[size_t(r * w.k + c)]) << (bits * (c % per)));
  std::vector<int32_t> qz(size_t(G * (w.n / per)), 0);
  for (int64_t r = 0; r < w.n; ++r)
    for (int64_t g = 0; g < G; ++g) {
      const int32_t z = w.zeros[size_t(r * G + g)];
      if (z == 0) bad("GPTQ v1 stores zero points minus one and cannot hold a zero point of 0 (use compressed-tensors or --sym)");
      qz[size_t(g * (w.n / per) + r / per)] |= int32_t((uint32_t(z - 1) & mask) << (bits * (r % per)));
    }
  Tensors out;
  out.emplace_back("qweight", make_i32({w.k / per, w.n}, qw));
  out.emplace_back("qzeros", make_i32({G, w.n / per}, qz));
  out.emplace_back("scales", make_float({G, w.n}, scales_gn(w), "F16"));
  out.emplace_back("g_idx", make_i32({w.k}, full_g_idx(w)));
  return out;
}

QuantizedLinear unpack_gptq(const QuantConfigInfo& info, int64_t n, int64_t k, const Views& by) {
  QuantizedLinear w = start(info, n, k);
  check_gptq_shape(w.scheme, n, k);
  const int bits = w.scheme.bits, per = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  const int64_t G = w.groups();
  const PackedTensorView& qv = need(by, "qweight");
  expect_shape(qv, "qweight", {k / per, n});
  const PackedTensorView& zv = need(by, "qzeros");
  expect_shape(zv, "qzeros", {G, n / per});
  std::vector<int32_t> qw = read_i32(qv, "qweight"), qz = read_i32(zv, "qzeros");
  w.q.resize(size_t(n * k));
  for (int64_t c = 0; c < k; ++c)
    for (int64_t r = 0; r < n; ++r)
      w.q[size_t(r * k + c)] = uint8_t((uint32_t(qw[size_t((c / per) * n + r)]) >> (bits * (c % per))) & mask);
  w.zeros.resize(size_t(n * G));
  for (int64_t g = 0; g < G; ++g)
    for (int64_t r = 0; r < n; ++r) {
      const uint32_t stored = (uint32_t(qz[size_t(g * (n / per) + r / per)]) >> (bits * (r % per))) & mask;
      if (stored == mask)
        bad("tensor 'qzeros': stored zero point " + std::to_string(stored) + " means " + std::to_string(mask + 1) +
            " in GPTQ v1 (zero - 1), outside the " + std::to_string(bits) + "-bit range");
      w.zeros[size_t(r * G + g)] = int32_t(stored + 1);
    }
  read_scales_gn(w, need(by, "scales"), "scales");
  if (auto it = by.find("g_idx"); it != by.end()) read_g_idx(w, it->second, "g_idx");
  check_valid(w);
  return w;
}

}  // namespace

std::vector<std::pair<std::string, PackedTensor>> pack_linear_weight(QuantLayout layout, const QuantizedLinear& w,
                                                                    const std::string& scale_dtype) {
  check_valid(w);
  switch (layout) {
    case QuantLayout::CompressedTensors: return pack_ct(w, scale_dtype);
    case QuantLayout::AutoAwqGemm: return pack_awq(w);
    case QuantLayout::Gptq: return pack_gptq(w);
  }
  bad("unknown layout");
}

QuantizedLinear unpack_linear_weight(QuantLayout layout, const QuantConfigInfo& info, int64_t n, int64_t k,
                                     const std::map<std::string, PackedTensorView>& by_suffix) {
  switch (layout) {
    case QuantLayout::CompressedTensors: return unpack_ct(info, n, k, by_suffix);
    case QuantLayout::AutoAwqGemm: return unpack_awq(info, n, k, by_suffix);
    case QuantLayout::Gptq: return unpack_gptq(info, n, k, by_suffix);
  }
  bad("unknown layout");
}

}  // namespace llmctl::quant
