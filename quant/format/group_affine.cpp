#include "quant/format/group_affine.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <stdexcept>

// dequantize must round scale * code and the sum separately for the exact GGUF conversions to give
// gguf_blocks' values bit for bit: no FMA contraction here.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace llmctl::quant {

namespace {

std::string str(int64_t v) { return std::to_string(v); }
std::string num(float v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", double(v));
  return b;
}

// True when g_idx is what no g_idx means: column c in group c / group_size.
bool trivial_g_idx(const QuantizedLinear& w) {
  for (int64_t c = 0; c < w.k; ++c)
    if (w.g_idx[size_t(c)] != (w.scheme.group_size <= 0 ? 0 : c / w.scheme.group_size)) return false;
  return true;
}

}  // namespace

void GroupAffineWeight::validate() const {
  if (bits != 4 && bits != 8) throw std::invalid_argument("group-affine weight of " + str(bits) + " bits (4 or 8)");
  if (n <= 0 || k <= 0) throw std::invalid_argument("group-affine weight of shape [" + str(n) + ", " + str(k) + "]");
  if (group <= 0 || k % group != 0)
    throw std::invalid_argument("group size " + str(group) + " does not divide the " + str(k) + " input features");
  if (codes.size() != size_t(n * k)) throw std::invalid_argument("group-affine codes: size does not match [N, K]");
  int64_t part_sum = 0;
  bool parts_ok = true;
  for (int64_t r : part_rows) parts_ok = parts_ok && r > 0, part_sum += r;
  if (!part_rows.empty() && (!parts_ok || part_sum != n))
    throw std::invalid_argument("group-affine part rows are not positive and adding up to the " + str(n) + " rows");
  if (scale.size() != size_t(n * groups()) || offset.size() != scale.size())
    throw std::invalid_argument("group-affine scale/offset: size does not match [N, K / group]");
  // Weights |scale x code + offset| up to kMaxWeightMagnitude, codes up to the largest magnitude
  // present (15 for 4 bits; for 8 bits up to 128, but a table format's are smaller: MXFP4's 12).
  int largest = 15;
  if (bits == 8) {  // one pass over the codes + 128 as unsigned bytes: their least and greatest vectorize
    uint8_t lo = 255, hi = 0;  // (SSE2's pminub / pmaxub; a signed byte's abs and max did not)
    for (uint8_t c : codes) {
      const uint8_t u = c ^ 0x80;
      lo = std::min(lo, u), hi = std::max(hi, u);
    }
    largest = std::max({1, int(hi) - 128, 128 - int(lo)});
  }
  const float max_scale = kMaxWeightMagnitude / float(largest);
  bool bounded = true;  // one branch-free pass; the message names the first value out of range
  for (size_t i = 0; i < scale.size(); ++i)
    bounded &= std::fabs(scale[i]) <= max_scale && std::fabs(offset[i]) <= kMaxWeightMagnitude;  // NaN: false
  if (!bounded)
    for (size_t i = 0; i < scale.size(); ++i)
      if (!(std::fabs(scale[i]) <= max_scale && std::fabs(offset[i]) <= kMaxWeightMagnitude))
        throw std::invalid_argument("group-affine row " + str(int64_t(i) / groups()) + ", group " +
                                    str(int64_t(i) % groups()) + ": scale " + num(scale[i]) + ", offset " + num(offset[i]) + " (each must be finite, and weights at most " +
                                    str(int64_t(kMaxWeightMagnitude)) + " in magnitude)");
  if (bits == 4) {
    uint8_t any = 0;  // one branch-free pass (it vectorizes); the message names the first bad code
    for (uint8_t c : codes) any |= c;
    if (any > 15)
      for (uint8_t c : codes)
        if (c > 15) throw std::invalid_argument("4-bit code " + str(c) + " exceeds 15");
  }
  if (!perm.empty()) {
    if (perm.size() != size_t(k)) throw std::invalid_argument("input permutation of " + str(int64_t(perm.size())) +
                                                               " entries for " + str(k) + " input features");
    std::vector<bool> seen(size_t(k), false);
    for (int32_t c : perm) {
      if (c < 0 || c >= k || seen[size_t(c)])
        throw std::invalid_argument("input permutation is not a permutation of 0.." + str(k - 1) + " (entry " +
                                    str(c) + ")");
      seen[size_t(c)] = true;
    }
  }
}

namespace {

// Act-order: the stable sort of the columns by g_idx, when each group g then occupies exactly the
// columns [g * group, (g + 1) * group). nullopt with *why_not otherwise.
std::optional<std::vector<int32_t>> group_sorting_perm(const QuantizedLinear& w, int group, std::string* why_not) {
  const int64_t G = w.k / group;
  std::vector<int64_t> count(size_t(G), 0);
  for (int32_t g : w.g_idx) {
    if (g < 0 || g >= G) {
      if (why_not) *why_not = "act-order g_idx names group " + str(g) + " of " + str(G);
      return std::nullopt;
    }
    ++count[size_t(g)];
  }
  for (int64_t g = 0; g < G; ++g)
    if (count[size_t(g)] != group) {
      if (why_not)
        *why_not = "act-order g_idx puts " + str(count[size_t(g)]) + " columns in group " + str(g) + " (not " +
                   str(group) + ")";
      return std::nullopt;
    }
  std::vector<int64_t> next(static_cast<size_t>(G));
  for (int64_t g = 0; g < G; ++g) next[size_t(g)] = g * group;
  std::vector<int32_t> perm(size_t(w.k));
  for (int64_t c = 0; c < w.k; ++c) perm[size_t(next[size_t(w.g_idx[size_t(c)])]++)] = int32_t(c);
  return perm;
}

}  // namespace

std::optional<GroupAffineWeight> group_affine_from_quantized(const QuantizedLinear& w, std::string* why_not) {
  w.validate();
  GroupAffineWeight out;
  out.bits = w.scheme.bits;
  out.n = w.n;
  out.k = w.k;
  out.group = w.scheme.group_size <= 0 ? int(w.k) : w.scheme.group_size;
  if (int64_t(out.group) != (w.scheme.group_size <= 0 ? w.k : int64_t(w.scheme.group_size))) {
    if (why_not) *why_not = "per-channel group of " + str(w.k) + " inputs is too large";
    return std::nullopt;
  }
  if (!w.g_idx.empty() && !trivial_g_idx(w)) {
    std::optional<std::vector<int32_t>> perm = group_sorting_perm(w, out.group, why_not);
    if (!perm) return std::nullopt;
    out.perm = std::move(*perm);
  }
  out.codes.resize(w.q.size());
  out.scale = w.scales;
  out.offset.resize(w.scales.size());
  if (out.bits == 4) {
    out.codes.assign(w.q.begin(), w.q.end());
    for (size_t i = 0; i < out.offset.size(); ++i) out.offset[i] = -float(w.zeros[i]) * w.scales[i];
  } else {
    for (size_t i = 0; i < w.q.size(); ++i) out.codes[i] = uint8_t(int8_t(int(w.q[i]) - 128));
    for (size_t i = 0; i < out.offset.size(); ++i) out.offset[i] = float(128 - w.zeros[i]) * w.scales[i];
  }
  if (!out.perm.empty()) {  // column j of the result is input column perm[j]
    std::vector<uint8_t> row(size_t(w.k));
    for (int64_t r = 0; r < w.n; ++r) {
      uint8_t* c = out.codes.data() + r * w.k;
      for (int64_t j = 0; j < w.k; ++j) row[size_t(j)] = c[out.perm[size_t(j)]];
      std::copy(row.begin(), row.end(), c);
    }
  }
  return out;
}

std::vector<float> dequantize(const GroupAffineWeight& w) {
  w.validate();
  std::vector<float> out(size_t(w.n * w.k));
  const int64_t G = w.groups();
  for (int64_t r = 0; r < w.n; ++r)
    for (int64_t c = 0; c < w.k; ++c) {
      const size_t i = size_t(r * w.k + c), g = size_t(r * G + c / w.group);
      const float prod = w.scale[g] * float(w.code_value(i));
      out[size_t(r * w.k) + size_t(w.perm.empty() ? c : w.perm[size_t(c)])] = prod + w.offset[g];
    }
  return out;
}

GroupAffineWeight widen_to_8_bits(const GroupAffineWeight& w) {
  GroupAffineWeight out = w;
  out.bits = 8;  // codes 0..15 read as int8 are the same numbers
  return out;
}

GroupAffineWeight split_groups(const GroupAffineWeight& w, int group) {
  if (group <= 0 || w.group % group != 0)
    throw std::invalid_argument("cannot split groups of " + str(w.group) + " into groups of " + str(group));
  const int64_t f = w.group / group, G = w.groups();
  GroupAffineWeight out = w;
  out.group = group;
  out.scale.resize(size_t(w.n * G * f));
  out.offset.resize(out.scale.size());
  for (int64_t i = 0; i < w.n * G; ++i)
    for (int64_t j = 0; j < f; ++j) {
      out.scale[size_t(i * f + j)] = w.scale[size_t(i)];
      out.offset[size_t(i * f + j)] = w.offset[size_t(i)];
    }
  return out;
}

std::optional<GroupAffineWeight> concat_rows(const std::vector<const GroupAffineWeight*>& parts, std::string* why_not) {
  if (parts.empty()) throw std::invalid_argument("concat_rows of no weights");
  int bits = 4, group = parts[0]->group;
  for (const GroupAffineWeight* p : parts) {
    if (p->k != parts[0]->k) {
      if (why_not) *why_not = "fused parts have " + str(parts[0]->k) + " and " + str(p->k) + " input features";
      return std::nullopt;
    }
    bits = std::max(bits, p->bits);
    group = std::min(group, p->group);
  }
  for (const GroupAffineWeight* p : parts)
    if (p->perm != parts[0]->perm) {
      if (why_not) *why_not = "fused parts were quantized with different act-order column permutations";
      return std::nullopt;
    }
  for (const GroupAffineWeight* p : parts)
    if (p->group % group != 0) {
      if (why_not)
        *why_not = "fused parts have quantization groups of " + str(p->group) + " and " + str(group) + " inputs";
      return std::nullopt;
    }
  GroupAffineWeight out;
  out.bits = bits;
  out.k = parts[0]->k;
  out.group = group;
  out.perm = parts[0]->perm;
  for (const GroupAffineWeight* p : parts) {
    // Only the parts that differ are copied into the common form.
    std::optional<GroupAffineWeight> tmp;
    const GroupAffineWeight* q = p;
    if (p->group != group) q = &tmp.emplace(split_groups(*p, group));
    out.n += q->n;
    out.part_rows.push_back(q->n);
    out.codes.insert(out.codes.end(), q->codes.begin(), q->codes.end());
    out.scale.insert(out.scale.end(), q->scale.begin(), q->scale.end());
    out.offset.insert(out.offset.end(), q->offset.begin(), q->offset.end());
  }
  // Widening 4 -> 8 bits changes no byte: the codes 0..15 are already their int8 values.
  if (out.part_rows.size() < 2) out.part_rows.clear();
  return out;
}

GroupAffineWeight select_rows(const GroupAffineWeight& w, const std::vector<IndexRange>& rows) {
  const int64_t G = w.groups();
  GroupAffineWeight out;
  out.bits = w.bits;
  out.k = w.k;
  out.group = w.group;
  out.perm = w.perm;
  for (const auto& [begin, len] : rows) {
    if (begin < 0 || len < 0 || begin + len > w.n)
      throw std::invalid_argument("rows [" + str(begin) + ", " + str(begin + len) + ") of a weight with " + str(w.n));
    out.n += len;
    out.codes.insert(out.codes.end(), w.codes.begin() + begin * w.k, w.codes.begin() + (begin + len) * w.k);
    out.scale.insert(out.scale.end(), w.scale.begin() + begin * G, w.scale.begin() + (begin + len) * G);
    out.offset.insert(out.offset.end(), w.offset.begin() + begin * G, w.offset.begin() + (begin + len) * G);
  }
  return out;
}

GroupAffineWeight select_columns(const GroupAffineWeight& w, const std::vector<IndexRange>& cols) {
  if (!w.perm.empty())
    throw std::invalid_argument("an act-order weight (input columns permuted into groups) cannot be split by input "
                                "columns: a slice of the inputs is not a set of whole groups");
  int64_t k = 0, group = w.group;  // group: the largest size dividing w.group and every start and length
  for (const auto& [begin, len] : cols) {
    if (begin < 0 || len < 0 || begin + len > w.k)
      throw std::invalid_argument("columns [" + str(begin) + ", " + str(begin + len) + ") of a weight with " +
                                  str(w.k));
    k += len;
    if (len > 0) group = std::gcd(group, std::gcd(begin, len));
  }
  const int64_t G = w.groups();
  GroupAffineWeight out;
  out.bits = w.bits;
  out.n = w.n;
  out.k = k;
  out.group = int(group);
  out.codes.reserve(size_t(w.n * k));
  out.scale.reserve(size_t(w.n * (k / group)));
  out.offset.reserve(out.scale.capacity());
  for (int64_t r = 0; r < w.n; ++r)
    for (const auto& [begin, len] : cols) {
      const auto c0 = w.codes.begin() + r * w.k + begin;
      out.codes.insert(out.codes.end(), c0, c0 + len);
      for (int64_t c = begin; c < begin + len; c += group) {  // each new group inside one of w's
        out.scale.push_back(w.scale[size_t(r * G + c / w.group)]);
        out.offset.push_back(w.offset[size_t(r * G + c / w.group)]);
      }
    }
  return out;
}

ColumnCover cover_columns(const std::vector<IndexRange>& cols, int64_t unit, int64_t extent) {
  if (unit <= 0) throw std::invalid_argument("cover_columns: unit " + str(unit));
  ColumnCover out;
  int64_t covered = 0;  // columns in out.cover so far
  for (const auto& [begin, len] : cols) {
    if (begin < 0 || len < 0 || begin + len > extent)
      throw std::invalid_argument("columns [" + str(begin) + ", " + str(begin + len) + ") of " + str(extent));
    const int64_t b = begin / unit * unit, e = std::min(extent, (begin + len + unit - 1) / unit * unit);
    if (!out.cover.empty()) {
      auto& [last_b, last_len] = out.cover.back();
      if (b >= last_b && b <= last_b + last_len) {  // continues (or overlaps) the last unit run
        const int64_t grow = std::max<int64_t>(0, e - (last_b + last_len));
        out.within.emplace_back(covered - last_len + (begin - last_b), len);
        last_len += grow;
        covered += grow;
        continue;
      }
    }
    out.cover.emplace_back(b, e - b);
    out.within.emplace_back(covered + (begin - b), len);
    covered += e - b;
  }
  return out;
}

}  // namespace llmctl::quant
