// The row-lane layout (qlinear.h, QLayout::RowLane16): packing, and the portable kernels that are
// its readable reference. Each output row is one lane; per (row, token) the order is
//   int8 mode: per group, per block b of 32 inputs: acc = fma(float(exact integer dot product),
//              scale * activation scale[b], acc); then acc = fma(offset, S[group], acc)
//              (S: qact_group_sums; with an implied zero z the offset is implied_offset(z, scale),
//              and z = 0 has no offset term); at the end acc + bias. Groups of 16, per block b:
//              the same fma for the dot product of inputs 0..15 under group 2b's scale, then of
//              16..31 under 2b + 1's, then the two offsets' terms in that order.
//   f32 mode:  four accumulators a[j], j = input % 4; per block, in the order the layout stores the
//              inputs (4-bit vector v: inputs 4v + j then 16 + 4v + j, 2 and 3 bits as 4; 8-bit vector
//              v: 4v + j; 6 bits as 8),
//              w = fma(code, scale, offset) (the scale and offset of the input's group),
//              a[j] = fma(x, w, a[j]); at the end
//              (a[0] + a[1]) + (a[2] + a[3]) + bias.
// A codebook (4 or 3 bits) puts codebook[code] where the code was, in both modes; narrow codes are the
// same codes (only their bytes differ), 6-bit ones too: the 8-bit narrow weight's results.
// The AVX-512 and AVX2 kernels (qlinear_rowlane_avx512.cpp, qlinear_rowlane_avx2.cpp) do the same
// operations in the same order, so their results equal these bit for bit; none depends on T or on the
// [n0, n1) split.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu/qlinear_impl.h"
#include "kernels/kernel_check.h"

namespace llmctl::kernels {

namespace detail {

RowLaneGeometry rowlane_geometry(int bits, int64_t k, int group, ScaleType st, int implied_zero) {
  KERNEL_CHECK((bits == 2 || bits == 3 || bits == 4 || bits == 6 || bits == 8) &&
               (group == 16 || (group > 0 && group % 32 == 0)) && k % 32 == 0 && k % group == 0)
      << "row-lane layout: bits " << bits << ", K " << k << ", group " << group
      << " (2, 3, 4, 6 or 8 bits, a group of 16 or a multiple of 32 dividing K, K a multiple of 32)";
  const bool factored = st == ScaleType::Factored;
  KERNEL_CHECK(!factored || (k / group) % kFactoredGroups == 0)
      << "row-lane layout, factored scales: K " << k << " is not whole super-blocks of " << kFactoredGroups
      << " groups of " << group;
  RowLaneGeometry g{};
  g.halves = group == 16 ? 2 : 1;
  g.blocks_per_group = group == 16 ? 1 : group / 32;
  g.code_bytes = 64 * bits;
  g.param_bytes = 16 * (factored ? 1 : st == ScaleType::F16 ? 2 : 4);
  g.offsets = implied_zero < 0;
  g.group_bytes = g.blocks_per_group * g.code_bytes + g.halves * (g.offsets ? 2 : 1) * g.param_bytes;
  g.groups = k / (32 * g.blocks_per_group);
  g.super_groups = factored ? kFactoredGroups / g.halves : 1;
  g.super_shift = factored ? (g.halves == 2 ? 2 : 3) : 0;
  static_assert(kFactoredGroups == 8, "super_shift is log2(kFactoredGroups)");
  g.header_bytes = factored ? (g.offsets ? 2 : 1) * 32 : 0;
  g.super_bytes = g.header_bytes + g.super_groups * g.group_bytes;
  g.row_block_bytes = g.groups / g.super_groups * g.super_bytes;
  return g;
}

namespace {

// Byte offset, within a block's code bytes, of row r's input i (0..31), and the nibble (4 bits).
inline int64_t code_byte(int bits, int r, int i, bool* high) {
  if (bits == 8) {
    *high = false;
    return (i / 4) * 64 + 4 * r + i % 4;
  }
  *high = i >= 16;
  const int j = i % 16;
  return (j / 4) * 64 + 4 * r + j % 4;
}

// 2 bits: the byte of row r's input i (0..31) and the code's shift in it. The 4-bit layout's
// vector v is vector v / 2's bytes shifted right by 2 (v % 2), its nibbles' low 2 bits the codes.
inline int64_t two_bit_byte(int r, int i, int* shift) {
  const int j = i % 16, v = j / 4;
  *shift = 2 * (v % 2) + (i >= 16 ? 4 : 0);
  return (v / 2) * 64 + 4 * r + j % 4;
}

// 3 bits: row r's input i (0..31) as the 4-bit layout's vector v = (i % 16) / 4, byte 4r + i % 4, low
// nibble for i < 16 (high: *high); vectors 0..2 are stored so, vector 3's bits spread over theirs.
inline int64_t three_bit_byte(int r, int i, int* v, bool* high) {
  *v = (i % 16) / 4, *high = i >= 16;
  return 4 * r + i % 4;
}

// Byte offset of row r, input i (0..31) in the 6-bit layout's quad for the input, and the vector
// (0..3) of the quad the 8-bit layout would hold it in (3: spread over the quad's top bits).
inline int64_t six_bit_byte(int r, int i, int* q) {
  const int v = i / 4;  // the 8-bit layout's vector
  *q = v % 4;
  return (v / 4) * 192 + 4 * r + i % 4;
}

// Code of row r, input i of a block (0..15, or -128..127; narrow_base: qlinear.h).
inline int code_of(int bits, const uint8_t* blk, int r, int i, int narrow_base) {
  if (bits == 6) {  // narrow codes only
    int q = 0;
    const uint8_t* v = blk + six_bit_byte(r, i, &q);
    const int stored = q < 3 ? v[64 * q] & 63 : (v[0] >> 6) | (v[64] >> 6) << 2 | (v[128] >> 6) << 4;
    return stored + narrow_base;
  }
  if (bits == 2) {  // codes 0..3 as they are
    int shift = 0;
    const int64_t at = two_bit_byte(r, i, &shift);  // before `shift` is read
    return (blk[at] >> shift) & 3;
  }
  if (bits == 3) {  // vectors 0..2 in each nibble's 3 low bits, vector 3's bit q in vector q's nibble's top bit
    int v = 0;
    bool high = false;
    const int64_t at = three_bit_byte(r, i, &v, &high);
    int stored = 0;
    if (v < 3) {
      stored = (blk[64 * v + at] >> (high ? 4 : 0)) & 7;
    } else {
      for (int q = 0; q < 3; ++q) stored |= ((blk[64 * q + at] >> (high ? 7 : 3)) & 1) << q;
    }
    return stored + (narrow_base != kWideCodes ? narrow_base : 0);
  }
  bool high = false;
  const uint8_t b = blk[code_byte(bits, r, i, &high)];
  const bool narrow = narrow_base != kWideCodes;
  if (bits == 8) return narrow ? int(b) + narrow_base : int(b) - 128;
  return (high ? b >> 4 : b & 0xF) + (narrow ? narrow_base : 0);
}

// The value code_of stands for: its codebook entry, where the weight has one (qlinear.h).
inline int value_of(const QWeightView& w, const uint8_t* blk, int r, int i) {
  const int c = code_of(w.bits, blk, r, i, w.narrow_base);
  return w.codebook ? int(w.codebook[c]) : c;
}

// Activation k's inputs in the order the f32 mode takes them within a block (see the top).
inline int f32_input(int bits, int step) {  // step 0..31
  if (bits > 4) return step;  // 6 and 8 bits: in order (2 bits: as 4, which they are unpacked into)
  const int v = step / 8, half = (step / 4) % 2, j = step % 4;
  return half * 16 + 4 * v + j;
}

// Row r's scale and offset of group h of unit g of the row block at rb (its parameters follow its
// codes; an implied zero point stores no offset).
inline std::pair<float, float> group_scale_offset(const QWeightView& w, const RowLaneGeometry& geo, const uint8_t* rb,
                                                  int64_t g, int h, int r) {
  const uint8_t* params = rowlane_group(geo, rb, g) + geo.blocks_per_group * geo.code_bytes;
  const uint8_t* hdr = rowlane_header(geo, rb, g);
  const float s = rowlane_param(w.scale_type, geo, params, hdr, 0, h, r);
  return {s, geo.offsets ? rowlane_param(w.scale_type, geo, params, hdr, 1, h, r) : implied_offset(w.implied_zero, s)};
}

}  // namespace

void qlinear_rows_q8_rowlane_scalar(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0,
                                    int64_t n1, float* out, int64_t ldo) {
  check_rowlane_kind(w);
  const RowLaneGeometry geo = rowlane_geometry(w.bits, w.k, w.group, w.scale_type, w.implied_zero);
  const int64_t K = w.k, G = geo.groups, blocks = K / 32, GS = K / w.group;  // GS: groups, for S
  std::vector<float> S(static_cast<size_t>(x.t * GS));
  qact_group_sums(x, w.group, S.data());
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* rb = w.packed + (n / 16) * geo.row_block_bytes;
    const int r = int(n % 16);
    for (int64_t t = 0; t < x.t; ++t) {
      const int8_t* q = x.q + t * K;
      float acc = 0;
      for (int64_t g = 0; g < G; ++g) {
        const uint8_t* gp = rowlane_group(geo, rb, g);
        if (geo.halves == 2) {  // group 16: block g's two halves, then their two offsets
          float o[2];
          for (int h = 0; h < 2; ++h) {
            const auto [s, oh] = group_scale_offset(w, geo, rb, g, h, r);
            int32_t dot = 0;
            for (int i = 16 * h; i < 16 * h + 16; ++i) dot += value_of(w, gp, r, i) * int32_t(q[g * 32 + i]);
            acc = std::fma(float(dot), s * x.scale[t * blocks + g], acc);
            o[h] = oh;
          }
          if (w.implied_zero != 0)
            for (int h = 0; h < 2; ++h) acc = std::fma(o[h], S[size_t(t * GS + 2 * g + h)], acc);
          continue;
        }
        const auto [s, o] = group_scale_offset(w, geo, rb, g, 0, r);
        for (int64_t j = 0; j < geo.blocks_per_group; ++j) {
          const int64_t b = g * geo.blocks_per_group + j;
          int32_t dot = 0;
          for (int i = 0; i < 32; ++i) dot += value_of(w, gp + j * geo.code_bytes, r, i) * int32_t(q[b * 32 + i]);
          acc = std::fma(float(dot), s * x.scale[t * blocks + b], acc);
        }
        if (w.implied_zero != 0) acc = std::fma(o, S[size_t(t * GS + g)], acc);  // z = 0: no offset term
      }
      out[t * ldo + n] = bias ? acc + bias[n] : acc;
    }
  }
}

void qlinear_rows_f32_rowlane_scalar(const float* x, int64_t T, const QWeightView& w, const float* bias, int64_t n0,
                                     int64_t n1, float* out, int64_t ldo) {
  check_rowlane_kind(w);
  const RowLaneGeometry geo = rowlane_geometry(w.bits, w.k, w.group, w.scale_type, w.implied_zero);
  const int64_t K = w.k, G = geo.groups;
  std::vector<float> wv(static_cast<size_t>(K));  // a row's values in the order the sums take them
  std::vector<int> input(static_cast<size_t>(K));  // and the input each multiplies
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* rb = w.packed + (n / 16) * geo.row_block_bytes;
    const int r = int(n % 16);
    for (int64_t g = 0, e = 0; g < G; ++g) {
      const uint8_t* gp = rowlane_group(geo, rb, g);
      const std::pair<float, float> so[2] = {group_scale_offset(w, geo, rb, g, 0, r),
                                             group_scale_offset(w, geo, rb, g, geo.halves - 1, r)};
      for (int64_t j = 0; j < geo.blocks_per_group; ++j)
        for (int step = 0; step < 32; ++step, ++e) {
          const int i = f32_input(w.bits, step);
          const auto [s, o] = so[geo.halves == 2 && i >= 16];  // group 16: inputs 16..31 are the second
          wv[size_t(e)] = std::fma(float(value_of(w, gp + j * geo.code_bytes, r, i)), s, o);
          input[size_t(e)] = int((g * geo.blocks_per_group + j) * 32 + i);
        }
    }
    for (int64_t t = 0; t < T; ++t) {
      const float* xr = x + t * K;
      float a[4] = {0, 0, 0, 0};
      for (int64_t e = 0; e < K; ++e) {
        const int i = input[size_t(e)];
        a[i % 4] = std::fma(xr[i], wv[size_t(e)], a[i % 4]);
      }
      const float sum = (a[0] + a[1]) + (a[2] + a[3]);
      out[t * ldo + n] = bias ? sum + bias[n] : sum;
    }
  }
}

void dequantize_row_rowlane(const QWeightView& w, int64_t n, float* out) {
  check_rowlane_kind(w);
  const RowLaneGeometry geo = rowlane_geometry(w.bits, w.k, w.group, w.scale_type, w.implied_zero);
  const uint8_t* rb = w.packed + (n / 16) * geo.row_block_bytes;
  const int r = int(n % 16);
  for (int64_t g = 0; g < geo.groups; ++g) {
    const uint8_t* gp = rowlane_group(geo, rb, g);
    const std::pair<float, float> so[2] = {group_scale_offset(w, geo, rb, g, 0, r),
                                           group_scale_offset(w, geo, rb, g, geo.halves - 1, r)};
    for (int64_t j = 0; j < geo.blocks_per_group; ++j) {
      float* dst = out + (g * geo.blocks_per_group + j) * 32;
      for (int i = 0; i < 32; ++i) {
        const auto [s, o] = so[geo.halves == 2 && i >= 16];
        const float prod = s * float(value_of(w, gp + j * geo.code_bytes, r, i));
        dst[i] = prod + o;
      }
    }
  }
}

}  // namespace detail

int64_t qweight_rowlane_block_bytes(int bits, int64_t k, int group, ScaleType st, int implied_zero) {
  return detail::rowlane_geometry(bits, k, group, st, implied_zero).row_block_bytes;
}

int qweight_implied_zero(int bits, int64_t n, int64_t k, int group, ScaleType st, const void* scale, const void* offset) {
  const int64_t count = n * (k / group);
  for (int z : {0, 8}) {
    if (z == 8 && bits != 4) continue;
    int64_t i = 0;
    for (; i < count; ++i) {
      const float want = detail::implied_offset(z, detail::load_scale(st, scale, i)), got = detail::load_scale(st, offset, i);
      if (std::memcmp(&want, &got, 4) != 0) break;
    }
    if (i == count) return z;
  }
  return -1;
}

namespace {
uint32_t word_at(const uint8_t* p) {  // 4 bytes as they lie (little or big endian alike: stored back by memcpy)
  uint32_t w;
  std::memcpy(&w, p, 4);
  return w;
}
// The 6-bit layout's bytes of the block of 32 inputs from c0 of 16 rows (qlinear.h), narrow codes.
void pack_six_bit_block(const uint8_t* const rows[16], int64_t c0, int narrow_base, uint8_t* o) {
  uint8_t st[16][32];  // stored values 0..63, gathered first (a loop the compiler vectorizes)
  for (int r = 0; r < 16; ++r)
    for (int i = 0; i < 32; ++i) st[r][i] = uint8_t(int(int8_t(rows[r][c0 + i])) - narrow_base);
  // four bytes (inputs j = 0..3) at a time: vector 4p + 3's value over the quad's top bits, each byte's
  // bits 2q, 2q + 1 moved to its bits 6, 7 (the masks keep every byte's own bits)
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 3; ++q)
      for (int r = 0; r < 16; ++r) {
        const uint32_t v = word_at(&st[r][16 * p + 4 * q]), top = word_at(&st[r][16 * p + 12]);
        const uint32_t out = v | ((top >> (2 * q)) & 0x03030303u) << 6;
        std::memcpy(o + 192 * p + 64 * q + 4 * r, &out, 4);
      }
}
// The 2-bit layout's bytes of the block of 32 inputs from c0 of 16 rows (qlinear.h), codes 0..3.
void pack_two_bit_block(const uint8_t* const rows[16], int64_t c0, uint8_t* o) {
  // two_bit_byte's map unrolled: input i = 16 h + 4 v + j (v = 2u + s) of row r at byte 64 u + 4 r + j,
  // shift 2 s + 4 h
  for (int u = 0; u < 2; ++u)
    for (int r = 0; r < 16; ++r)
      for (int j = 0; j < 4; ++j) {
        const uint8_t* c = rows[r] + c0 + 8 * u + j;
        o[64 * u + 4 * r + j] = uint8_t(c[0] | c[4] << 2 | c[16] << 4 | c[20] << 6);
      }
}
// The 3-bit layout's bytes of the same block (qlinear.h), stored values 0..7 (narrow: code - base):
// the 4-bit layout's vectors 0..2 in their nibbles' 3 low bits, vector 3's bit q in vector q's top bits.
void pack_three_bit_block(const uint8_t* const rows[16], int64_t c0, int narrow_base, uint8_t* o) {
  uint8_t st[16][32];
  for (int r = 0; r < 16; ++r)
    for (int i = 0; i < 32; ++i)
      st[r][i] = uint8_t(narrow_base != kWideCodes ? int(int8_t(rows[r][c0 + i])) - narrow_base : rows[r][c0 + i]);
  for (int q = 0; q < 3; ++q)
    for (int r = 0; r < 16; ++r)
      for (int j = 0; j < 4; ++j) {
        const int top = ((st[r][12 + j] >> q) & 1) << 3 | ((st[r][28 + j] >> q) & 1) << 7;
        o[64 * q + 4 * r + j] = uint8_t(st[r][4 * q + j] | st[r][16 + 4 * q + j] << 4 | top);
      }
}
}  // namespace

void qweight_pack_rowlane(int bits, int64_t n, int64_t k, int group, ScaleType st, const uint8_t* codes,
                          const void* scale, const void* offset, uint8_t* out, int implied_zero, int narrow_base) {
  const detail::RowLaneGeometry geo = detail::rowlane_geometry(bits, k, group, st, implied_zero);
  const bool narrow = narrow_base != kWideCodes;
  KERNEL_CHECK(bits != 6 || narrow) << "row-lane layout: 6-bit codes are narrow codes (a base is needed)";
  KERNEL_CHECK(bits != 2 || !narrow) << "row-lane layout: 2-bit codes are codes 0..3 (not narrow)";
  const int span = bits == 3 ? 7 : bits == 4 ? 15 : 63;  // narrow: code - base in 0..span
  const bool plain_small = bits <= 3 && !narrow;         // codes 0..3 (2 bits), 0..7 (3 bits)
  if (plain_small || narrow) {  // the codes' range in one pass, then the first misfit named
    const CodeRange r = qweight_code_range(n * k, codes);
    const int top = (1 << bits) - 1;
    const bool fits = plain_small ? r.lo >= 0 && r.hi <= top : r.lo - narrow_base >= 0 && r.hi - narrow_base <= span;
    for (int64_t i = 0; !fits && i < n * k; ++i) {
      KERNEL_CHECK(!plain_small || codes[i] <= top)
          << "row-lane layout: code " << int(codes[i]) << " at " << i << " does not fit " << bits << " bits";
      const int stored = int(int8_t(codes[i])) - narrow_base;
      KERNEL_CHECK(plain_small || (stored >= 0 && stored <= span))
          << "row-lane layout: code " << int(int8_t(codes[i])) << " is not within 0.." << span << " of the narrow base "
          << narrow_base;
    }
  }
  const int64_t nb = (n + 15) / 16, G = geo.groups, bpg = geo.blocks_per_group;
  const bool factored = st == ScaleType::Factored;
  const size_t ps = factored ? 1 : st == ScaleType::F16 ? 2 : 4;
  // padding rows: code 0 (narrow: the base, stored 0), scale 0, offset 0
  const std::vector<uint8_t> zero_row(size_t(k), narrow ? uint8_t(int8_t(narrow_base)) : uint8_t(0));
  // Factored: each row's D (per super-block) and m (per group), for the scales and the offsets.
  const FactoredParams* fp[2] = {static_cast<const FactoredParams*>(scale), static_cast<const FactoredParams*>(offset)};
  const int64_t groups = n * (k / group);
  for (int which = 0; factored && which < (geo.offsets ? 2 : 1); ++which)
    KERNEL_CHECK(fp[which] && fp[which]->m.size() == size_t(groups) &&
                 fp[which]->d.size() == size_t(groups / detail::kFactoredGroups))
        << "row-lane layout: factored " << (which ? "offsets" : "scales") << " of the wrong size";
  // Written in layout order, one row block at a time (the code_byte map, unrolled).
  for (int64_t blk = 0; blk < nb; ++blk) {
    const uint8_t* rows[16];
    for (int r = 0; r < 16; ++r) rows[r] = blk * 16 + r < n ? codes + (blk * 16 + r) * k : zero_row.data();
    uint8_t* rb = out + blk * geo.row_block_bytes;
    for (int64_t g = 0; g < G; ++g) {
      uint8_t* gp = const_cast<uint8_t*>(detail::rowlane_group(geo, rb, g));
      uint8_t* hdr = const_cast<uint8_t*>(detail::rowlane_header(geo, rb, g));
      for (int64_t jb = 0; jb < bpg; ++jb) {
        const int64_t c0 = (g * bpg + jb) * 32;
        uint8_t* o = gp + jb * geo.code_bytes;
        if (bits == 6) {
          pack_six_bit_block(rows, c0, narrow_base, o);
          continue;
        }
        if (bits == 2) {
          pack_two_bit_block(rows, c0, o);
          continue;
        }
        if (bits == 3) {
          pack_three_bit_block(rows, c0, narrow_base, o);
          continue;
        }
        // input i's stored value: narrow, code - base; else 8 bits code ^ 0x80, 4 bits the code
        // (gathered first, one mode a loop, then laid out: the loops the compiler vectorizes)
        uint8_t st[16][32];
        for (int r = 0; r < 16; ++r) {
          const uint8_t* c = rows[r] + c0;
          if (narrow)
            for (int i = 0; i < 32; ++i) st[r][i] = uint8_t(int(int8_t(c[i])) - narrow_base);
          else
            for (int i = 0; i < 32; ++i) st[r][i] = bits == 8 ? uint8_t(c[i] ^ 0x80) : c[i];
        }
        for (int v = 0; v < (bits == 4 ? 4 : 8); ++v)
          for (int r = 0; r < 16; ++r) {  // inputs 4v + j, j = 0..3, four bytes at a time
            uint32_t out = word_at(&st[r][4 * v]);  // 4 bits: and 16 + 4v + j in the high nibbles
            if (bits == 4) out = (out & 0x0F0F0F0Fu) | (word_at(&st[r][16 + 4 * v]) & 0x0F0F0F0Fu) << 4;
            std::memcpy(o + v * 64 + 4 * r, &out, 4);
          }
      }
      uint8_t* params = gp + bpg * geo.code_bytes;
      for (int h = 0; h < geo.halves; ++h) {
        const int64_t gg = g * geo.halves + h, GG = G * geo.halves;  // the group, of GG a row
        for (int r = 0; r < 16; ++r) {
          const int64_t row = blk * 16 + r;
          uint8_t* sp = params + h * geo.param_bytes + r * ps;                  // slot h
          uint8_t* op = params + (geo.halves + h) * geo.param_bytes + r * ps;  // slot halves + h
          if (row < n && factored) {
            for (int which = 0; which < (geo.offsets ? 2 : 1); ++which) {
              (which ? op : sp)[0] = uint8_t(fp[which]->m[size_t(row * GG + gg)]);
              if (gg % detail::kFactoredGroups == 0)
                std::memcpy(hdr + 2 * (16 * which + r), &fp[which]->d[size_t((row * GG + gg) / detail::kFactoredGroups)], 2);
            }
          } else if (row < n) {
            std::memcpy(sp, static_cast<const uint8_t*>(scale) + size_t(row * GG + gg) * ps, ps);
            if (geo.offsets) std::memcpy(op, static_cast<const uint8_t*>(offset) + size_t(row * GG + gg) * ps, ps);
          } else {
            std::memset(sp, 0, ps);
            if (geo.offsets) std::memset(op, 0, ps);
            if (factored && gg % detail::kFactoredGroups == 0)
              for (int which = 0; which < (geo.offsets ? 2 : 1); ++which) std::memset(hdr + 2 * (16 * which + r), 0, 2);
          }
        }
      }
    }
  }
}

void qweight_unpack_rowlane(int bits, int64_t n, int64_t k, int group, ScaleType st, const uint8_t* packed,
                            uint8_t* codes, int implied_zero, int narrow_base) {
  const detail::RowLaneGeometry geo = detail::rowlane_geometry(bits, k, group, st, implied_zero);
  KERNEL_CHECK(bits != 6 || narrow_base != kWideCodes) << "row-lane layout: 6-bit codes are narrow codes (a base is needed)";
  for (int64_t row = 0; row < n; ++row) {
    const uint8_t* rb = packed + (row / 16) * geo.row_block_bytes;
    for (int64_t b = 0; b < k / 32; ++b) {
      const uint8_t* blk = detail::rowlane_group(geo, rb, b / geo.blocks_per_group) + (b % geo.blocks_per_group) * geo.code_bytes;
      for (int i = 0; i < 32; ++i) codes[row * k + b * 32 + i] = uint8_t(detail::code_of(bits, blk, int(row % 16), i, narrow_base));
    }
  }
}

QLayout qweight_preferred_layout(int /*bits*/, int group) {
  // select_cpu_kernels(..., rows_layout) keeps the Rows layout (to measure one against the other).
  const bool rows_only = detail::rows_layout_selected();
  const bool simd = std::strcmp(qlinear_isa(), "scalar") != 0;  // AVX-512 VNNI, AVX-VNNI or AVX2
  return simd && (group % 32 == 0 || group == 16) && !rows_only ? QLayout::RowLane16 : QLayout::Rows;
}

}  // namespace llmctl::kernels
