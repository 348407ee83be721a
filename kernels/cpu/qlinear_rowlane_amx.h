// The int8 mode's prefill on AMX (Intel's tile matrix unit, Sapphire Rapids and later), included by
// qlinear_rowlane_avx512.cpp after its helpers (the file is compiled with AMX enabled; nothing runs
// it unless amx_selected()).
//
// A row block's codes are first written out in the 8-bit layout as the signed values they stand for
// (a code, a codebook's value, a stored or narrow code plus its base: the integers the other kernels'
// sums come to). Then one tdpbssd multiplies 16 tokens' int8 activations (16 rows x 32 bytes, read
// in place: x.q is [T, K]) by a block of those values (8 rows of 64 bytes: input quads x 16 rows, as
// the layout stores them) into its 16 x 16 exact integer dot products, which take q8_prefill_tile's
// f32 operations per (row, token) in its order (one convert, one FMA by scale x activation scale; per
// group the offsets' FMA; the bias): the results are its bits, and so the scalar reference's. Groups
// of 16: a product per half block (inputs 0..15, then 16..31). A unit's products are scaled while the
// tile unit works on the next one.
// Row blocks outer (values written once), tiles of 16 tokens inner; a call's last T % 16 tokens go to
// the AVX-512 kernel.
#pragma once
#include <immintrin.h>

namespace llmctl::kernels::detail {

namespace {

// The tiles: 0, 1 the products (16 tokens x 16 rows of int32), 4, 5 activations (16 tokens x the
// inputs of a unit: 32, or 16 for groups of 16), 6, 7 codes (the unit's input quads x 16 rows).
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

template <int SG>
const AmxTileConfig& amx_tile_config() {
  static const AmxTileConfig c = [] {
    AmxTileConfig t;
    for (int i : {0, 1}) t.rows[i] = 16, t.colsb[i] = 64;
    for (int i : {4, 5}) t.rows[i] = 16, t.colsb[i] = uint16_t(32 / SG);
    for (int i : {6, 7}) t.rows[i] = uint8_t(8 / SG), t.colsb[i] = 64;
    return t;
  }();
  return c;
}

// Row block rb (geometry geo) at out in the 8-bit layout (geo8): each block's codes as the signed
// values they stand for (the code, a codebook's value, a narrow or stored code plus its base), the
// integers q8_prefill_tile's sums come to; headers and parameters copied.
template <bool FOUR, bool TWO, bool SIX, bool LUT, bool BASED>
void rowlane_block_as_values(const RowLaneGeometry& geo, const RowLaneGeometry& geo8, const uint8_t* rb,
                             __m512i book, int base, uint8_t* out) {
  const __m512i bv = _mm512_set1_epi8(char(base));
  auto put = [&](uint8_t* dst, __m512i v) {
    _mm512_storeu_si512(dst, BASED && !LUT ? _mm512_add_epi8(v, bv) : v);  // stored + base wraps to the value
  };
  rowlane_six_to_eight(geo, geo8, rb, out, [&](const uint8_t* src, uint8_t* dst) {
    if constexpr (SIX) {
      for (int p = 0; p < 2; ++p) {
        __m512i q[4];
        six_bit_quad(src, p, q);
        for (int v = 0; v < 4; ++v) put(dst + 64 * (4 * p + v), q[v]);
      }
    } else if constexpr (FOUR) {
      const __m512i nib = code_mask<TWO>();
      for (int v = 0; v < 4; ++v) {
        const __m512i W = nibble_vector<TWO>(src, v);
        __m512i lo = _mm512_and_si512(W, nib), hi = _mm512_and_si512(_mm512_srli_epi16(W, 4), nib);
        if constexpr (LUT) lo = _mm512_shuffle_epi8(book, lo), hi = _mm512_shuffle_epi8(book, hi);
        put(dst + 64 * v, lo);
        put(dst + 64 * (4 + v), hi);
      }
    } else {
      for (int v = 0; v < 8; ++v) put(dst + 64 * v, _mm512_loadu_si512(src + 64 * v));
    }
  });
}

// The codebook's values as bytes in each 128-bit lane (vpshufb's table).
__m512i book_values(const int8_t* codebook) {
  if (!codebook) return _mm512_setzero_si512();
  return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codebook)));
}

// Tokens t0 .. t0 + 15 x the row block at rb (values, 8-bit layout: geometry geo) whose first row is
// nb: the outputs of its lanes in m. S: x's group sums [T, gs]. c: 2 KB of 64-byte aligned scratch.
// Units (a block of 32 inputs; groups of 16: each half) in order.
// The tile's activations are at a, unit after unit, each 16 tokens x 32 / SG bytes (amx_pack_tokens).
template <ScaleType ST, int SG, int BPG>
void amx_tile16(const RowLaneGeometry& geo, int zero, const uint8_t* rb, const QActivations& x, const int8_t* a,
                const float* S, int64_t gs, int64_t t0, const float* bias, int64_t nb, __mmask16 m, float* out,
                int64_t ldo, int32_t* c) {
  const int64_t K = x.k, bpg = BPG ? BPG : geo.blocks_per_group, kb = K / 32;
  const int64_t units = geo.groups * bpg * SG, per_group = bpg * SG;
  const float* xs = x.scale + t0 * kb;
  auto codes = [&](int64_t u) __attribute__((always_inline)) {  // unit u's code bytes: block u / SG of its group, its half
    const int64_t b = u / SG;
    return rowlane_group(geo, rb, b / bpg) + (b % bpg) * geo.code_bytes + (u % SG) * 256;
  };
  // unit u into product tile P (activations A, codes B)
#define LLMCTL_AMX_ISSUE(P, A, B, u)                           \
  do {                                                         \
    _tile_loadd(A, a + (u) * (512 / SG), 32 / SG);             \
    _tile_loadd(B, codes(u), 64);                              \
    _tile_zero(P);                                             \
    _tile_dpbssd(P, A, B);                                     \
  } while (0)
  __m512 acc[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
  // unit u's products (at p) into acc: x its scale x the tokens' activation scales; after a group's
  // last unit its offsets x S
  auto finish = [&](int64_t u, const int32_t* p) __attribute__((always_inline)) {
    const int64_t b = u / SG, g = b / bpg;
    const int sg = int(u % SG);
    const uint8_t* gp = rowlane_group(geo, rb, g);
    const uint8_t* hdr = rowlane_header(geo, rb, g);
    const uint8_t* params = gp + bpg * geo.code_bytes;
    const __m512 s = load_params16<ST>(geo, params, hdr, 0, sg);
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      const __m512 d = _mm512_cvtepi32_ps(_mm512_load_si512(p + 16 * j));
      acc[j] = _mm512_fmadd_ps(d, _mm512_mul_ps(s, _mm512_set1_ps(xs[j * kb + b])), acc[j]);
    }
    if (zero == 0 || u % per_group != per_group - 1) return;  // implied zero 0: no offset term
#pragma GCC unroll 2
    for (int h = 0; h < SG; ++h) {
      const __m512 o = geo.offsets ? load_params16<ST>(geo, params, hdr, 1, h)
                                   : _mm512_mul_ps(load_params16<ST>(geo, params, hdr, 0, h), _mm512_set1_ps(float(-zero)));
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(o, _mm512_set1_ps(S[(t0 + j) * gs + g * SG + h]), acc[j]);
    }
  };
  // Unit u's products go to tile u % 2, then to c[u % 2]; they are scaled after unit u + 1 is issued
  // and stored, so that their loads find stores made a unit earlier (a tile store does not forward to
  // loads) and the tile unit works on u + 1 meanwhile.
  for (int64_t u = 0; u < units; u += 2) {
    LLMCTL_AMX_ISSUE(0, 4, 6, u);
    _tile_stored(0, c, 64);
    if (u > 0) finish(u - 1, c + 256);
    if (u + 1 < units) {
      LLMCTL_AMX_ISSUE(1, 5, 7, u + 1);
      _tile_stored(1, c + 256, 64);
    }
    finish(u, c);
  }
  if (units % 2 == 0) finish(units - 1, c + 256);
#undef LLMCTL_AMX_ISSUE
  const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + nb) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j)
    _mm512_mask_storeu_ps(out + (t0 + j) * ldo + nb, m, bias ? _mm512_add_ps(acc[j], bv) : acc[j]);
}

// Tokens [0, tiles x 16) of x as the tiles read them: tile after tile, unit (32 / SG inputs) after
// unit, 16 tokens x 32 / SG bytes each (contiguous lines, where x's rows are K bytes apart).
template <int SG>
void amx_pack_tokens(const QActivations& x, int64_t tiles, int8_t* out) {
  constexpr int64_t kUnit = 32 / SG;
  const int64_t K = x.k, units = K / kUnit;
  for (int64_t t = 0; t < tiles; ++t)
    for (int64_t u = 0; u < units; ++u)
      for (int64_t r = 0; r < 16; ++r, out += kUnit) std::memcpy(out, x.q + (16 * t + r) * K + u * kUnit, kUnit);
}

// Tokens [0, x.t / 16 * 16) of x on AMX (the caller runs the rest).
template <bool FOUR, bool TWO, bool SIX, bool LUT, bool NARROW, ScaleType ST, int SG>
void q8_rows_amx(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0, int64_t n1, float* out,
                 int64_t ldo) {
  const RowLaneGeometry geo = rowlane_geometry(w.bits, w.k, w.group, w.scale_type, w.implied_zero);
  const RowLaneGeometry geo8 = rowlane_geometry(8, w.k, w.group, w.scale_type, w.implied_zero);
  KERNEL_CHECK(geo.halves == SG) << "row-lane kernel for " << SG << " groups a unit given " << geo.halves;
  const int64_t tiles = x.t / 16, gs = geo.groups * SG;
  thread_local std::vector<float> S;
  S.resize(static_cast<size_t>(tiles * 16 * gs));
  qact_group_sums(qactivation_rows(x, 0, tiles * 16), w.group, S.data());
  const int base = NARROW ? w.narrow_base : -128;  // code = stored value + base (8 bits, narrow)
  const __m512i book = book_values(LUT ? w.codebook : nullptr);
  thread_local std::vector<uint8_t> values;
  values.resize(size_t(geo8.row_block_bytes));
  thread_local std::vector<int8_t> packed;
  packed.resize(size_t(tiles * 16 * x.k));
  amx_pack_tokens<SG>(x, tiles, packed.data());
  alignas(64) int32_t c[512];
  _tile_loadconfig(&amx_tile_config<SG>());
  for (int64_t nb = n0 / 16 * 16; nb < n1; nb += 16) {
    // the row block's values once, then every token tile over them (from L1 / L2)
    rowlane_block_as_values<FOUR, TWO, SIX, LUT, uses_base<FOUR, LUT, NARROW>()>(
        geo, geo8, w.packed + (nb / 16) * geo.row_block_bytes, book, base, values.data());
    const __mmask16 m = lane_mask(nb, n0, n1);
    for (int64_t t = 0; t < tiles; ++t)
      geo8.blocks_per_group == 1
          ? amx_tile16<ST, SG, 1>(geo8, w.implied_zero, values.data(), x, packed.data() + t * 16 * x.k, S.data(), gs,
                                  16 * t, bias, nb, m, out, ldo, c)
          : amx_tile16<ST, SG, 0>(geo8, w.implied_zero, values.data(), x, packed.data() + t * 16 * x.k, S.data(), gs,
                                  16 * t, bias, nb, m, out, ldo, c);
  }
  _tile_release();
}

}  // namespace

}  // namespace llmctl::kernels::detail
