// The int8 mode's prefill on AMX (Intel's tile matrix unit, Sapphire Rapids and later), included by
// qlinear_rowlane_avx512.cpp after its helpers (the file is compiled with AMX enabled; nothing runs
// it unless amx_selected()).
//
// A row block is first written out for the tiles (AmxRowBlock): each block's codes as the signed
// values they stand for (a code, a codebook's value, a stored or narrow code plus its base: the
// integers the other kernels' sums come to), block after block, in the layout's order (input quads x
// 16 rows: the tile operand as it is), and its scales and offsets as f32 (load_params16's values).
// A call's activations come likewise, 16 tokens x 32 bytes a block: from the quantizer (tile_q, written
// once for every thread's rows) or, without them, copied here. Then one tdpbssd multiplies
// 16 tokens' activations by a block's values into its 16 x 16 exact integer dot products, which take
// q8_prefill_tile's f32 operations per (row, token) in its order (one convert, one FMA by scale x
// activation scale; per group the offsets' FMA; the bias): the results are its bits, and so the
// scalar reference's. Groups of 16: a product per half block (inputs 0..15, then 16..31).
// Row blocks outer, tiles of 16 tokens inner; a call's last T % 16 tokens go to the AVX-512 kernel.
// Measured on a Sapphire Rapids class VM: the tile unit and the AVX-512 scaling do not overlap (a
// product costs ~19 cycles, its scaling ~20, both ~44), so the scaling's work per product is kept to
// its convert, multiply and FMA per token, and a unit's products are stored two units after it is
// issued and scaled a unit after that (a tile store does not forward to loads).
#pragma once
#include <immintrin.h>

namespace llmctl::kernels::detail {

namespace {

// The tiles: 0..3 the products (16 tokens x 16 rows of int32), 4, 5 activations (16 tokens x the
// inputs of a unit: 32, or 16 for groups of 16), 6, 7 values (the unit's input quads x 16 rows).
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

template <int SG>
const AmxTileConfig& amx_tile_config() {
  static const AmxTileConfig c = [] {
    AmxTileConfig t;
    for (int i : {0, 1, 2, 3}) t.rows[i] = 16, t.colsb[i] = 64;
    for (int i : {4, 5}) t.rows[i] = 16, t.colsb[i] = uint16_t(32 / SG);
    for (int i : {6, 7}) t.rows[i] = uint8_t(8 / SG), t.colsb[i] = 64;
    return t;
  }();
  return c;
}

// A row block as the tiles read it: values [blocks][512] (a unit of a group of 16 is half a block),
// scales and offsets [groups x SG][16] f32 (offsets only with a zero point other than 0).
struct AmxRowBlock {
  std::vector<uint8_t> values;
  std::vector<float> scales, offsets;
};

// The codebook's values as bytes in each 128-bit lane (vpshufb's table).
__m512i book_values(const int8_t* codebook) {
  if (!codebook) return _mm512_setzero_si512();
  return _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codebook)));
}

// Row block rb (geometry geo; zero: its implied zero point) into out.
template <bool FOUR, bool TWO, bool SIX, bool LUT, bool BASED, ScaleType ST, int SG>
void amx_row_block(const RowLaneGeometry& geo, int zero, const uint8_t* rb, __m512i book, int base, AmxRowBlock& out) {
  const int64_t bpg = geo.blocks_per_group;
  const __m512i bv = _mm512_set1_epi8(char(base));
  uint8_t* dst = out.values.data();
  auto put = [&](__m512i v) {
    _mm512_storeu_si512(dst, BASED && !LUT ? _mm512_add_epi8(v, bv) : v);  // stored + base wraps to the value
    dst += 64;
  };
  for (int64_t g = 0; g < geo.groups; ++g) {
    const uint8_t* gp = rowlane_group(geo, rb, g);
    const uint8_t* hdr = rowlane_header(geo, rb, g);
    for (int64_t jb = 0; jb < bpg; ++jb) {
      const uint8_t* src = gp + jb * geo.code_bytes;
      if constexpr (SIX) {
        for (int p = 0; p < 2; ++p) {
          __m512i q[4];
          six_bit_quad(src, p, q);
          for (int v = 0; v < 4; ++v) put(q[v]);
        }
      } else if constexpr (FOUR) {
        const __m512i nib = code_mask<TWO>();
        __m512i hi[4];
        for (int v = 0; v < 4; ++v) {  // inputs 4v + j (low nibbles), then 16 + 4v + j (high)
          const __m512i W = nibble_vector<TWO>(src, v);
          __m512i lo = _mm512_and_si512(W, nib);
          hi[v] = _mm512_and_si512(_mm512_srli_epi16(W, 4), nib);
          if constexpr (LUT) lo = _mm512_shuffle_epi8(book, lo), hi[v] = _mm512_shuffle_epi8(book, hi[v]);
          put(lo);
        }
        for (int v = 0; v < 4; ++v) put(hi[v]);
      } else {
        for (int v = 0; v < 8; ++v) put(_mm512_loadu_si512(src + 64 * v));
      }
    }
    const uint8_t* params = gp + bpg * geo.code_bytes;
    for (int h = 0; h < SG; ++h) {
      const __m512 sc = load_params16<ST>(geo, params, hdr, 0, h);
      _mm512_storeu_ps(out.scales.data() + 16 * (g * SG + h), sc);
      if (zero == 0) continue;  // no offset term
      const __m512 o = geo.offsets ? load_params16<ST>(geo, params, hdr, 1, h)
                                   : _mm512_mul_ps(sc, _mm512_set1_ps(float(-zero)));
      _mm512_storeu_ps(out.offsets.data() + 16 * (g * SG + h), o);
    }
  }
}

// Each group's sum of its half blocks' sums (tile_sum), per token of `tiles` tiles: S [tiles][K /
// group][16], qact_group_sums' values (its additions, in its order, 16 tokens at a time).
void amx_group_sums(const float* tile_sum, int64_t tiles, int64_t K, int group, float* S) {
  const int64_t halves = K / 16, per = group / 16;
  for (int64_t t = 0; t < tiles; ++t, tile_sum += halves * 16)
    for (int64_t g = 0; g < K / group; ++g, S += 16) {
      __m512 s = _mm512_setzero_ps();
      for (int64_t i = 0; i < per; ++i) s = _mm512_add_ps(s, _mm512_loadu_ps(tile_sum + (g * per + i) * 16));
      _mm512_storeu_ps(S, s);
    }
}

// A tile of 16 tokens' activations as amx_tile16 reads them: codes (QActivations::tile_q's), and the
// scales and group sums with the 16 tokens' values of a block (group) side by side.
struct AmxTokens {
  const int8_t* q;  // [K / 32][16][32]
  const float* xs;  // [K / 32][16]
  const float* S;   // [groups x SG][16]
};

// Tokens t0 .. t0 + 15 (tt) x the row block rb whose first row is nb: the outputs of its lanes in m.
// K: inputs; BPG: blocks a group if fixed (1: every GGUF type's groups: no division a unit), else 0
// (bpg's); c: 2 KB of 64-byte aligned scratch. Units (a block of 32 inputs; groups of 16: each half)
// in order.
template <int SG, int BPG>
void amx_tile16(const AmxRowBlock& rb, int64_t bpg_, bool offsets, int64_t K, const AmxTokens& tt, int64_t t0,
                const float* bias, int64_t nb, __mmask16 m, float* out, int64_t ldo, int32_t* c) {
  const int64_t bpg = BPG ? BPG : bpg_;
  const int64_t units = K / (32 / SG), per_group = bpg * SG;
  const int8_t* a = tt.q;
  const float* xs = tt.xs;
  const float* S = tt.S;
  const uint8_t* values = rb.values.data();
  // unit u into product tile P (activations A, values B)
#define LLMCTL_AMX_ISSUE(P, A, B, u)                          \
  do {                                                        \
    _tile_loadd(A, a + (u) / SG * 512 + (u) % SG * 16, 32);   \
    _tile_loadd(B, values + (u) * (512 / SG), 64);            \
    _tile_zero(P);                                            \
    _tile_dpbssd(P, A, B);                                    \
  } while (0)
  __m512 acc[16];
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) acc[j] = _mm512_setzero_ps();
  // unit u's products (at p) into acc: x its scale x the tokens' activation scales; after a group's
  // last unit its offsets x S
  auto finish = [&](int64_t u, const int32_t* p) __attribute__((always_inline)) {
    const int64_t b = u / SG, g = u / per_group;
    const __m512 s = _mm512_loadu_ps(rb.scales.data() + 16 * (g * SG + u % SG));
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      const __m512 d = _mm512_cvtepi32_ps(_mm512_load_si512(p + 16 * j));
      acc[j] = _mm512_fmadd_ps(d, _mm512_mul_ps(s, _mm512_set1_ps(xs[b * 16 + j])), acc[j]);
    }
    if (!offsets || u % per_group != per_group - 1) return;
#pragma GCC unroll 2
    for (int h = 0; h < SG; ++h) {
      const __m512 o = _mm512_loadu_ps(rb.offsets.data() + 16 * (g * SG + h));
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(o, _mm512_set1_ps(S[(g * SG + h) * 16 + j]), acc[j]);
    }
  };
  // Step u issues unit u into product tile u % 4 (activations and values into pair u % 2), stores
  // unit u - 2's products to c[u % 2] and scales unit u - 3's, stored a step before.
#define LLMCTL_AMX_STEP(P, A, B, DONE, u)                                  \
  do {                                                                    \
    if ((u) < units) LLMCTL_AMX_ISSUE(P, A, B, u);                        \
    if ((u) >= 2 && (u) < units + 2) _tile_stored(DONE, c + 256 * (P % 2), 64); \
    if ((u) >= 3) finish((u) - 3, c + 256 * (1 - P % 2));                \
  } while (0)
  for (int64_t u = 0; u < units + 3; u += 4) {
    LLMCTL_AMX_STEP(0, 4, 6, 2, u);
    if (u + 1 < units + 3) LLMCTL_AMX_STEP(1, 5, 7, 3, u + 1);
    if (u + 2 < units + 3) LLMCTL_AMX_STEP(2, 4, 6, 0, u + 2);
    if (u + 3 < units + 3) LLMCTL_AMX_STEP(3, 5, 7, 1, u + 3);
  }
#undef LLMCTL_AMX_STEP
#undef LLMCTL_AMX_ISSUE
  const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + nb) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j)
    _mm512_mask_storeu_ps(out + (t0 + j) * ldo + nb, m, bias ? _mm512_add_ps(acc[j], bv) : acc[j]);
}

// Tokens [0, x.t / 16 * 16) of x on AMX (the caller runs the rest), kTokenChunk at a time (the copies
// of their activations bounded, as TokenTiles' are).
template <bool FOUR, bool TWO, bool SIX, bool LUT, bool NARROW, ScaleType ST, int SG>
void q8_rows_amx(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0, int64_t n1, float* out,
                 int64_t ldo) {
  const RowLaneGeometry geo = rowlane_geometry(w.bits, w.k, w.group, w.scale_type, w.implied_zero);
  KERNEL_CHECK(geo.halves == SG) << "row-lane kernel for " << SG << " groups a unit given " << geo.halves;
  static_assert(kTokenChunk % 16 == 0, "chunks of whole tiles");
  const int64_t gs = geo.groups * SG, kb = x.k / 32;
  const int base = NARROW ? w.narrow_base : -128;  // code = stored value + base (8 bits, narrow)
  const __m512i book = book_values(LUT ? w.codebook : nullptr);
  thread_local AmxRowBlock rb;
  rb.values.resize(size_t(w.k * 16));
  rb.scales.resize(size_t(gs * 16));
  rb.offsets.resize(size_t(gs * 16));
  thread_local std::vector<int8_t> own_q;  // the tiles where x comes without them
  thread_local std::vector<float> own_scale, own_sum, S_t;  // S_t: [tiles][gs][16]
  alignas(64) int32_t c[512];
  _tile_loadconfig(&amx_tile_config<SG>());
  for (int64_t c0 = 0; c0 + 16 <= x.t; c0 += kTokenChunk) {
    const int64_t tiles = std::min(kTokenChunk, x.t - c0) / 16;
    const QActivations xc = qactivation_rows(x, c0, c0 + tiles * 16);
    const bool shared = xc.tile_rows == 16;
    const int8_t* tile_q = xc.tile_q;
    const float *tile_scale = xc.tile_scale, *tile_sum = xc.tile_sum;
    if (!shared) {  // a view that does not start at a tile, or activations quantized without them
      own_q.resize(size_t(tiles * 16 * x.k));
      own_scale.resize(size_t(tiles * 16 * kb));
      own_sum.resize(size_t(tiles * 16 * 2 * kb));
      qact_write_tiles(xc, 0, tiles * 16, 16, own_q.data(), own_scale.data(), own_sum.data(), nullptr);
      tile_q = own_q.data(), tile_scale = own_scale.data(), tile_sum = own_sum.data();
    }
    S_t.resize(size_t(tiles * gs * 16));
    if (w.implied_zero != 0) amx_group_sums(tile_sum, tiles, x.k, w.group, S_t.data());  // offsets x S
    for (int64_t nb = n0 / 16 * 16; nb < n1; nb += 16) {
      // the row block once, then every token tile over it (from L1 / L2)
      amx_row_block<FOUR, TWO, SIX, LUT, uses_base<FOUR, LUT, NARROW>(), ST, SG>(
          geo, w.implied_zero, w.packed + (nb / 16) * geo.row_block_bytes, book, base, rb);
      const __mmask16 m = lane_mask(nb, n0, n1);
      for (int64_t t = 0; t < tiles; ++t) {
        const AmxTokens tt{tile_q + t * 16 * x.k, tile_scale + t * kb * 16, S_t.data() + t * gs * 16};
        float* o = out + c0 * ldo;
        geo.blocks_per_group == 1
            ? amx_tile16<SG, 1>(rb, 1, w.implied_zero != 0, x.k, tt, 16 * t, bias, nb, m, o, ldo, c)
            : amx_tile16<SG, 0>(rb, geo.blocks_per_group, w.implied_zero != 0, x.k, tt, 16 * t, bias, nb, m, o, ldo, c);
      }
    }
  }
  _tile_release();
}

}  // namespace

}  // namespace llmctl::kernels::detail
