#include "engine/backend/cpu/cpu_quantized_weight.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>

#include "engine/core/error.h"
#include "engine/core/host_arena.h"
#include "engine/core/thread_pool.h"

namespace llmctl {

namespace {
void check_group_size(const LinearWeight& w) {
  LLM_CHECK(int_group_shape_ok(w.k, w.group_size))
      << weight_format_name(w.format) << ": K " << w.k << " in groups of " << w.group_size << " (" << kIntGroupRule << ")";
}
// Scales and zeros: [N, K / group] of one float dtype, F16 or F32. zeros_optional: a packed Rows
// weight whose offsets are all -0 stores none (QWeightView::offset null).
void check_group_params(const LinearWeight& w, bool zeros_optional = false) {
  check_group_size(w);
  const std::vector<int64_t> shape = {w.n, w.k / w.group_size};
  for (const Tensor* t : {&w.scales, &w.zeros}) {
    if (t == &w.zeros && zeros_optional && t->empty()) continue;
    LLM_CHECK((t->dtype == DType::F16 || t->dtype == DType::F32) && t->shape == shape && t->dtype == w.scales.dtype)
        << weight_format_name(w.format) << " [" << w.n << ", " << w.k << "]: scales/zeros must be f16 or f32 [" << w.n
        << ", " << w.k / w.group_size << "], got " << dtype_name(w.scales.dtype) << " " << w.scales.shape_str() << " and "
        << dtype_name(w.zeros.dtype) << " " << w.zeros.shape_str();
  }
}
// The row-lane layout's descriptor row, after the row blocks: this tag, the implied zero point
// (int32, -1: offsets stored), the scale type (int32: 0 f32, 1 f16, 2 factored), whether the codes
// are positions in a codebook (int32 0 or 1), the codebook (16 int8), the bits the codes are
// stored in when not the format's (int32 0: the format's; 2, 3, 4 or 6) and, for codes stored from a
// base (narrow), the base (int32; kWideCodes: not narrow), and whether narrow 8- or 6-bit codes are
// all within 31 of it (int32 0 or 1: QWeightView::narrow_five), and the power of two factored scales
// are stored times (int32 s: 2^s, QWeightView::out_shift). Zero bytes after the scale type: neither.
constexpr char kRowLaneTag[4] = {'R', 'L', '1', '6'};
constexpr int64_t kDescriptorBytes = 48;
// A weight of fused parts packed each in its own form (pack_parts): data U8 [1, bytes], the parts'
// packed data one after another, then per part 4 int64 (rows, byte offset, row block bytes, group),
// the part count (int64) and this tag.
constexpr char kSegmentsTag[4] = {'R', 'L', 'S', 'G'};

kernels::ScaleType scale_type_of(const LinearWeight& w) {
  return w.scales.dtype == DType::F16 ? kernels::ScaleType::F16 : kernels::ScaleType::F32;
}

// Items [0, n) (rows, or row blocks of 16) in runs a thread each, of at least `least` items (fewer:
// the hand-off would cost about what it saves); pool null: one run. Each run's work depends on its
// items alone, so the result is the same however they are split. Packing is most of a model's load.
// An exception in a run (a packer's check) reaches the caller (ThreadPool::parallel_for).
void for_runs(ThreadPool* pool, int64_t n, int64_t least, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool && pool->size() > 1 && n >= 2 * least)
    pool->parallel_for(n, fn);
  else
    fn(0, n);
}
constexpr int64_t kLeastRows = 64;
constexpr int64_t kFactoredRun = 8;  // groups a factored D covers (kernels::FactoredParams)

// qweight_factor of rows [0, n) of the values [n, G], by runs of rows.
bool factor_rows(ThreadPool* pool, int64_t n, int64_t k, int group, const float* v, kernels::FactoredParams* out) {
  constexpr int64_t R = kFactoredRun;
  const int64_t G = k / group;
  if (group <= 0 || k % group != 0 || G % R != 0) return false;
  out->m.resize(size_t(n * G));
  out->d.resize(size_t(n * G / R));
  std::atomic<bool> ok{true};
  for_runs(pool, n, kLeastRows, [&](int64_t r0, int64_t r1) {
    kernels::FactoredParams run;
    if (!kernels::qweight_factor(r1 - r0, k, group, v + r0 * G, &run)) {
      ok = false;
      return;
    }
    std::memcpy(out->m.data() + r0 * G, run.m.data(), run.m.size());
    std::memcpy(out->d.data() + r0 * G / R, run.d.data(), run.d.size() * sizeof(uint16_t));
  });
  return ok.load();
}

// f32 scales (and offsets, when stored) that are an f16 times an int8 per run of 8 groups (GGUF
// K-quants: d x sc, dmin x m) are kept as those two factors (kernels/cpu/qlinear.h): the same
// values in a quarter of the bytes. False, and the weight keeps its f32 ones, where they are not.
bool factor_params(const LinearWeight& w, kernels::QLayout layout, bool offsets, kernels::FactoredParams* scale,
                   kernels::FactoredParams* offset, ThreadPool* pool) {
  if (w.scales.dtype != DType::F32 || !kernels::qweight_factored_ok(layout)) return false;
  return factor_rows(pool, w.n, w.k, w.group_size, w.scales.ptr<float>(), scale) &&
         (!offsets || factor_rows(pool, w.n, w.k, w.group_size, w.zeros.ptr<float>(), offset));
}

// f32 scales (and offsets) that factor so only after a multiplication by a power of two: an f16 D
// for d / 8 (GGUF IQ2_XXS, IQ2_XS, IQ1_S / IQ1_M) or d / 4 (IQ3_XXS) is a subnormal, and inexact,
// for block scales d below 2^-11 (2^-12): most of a model's whose weights are about 0.02. Every value
// times 2^s (exact in f32), s the largest that keeps them below 2^14, is factored instead, and the
// kernels multiply their results by 2^-s (QWeightView::out_shift): the same values in the factored
// bytes (IQ2_XXS: 4.3 bits a weight, not 5). False where they do not factor so either.
bool factor_shifted(const LinearWeight& w, bool offsets, kernels::FactoredParams* scale,
                    kernels::FactoredParams* offset, int32_t* shift, ThreadPool* pool) {
  if (w.scales.dtype != DType::F32 || !kernels::qweight_factored_ok(kernels::QLayout::RowLane16)) return false;
  const int64_t count = w.n * (w.k / w.group_size);
  float top = 0.0f;
  for (const Tensor* t : {&w.scales, offsets ? &w.zeros : nullptr}) {
    if (!t) continue;
    const float* v = t->ptr<float>();
    for (int64_t i = 0; i < count; ++i) {
      if (!std::isfinite(v[i])) return false;
      top = std::max(top, std::fabs(v[i]));
    }
  }
  int e = 0;
  std::frexp(top, &e);  // top < 2^e
  const int s = 14 - e;
  if (top == 0.0f || s <= 0 || s > 64) return false;  // zeros factor as they are; large values need no shift
  std::vector<float> shifted(static_cast<size_t>(count));
  auto shifted_values = [&](const Tensor& t) {
    const float* v = t.ptr<float>();
    for (int64_t i = 0; i < count; ++i) shifted[size_t(i)] = std::ldexp(v[i], s);
    return shifted.data();
  };
  if (!factor_rows(pool, w.n, w.k, w.group_size, shifted_values(w.scales), scale)) return false;
  if (offsets && !factor_rows(pool, w.n, w.k, w.group_size, shifted_values(w.zeros), offset)) return false;
  *shift = s;
  return true;
}

// qweight_code_range of the codes [n, k], by runs of rows.
kernels::CodeRange code_range_rows(ThreadPool* pool, int64_t n, int64_t k, const uint8_t* c) {
  std::mutex mu;
  bool first = true;
  kernels::CodeRange all;
  for_runs(pool, n, kLeastRows, [&](int64_t r0, int64_t r1) {
    const kernels::CodeRange r = kernels::qweight_code_range((r1 - r0) * k, c + r0 * k);
    std::lock_guard<std::mutex> lk(mu);
    all = first ? r : kernels::CodeRange{std::min(all.lo, r.lo), std::max(all.hi, r.hi)};
    first = false;
  });
  return all;
}

// Whether the codes of n rows of k take at most 16 values, and if so their table (qweight_codebook),
// by runs of rows: each run's table (false: more than 16 values in the run), the table of the runs'
// tables' values after.
bool codebook_rows(ThreadPool* pool, int64_t n, int64_t k, const uint8_t* c, int8_t* table) {
  std::mutex mu;
  bool within = true;
  std::vector<int8_t> values;  // the runs' tables, 16 each
  for_runs(pool, n, kLeastRows, [&](int64_t r0, int64_t r1) {
    int8_t run[16];
    const bool ok = kernels::qweight_codebook((r1 - r0) * k, c + r0 * k, run, nullptr);
    std::lock_guard<std::mutex> lk(mu);
    within = within && ok;
    if (ok) values.insert(values.end(), run, run + 16);
  });
  return within && kernels::qweight_codebook(int64_t(values.size()), reinterpret_cast<const uint8_t*>(values.data()),
                                             table, nullptr);
}

// Rows [r0, r1) of factored parameters [n, G] (G a multiple of kFactoredRun).
kernels::FactoredParams factored_rows(const kernels::FactoredParams& f, int64_t G, int64_t r0, int64_t r1) {
  kernels::FactoredParams o;
  o.m.assign(f.m.begin() + r0 * G, f.m.begin() + r1 * G);
  o.d.assign(f.d.begin() + r0 * G / kFactoredRun, f.d.begin() + r1 * G / kFactoredRun);
  return o;
}

// A packed weight's long-lived bytes: from the arena where there is one.
Tensor packed_host(HostArena* arena, std::vector<int64_t> shape) {
  return arena ? arena->empty(DType::U8, std::move(shape)) : Tensor::empty_host(DType::U8, std::move(shape));
}

// A Rows-layout factored set as one U8 tensor [N G + 2 N G / 8]: the int8 m, then the f16 D.
Tensor factored_tensor(const kernels::FactoredParams& f, HostArena* arena) {
  Tensor t = packed_host(arena, {int64_t(f.m.size() + 2 * f.d.size())});
  std::memcpy(t.data, f.m.data(), f.m.size());
  std::memcpy(static_cast<uint8_t*>(t.data) + f.m.size(), f.d.data(), 2 * f.d.size());
  return t;
}
bool is_factored_tensor(const Tensor& t, int64_t count) {
  return t.dtype == DType::U8 && t.rank() == 1 && t.dim(0) == count + 2 * (count / 8) && count % 8 == 0;
}
}  // namespace

int quantized_bits(WeightFormat f) {
  switch (f) {
    case WeightFormat::Int4Group: return 4;
    case WeightFormat::Int8Group: return 8;
    default: LLM_CHECK(false) << "not a quantized weight format: " << weight_format_name(f);
  }
  return 0;
}

namespace {

// The whole weight in one form (the layout's checks first).
LinearWeight pack_whole(const LinearWeight& canonical, ThreadPool* pool, HostArena* arena) {
  const int bits = quantized_bits(canonical.format);
  check_group_params(canonical);
  const Tensor& codes = canonical.data;
  const std::vector<int64_t> nk = {canonical.n, canonical.k};
  LLM_CHECK((codes.dtype == DType::U8 || (bits == 8 && codes.dtype == DType::I8)) && codes.device == Device::CPU &&
            codes.shape == nk)
      << weight_format_name(canonical.format) << ": canonical codes must be host u8 [" << canonical.n << ", "
      << canonical.k << "], got " << dtype_name(codes.dtype) << " " << codes.shape_str();
  const auto* c = static_cast<const uint8_t*>(codes.data);
  uint8_t worst = 0;  // 4 bits: the OR of the codes (one pass without a branch per code)
  if (bits == 4) {
    const int64_t count = codes.numel();
    for (int64_t i = 0; i < count; ++i) worst |= c[i];
    if (worst > 15) {
      for (int64_t i = 0; i < count; ++i) {
        LLM_CHECK(c[i] <= 15) << "int4-group: code " << int(c[i]) << " at " << i << " is outside 0..15";
      }
    }
  }
  check_input_perm(canonical);  // kept as it is: linear_quantized gathers x by it
  LinearWeight out = canonical;
  const int64_t N = canonical.n, K = canonical.k;
  if (kernels::qweight_preferred_layout(bits, canonical.group_size) == kernels::QLayout::RowLane16) {
    kernels::ScaleType st = scale_type_of(canonical);
    const int group = canonical.group_size;
    const int zero = kernels::qweight_implied_zero(bits, N, K, group, st, canonical.scales.data, canonical.zeros.data);
    kernels::FactoredParams fs, fo;
    int32_t shift = 0;
    const bool factored = factor_params(canonical, kernels::QLayout::RowLane16, zero < 0, &fs, &fo, pool) ||
                          factor_shifted(canonical, zero < 0, &fs, &fo, &shift, pool);
    if (factored) st = kernels::ScaleType::Factored;
    // 8-bit codes within 15 of their least (Q3_K's -4..3): 4-bit codes from it (narrow 4-bit: the
    // plain 4-bit kernels, half the bytes; from 0: plain 4-bit codes, a 4-bit part fused with an
    // 8-bit one). Else at most 16 values (GGUF IQ4_NL / IQ4_XS levels): 4-bit positions in a
    // codebook, half the bytes. Else within 63 of their least (Q6_K's -32..31, Q5_K's 0..31): 6-bit
    // codes stored from it, three quarters of the bytes (decode streams them).
    const bool compact = bits == 8 && kernels::qweight_compact_codes_ok(kernels::QLayout::RowLane16);
    const kernels::CodeRange range = compact ? code_range_rows(pool, N, K, c) : kernels::CodeRange{};
    int32_t narrow = compact ? kernels::narrow_base_of(range, 15) : kernels::kWideCodes;
    if (compact && range.lo >= 0 && range.hi <= 15) narrow = kernels::kWideCodes;  // plain 4-bit codes
    const bool narrow4 = compact && range.hi - range.lo <= 15;
    int8_t book[16] = {};
    std::vector<uint8_t> index;
    int32_t codebook = 0;
    if (compact && !narrow4) {  // neither narrow nor plain 4-bit
      codebook = codebook_rows(pool, N, K, c, book) ? 1 : 0;  // the positions only if so
      if (codebook) {
        index.resize(size_t(N * K));
        for_runs(pool, N, kLeastRows, [&](int64_t r0, int64_t r1) {  // every code is in the table
          kernels::qweight_codebook_positions((r1 - r0) * K, c + r0 * K, book, index.data() + r0 * K);
        });
      } else {
        narrow = kernels::narrow_base_of(range, 63);
      }
    }
    const bool narrow6 = !narrow4 && narrow != kernels::kWideCodes;
    // codes 0..3 (GGUF Q2_K's): 2-bit codes, half the 4-bit bytes (decode streams them)
    const bool two = (bits == 4 && worst <= 3) || (compact && range.lo >= 0 && range.hi <= 3);
    // within 7 of their least (Q3_K's -4..3), or a codebook of at most 8 values (the IQ2 / IQ1 grids'):
    // 3-bit codes, three quarters of the 4-bit bytes, where the kernels take them
    const bool three = !two && compact && kernels::qweight_three_bit_ok() &&
                       ((narrow4 && range.hi - range.lo <= 7) || (codebook && book[7] == book[15]));
    if (three && !codebook) narrow = range.lo >= 0 && range.hi <= 7 ? kernels::kWideCodes : range.lo;
    const int pbits = two ? 2 : three ? 3 : codebook || narrow4 ? 4 : narrow6 ? 6 : bits;
    const int64_t blocks = (N + 15) / 16, bb = kernels::qweight_rowlane_block_bytes(pbits, K, group, st, zero);
    LLM_CHECK(bb >= kDescriptorBytes) << "row-lane block of " << bb << " bytes";  // K >= 32: 256 or more
    out.data = packed_host(arena, {blocks + 1, bb});
    uint8_t* d = out.data.ptr<uint8_t>();
    std::memset(d + blocks * bb, 0, size_t(bb));  // the descriptor row (its unused bytes zero)
    // by runs of whole row blocks, each zeroed (the pool's threads touch the new pages, not this one)
    // and packed on its own (the packer's row blocks are independent)
    const uint8_t* packed_codes = codebook ? index.data() : c;
    const int64_t G = K / group;
    const size_t es = factored ? 0 : dtype_size(canonical.scales.dtype);
    for_runs(pool, blocks, kLeastRows / 16, [&](int64_t b0, int64_t b1) {
      const int64_t r0 = 16 * b0, r1 = std::min(N, 16 * b1);
      std::memset(d + b0 * bb, 0, size_t((b1 - b0) * bb));
      kernels::FactoredParams rs, ro;
      if (factored) rs = factored_rows(fs, G, r0, r1), ro = zero < 0 ? factored_rows(fo, G, r0, r1) : ro;
      const auto* sc = static_cast<const uint8_t*>(canonical.scales.data);
      const auto* of = static_cast<const uint8_t*>(canonical.zeros.data);
      kernels::qweight_pack_rowlane(pbits, r1 - r0, K, group, st, packed_codes + r0 * K,
                                    factored ? static_cast<const void*>(&rs) : sc + size_t(r0 * G) * es,
                                    factored ? static_cast<const void*>(&ro) : of + size_t(r0 * G) * es,
                                    d + b0 * bb, zero, two ? kernels::kWideCodes : narrow);
    });
    const int32_t code = st == kernels::ScaleType::Factored ? 2 : st == kernels::ScaleType::F16 ? 1 : 0;
    std::memcpy(d + blocks * bb, kRowLaneTag, 4);  // the descriptor row
    std::memcpy(d + blocks * bb + 4, &zero, 4);
    std::memcpy(d + blocks * bb + 8, &code, 4);
    std::memcpy(d + blocks * bb + 12, &codebook, 4);
    std::memcpy(d + blocks * bb + 16, book, 16);
    const int32_t stored_bits = pbits == bits ? 0 : pbits, base = stored_bits ? narrow : 0;
    const int32_t five = narrow6 && range.hi - range.lo <= 31 ? 1 : 0;  // Q5_K's 0..31
    std::memcpy(d + blocks * bb + 32, &stored_bits, 4);
    std::memcpy(d + blocks * bb + 36, &base, 4);
    std::memcpy(d + blocks * bb + 40, &five, 4);
    std::memcpy(d + blocks * bb + 44, &shift, 4);
    out.scales = out.zeros = Tensor{};  // their copies are inside data: the kernels read those
    return out;
  }
  out.data = packed_host(arena, {N, kernels::qweight_row_bytes(bits, K)});
  kernels::qweight_pack(bits, N, K, c, out.data.ptr<uint8_t>());
  // Offsets that are all -0 (GGUF Q8_0 / Q5_0 / Q6_K in groups of 16: no zero point) are not kept:
  // fewer bytes a token streams; the kernels take -0.
  const bool offsets = kernels::qweight_implied_zero(bits, N, K, canonical.group_size, scale_type_of(canonical),
                                                     canonical.scales.data, canonical.zeros.data) != 0;
  if (!offsets) out.zeros = Tensor{};
  kernels::FactoredParams fs, fo;
  if (factor_params(canonical, kernels::QLayout::Rows, offsets, &fs, &fo, pool)) {
    out.scales = factored_tensor(fs, arena);
    if (offsets) out.zeros = factored_tensor(fo, arena);
  }
  return out;
}

// Rows [r0, r1) of a canonical weight, in tensors of their own.
LinearWeight canonical_rows(const LinearWeight& w, int64_t r0, int64_t r1) {
  LinearWeight p = w;
  p.n = r1 - r0;
  p.part_rows.clear();
  auto rows = [&](const Tensor& t) {
    if (t.empty()) return t;
    const int64_t cols = t.dim(1);
    Tensor o = Tensor::empty_host(t.dtype, {p.n, cols});
    const size_t row_bytes = size_t(cols) * dtype_size(t.dtype);
    std::memcpy(o.data, static_cast<const uint8_t*>(t.data) + size_t(r0) * row_bytes, size_t(p.n) * row_bytes);
    return o;
  };
  p.data = rows(w.data), p.scales = rows(w.scales), p.zeros = rows(w.zeros);
  return p;
}

// w's groups merged in pairs while every pair holds the same scale and offset bits and the kernels
// take the larger group: a part fused with one of smaller groups (Q4_K's 32 split to Q6_K's 16) gets
// its own back (one integer dot product and FMA a block instead of two, half the parameters).
void merge_equal_groups(LinearWeight& w) {
  for (int g2 = w.group_size * 2; w.k % g2 == 0 && g2 % 32 == 0; g2 *= 2) {
    const int64_t G = w.k / w.group_size;
    const size_t es = dtype_size(w.scales.dtype);
    for (const Tensor* t : {&w.scales, &w.zeros}) {
      const auto* b = static_cast<const uint8_t*>(t->data);
      for (int64_t i = 0; i < w.n * G; i += 2)
        if (std::memcmp(b + size_t(i) * es, b + size_t(i + 1) * es, es) != 0) return;
    }
    for (Tensor* t : {&w.scales, &w.zeros}) {
      Tensor o = Tensor::empty_host(t->dtype, {w.n, G / 2});
      for (int64_t i = 0; i < w.n * G / 2; ++i)
        std::memcpy(static_cast<uint8_t*>(o.data) + size_t(i) * es, static_cast<const uint8_t*>(t->data) + size_t(2 * i) * es, es);
      *t = o;
    }
    w.group_size = g2;
  }
}

// The row-lane descriptor row of a packed weight (its last row).
const uint8_t* descriptor_of(const LinearWeight& packed) {
  return packed.data.ptr<uint8_t>() + (packed.data.dim(0) - 1) * packed.data.dim(1);
}

// A weight of fused parts (canonical.part_rows), each packed in its own form. Parts whose forms agree
// are one packing (their row blocks and one descriptor: what the fused weight packs into); else the
// parts side by side (kSegmentsTag), each run on its own rows by the kernels.
LinearWeight pack_parts(const LinearWeight& canonical, ThreadPool* pool, HostArena* arena) {
  std::vector<LinearWeight> parts;
  int64_t r0 = 0;
  for (int64_t rows : canonical.part_rows) {
    LinearWeight p = canonical_rows(canonical, r0, r0 + rows);
    merge_equal_groups(p);
    parts.push_back(pack_whole(p, pool, nullptr));  // transient: copied into the joined bytes below
    r0 += rows;
  }
  bool same = true;
  for (const LinearWeight& p : parts)
    same = same && p.group_size == parts[0].group_size && p.data.dim(1) == parts[0].data.dim(1) &&
           std::memcmp(descriptor_of(p), descriptor_of(parts[0]), size_t(kDescriptorBytes)) == 0;
  LinearWeight out = canonical;
  out.part_rows.clear();
  out.scales = out.zeros = Tensor{};
  if (same) {  // every part's rows are whole row blocks: their blocks in order, then the descriptor
    const int64_t bb = parts[0].data.dim(1);
    out.group_size = parts[0].group_size;
    out.data = packed_host(arena, {(canonical.n + 15) / 16 + 1, bb});  // every byte copied below
    uint8_t* o = out.data.ptr<uint8_t>();
    for (const LinearWeight& p : parts) {
      const size_t bytes = size_t(p.data.dim(0) - 1) * size_t(bb);
      std::memcpy(o, p.data.data, bytes);
      o += bytes;
    }
    std::memcpy(o, descriptor_of(parts[0]), size_t(bb));
    return out;
  }
  size_t total = 0;
  for (const LinearWeight& p : parts) total += p.data.nbytes();
  const size_t table = parts.size() * 32 + 8 + 8;  // per part 4 int64, the count, the tag (padded)
  out.data = packed_host(arena, {1, int64_t(total + table)});
  uint8_t* o = out.data.ptr<uint8_t>();
  std::memset(o + total, 0, table);  // the parts' bytes are copied below; the table's padding stays zero
  int64_t offset = 0;
  for (const LinearWeight& p : parts) {
    std::memcpy(o + offset, p.data.data, p.data.nbytes());
    offset += int64_t(p.data.nbytes());
  }
  offset = 0;
  uint8_t* t = o + total;
  for (const LinearWeight& p : parts) {
    const int64_t entry[4] = {p.n, offset, p.data.dim(1), p.group_size};
    std::memcpy(t, entry, 32);
    t += 32;
    offset += int64_t(p.data.nbytes());
  }
  const int64_t count = int64_t(parts.size());
  std::memcpy(t, &count, 8);
  std::memcpy(t + 8, kSegmentsTag, 4);
  return out;
}

bool is_segmented(const LinearWeight& w) {
  return w.data.dtype == DType::U8 && w.data.rank() == 2 && w.data.dim(0) == 1 && w.data.dim(1) >= 16 &&
         std::memcmp(w.data.ptr<uint8_t>() + w.data.dim(1) - 8, kSegmentsTag, 4) == 0;
}

// The weight with what its kernels read from it kept beside it (CpuPackedView).
LinearWeight with_view(LinearWeight w) {
  auto v = std::make_shared<CpuPackedView>();
  v->parts = cpu_qweight_segments(w);
  v->data = w.data.data;
  v->bytes = w.data.nbytes() + w.scales.nbytes() + w.zeros.nbytes();
  w.packed_view = std::move(v);
  return w;
}

}  // namespace

LinearWeight pack_cpu_quantized(const LinearWeight& canonical, ThreadPool* pool, HostArena* arena) {
  bool parts = canonical.part_rows.size() > 1 && canonical.input_perm.empty() &&
               kernels::qweight_preferred_layout(quantized_bits(canonical.format), canonical.group_size) ==
                   kernels::QLayout::RowLane16;
  int64_t rows = 0;
  for (int64_t r : canonical.part_rows) parts = parts && r > 0 && r % 16 == 0, rows += r;
  if (parts && rows == canonical.n) {
    check_group_params(canonical);
    const Tensor& c = canonical.data;
    LLM_CHECK(c.device == Device::CPU && c.rank() == 2 && c.dim(0) == canonical.n && c.dim(1) == canonical.k &&
              dtype_size(c.dtype) == 1)
        << weight_format_name(canonical.format) << ": canonical codes must be host u8 [" << canonical.n << ", "
        << canonical.k << "], got " << dtype_name(c.dtype) << " " << c.shape_str();
    return with_view(pack_parts(canonical, pool, arena));  // each part's codes checked as pack_whole checks a weight's
  }
  LinearWeight out = pack_whole(canonical, pool, arena);
  out.part_rows.clear();
  return with_view(std::move(out));
}

const std::vector<CpuQSegment>& cpu_qweight_parts(const LinearWeight& w, std::vector<CpuQSegment>& scratch) {
  if (const auto* v = dynamic_cast<const CpuPackedView*>(packed_view_of(w))) return v->parts;
  scratch = cpu_qweight_segments(w);
  return scratch;
}

std::vector<CpuQSegment> cpu_qweight_segments(const LinearWeight& w) {
  if (!is_segmented(w)) return {CpuQSegment{0, cpu_qweight_view(w)}};
  const uint8_t* d = w.data.ptr<uint8_t>();
  const int64_t bytes = w.data.dim(1);
  int64_t count = 0;
  std::memcpy(&count, d + bytes - 16, 8);
  LLM_CHECK(count > 1 && count <= 64 && bytes >= 16 + 32 * count)
      << weight_format_name(w.format) << " [" << w.n << ", " << w.k << "]: a packed weight of " << count << " parts";
  const uint8_t* table = d + bytes - 16 - 32 * count;
  std::vector<CpuQSegment> segs;
  int64_t row0 = 0;
  for (int64_t i = 0; i < count; ++i) {
    int64_t e[4];
    std::memcpy(e, table + 32 * i, 32);
    const int64_t blocks = (e[0] + 15) / 16;
    LLM_CHECK(e[0] > 0 && row0 + e[0] <= w.n && e[1] >= 0 && e[2] > 0 && e[1] + (blocks + 1) * e[2] <= table - d)
        << weight_format_name(w.format) << " [" << w.n << ", " << w.k << "]: part " << i << " of a packed weight";
    LinearWeight part;
    part.format = w.format, part.n = e[0], part.k = w.k, part.group_size = int(e[3]);
    part.data = Tensor::view(const_cast<uint8_t*>(d + e[1]), DType::U8, {blocks + 1, e[2]});
    segs.push_back({row0, cpu_qweight_view(part)});
    row0 += e[0];
  }
  LLM_CHECK(row0 == w.n) << weight_format_name(w.format) << " [" << w.n << ", " << w.k << "]: parts of "
                         << row0 << " rows";
  return segs;
}

kernels::QWeightView cpu_qweight_view(const LinearWeight& w) {
  LLM_CHECK(!is_segmented(w)) << weight_format_name(w.format) << " [" << w.n << ", " << w.k
                              << "]: a weight of parts packed each in its own form (cpu_qweight_segments)";
  kernels::QWeightView v;
  v.bits = quantized_bits(w.format);
  check_group_size(w);
  v.n = w.n, v.k = w.k, v.group = w.group_size;
  if (kernels::qweight_preferred_layout(v.bits, w.group_size) == kernels::QLayout::RowLane16) {
    const int64_t blocks = (w.n + 15) / 16;
    const auto* d = w.data.ptr<uint8_t>();
    const bool tagged = w.data.dtype == DType::U8 && w.data.rank() == 2 && w.data.dim(0) == blocks + 1 &&
                        w.data.dim(1) >= kDescriptorBytes && std::memcmp(d + blocks * w.data.dim(1), kRowLaneTag, 4) == 0;
    int32_t zero = -2, code = -1, codebook = -1, stored = -1, base = 0, five = -1, shift = -1;
    const int format_bits = v.bits;
    if (tagged) {
      const uint8_t* desc = d + blocks * w.data.dim(1);
      std::memcpy(&zero, desc + 4, 4), std::memcpy(&code, desc + 8, 4), std::memcpy(&codebook, desc + 12, 4);
      std::memcpy(&stored, desc + 32, 4), std::memcpy(&base, desc + 36, 4), std::memcpy(&five, desc + 40, 4);
      std::memcpy(&shift, desc + 44, 4);
      if (stored != 0) v.bits = stored;
      if (codebook == 1) v.codebook = reinterpret_cast<const int8_t*>(desc + 16);
      v.narrow_base = stored != 0 ? base : kernels::kWideCodes;
    }
    const bool narrow = v.narrow_base != kernels::kWideCodes;
    v.narrow_five = five == 1;
    v.scale_type = code == 2 ? kernels::ScaleType::Factored : code == 1 ? kernels::ScaleType::F16 : kernels::ScaleType::F32;
    // stored bits: 2 (plain, from 4 or 8), 3 and 4 (from 8: plain, narrow or a codebook), 6 (narrow, from 8)
    const bool kind_ok = stored == 0 ? codebook == 0
                         : stored == 2 ? !narrow && codebook == 0
                         : stored == 3 || stored == 4 ? format_bits == 8 && (codebook == 0 || !narrow)
                                                      : stored == 6 && format_bits == 8 && narrow && codebook == 0;
    LLM_CHECK(tagged && zero >= -1 && code >= 0 && code <= 2 && (codebook == 0 || codebook == 1) && kind_ok &&
              (five == 0 || (five == 1 && narrow && v.bits >= 6)) &&
              (!narrow || (base >= -128 && base <= 127)) && (shift == 0 || (code == 2 && shift > 0 && shift <= 64)) &&
              w.data.dim(1) == kernels::qweight_rowlane_block_bytes(v.bits, w.k, w.group_size, v.scale_type, zero))
        << weight_format_name(w.format) << " [" << w.n << ", " << w.k << "]: packed row-lane data must be u8 [" << blocks + 1
        << ", row block bytes] with its descriptor row, got " << dtype_name(w.data.dtype) << " " << w.data.shape_str()
        << " (was it made by upload_quantized?)";
    v.layout = kernels::QLayout::RowLane16;
    v.implied_zero = zero;
    v.out_shift = shift;
    v.packed = d;
    return v;
  }
  const int64_t count = w.n * (w.k / std::max(w.group_size, 1));
  if (is_factored_tensor(w.scales, count)) {  // Rows, factored (pack_cpu_quantized)
    check_group_size(w);
    LLM_CHECK(w.zeros.empty() || is_factored_tensor(w.zeros, count))
        << weight_format_name(w.format) << " [" << w.n << ", " << w.k << "]: factored scales with offsets "
        << dtype_name(w.zeros.dtype) << " " << w.zeros.shape_str();
    v.scale_type = kernels::ScaleType::Factored;
    v.scale = w.scales.data;
    v.scale_d = reinterpret_cast<const uint16_t*>(w.scales.ptr<uint8_t>() + count);
    if (!w.zeros.empty()) v.offset = w.zeros.data, v.offset_d = reinterpret_cast<const uint16_t*>(w.zeros.ptr<uint8_t>() + count);
  } else {
    check_group_params(w, /*zeros_optional=*/true);
    v.scale_type = scale_type_of(w);
    v.scale = w.scales.data;
    v.offset = w.zeros.empty() ? nullptr : w.zeros.data;
  }
  const std::vector<int64_t> packed_shape = {w.n, kernels::qweight_row_bytes(v.bits, w.k)};
  LLM_CHECK(w.data.dtype == DType::U8 && w.data.shape == packed_shape)
      << weight_format_name(w.format) << " [" << w.n << ", " << w.k << "]: packed data must be u8 [" << w.n << ", "
      << kernels::qweight_row_bytes(v.bits, w.k) << "], got " << dtype_name(w.data.dtype) << " " << w.data.shape_str()
      << " (was it made by upload_quantized?)";
  v.packed = w.data.ptr<uint8_t>();
  return v;
}

}  // namespace llmctl
