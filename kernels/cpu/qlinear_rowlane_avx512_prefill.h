// The int8 mode's prefill tile of the AVX-512 row-lane kernel, included by qlinear_rowlane_avx512.cpp
// after its helpers: RB row blocks (2, or 1 for groups of 16) x up to 4 tokens (8 with one row block:
// groups of 16, whose tiles of 4 decoded each block's codes for half the tokens: IQ2_XS-like weights
// 0.90-0.96x the time, 1024 -> 5632 and 2816 -> 1024 at 128 tokens, 1 thread, a Zen 5), every kind of
// code (unsigned as stored, sums started from base x the activations' sums, as q8_tile's).
// Weight-stationary, as the AVX2 one (qlinear_rowlane_avx2_prefill.h): a block's codes are decoded
// once into 8 registers per row block (register i: inputs 4i..4i+3 of the 16 rows), then token by
// token the 8 broadcasts of its activations feed RB x 2 vpdpbusd chains of 4 (q8_tile: RB x NT chains
// of 8, each 8 x vpdpbusd's latency long), over activations interleaved per tile of 4 tokens
// (TokenTiles). Measured 1.1-1.2x q8_tile on Q4_0-like weights (1024 x 1024, 128 tokens, 1 thread).
// The integers and the f32 operations per (row, token), and their order, are q8_tile's (and so the
// scalar reference's): the results are the same bits.
#pragma once
#include "kernels/cpu/qlinear_token_tiles.h"

namespace llmctl::kernels::detail {

namespace {

// Factored scales (which 0) or offsets (1) of row block i's group g, half sg, in expand_factored's
// buffer [row block][group][which][half][16 rows]: the offset of its 16 floats.
inline int64_t factored_slot(int64_t G, int SG, int i, int64_t g, int which, int sg) {
  return (((i * G + g) * 2 + which) * SG + sg) * 16;
}

// Whether the prefill tile loads factored scales from expand_factored's buffer rather than multiplying
// them out itself: for plain and narrow codes (K-quants: Q4_K_M prompts 0.90-0.95x the time, 4 pairs),
// not for codebooks (IQ2_XXS, IQ3_S: 1.04-1.15x the time with it, on a Zen 5; why was not found). A
// codebook unpacked to 8-bit codes (UNPACKED) takes it in groups of 16 only: IQ2_XS prompts 0.96-0.99x
// the time with it, IQ3_S's groups of 32 1.02-1.12x (3 pairs each, 128 tokens).
template <ScaleType ST, bool LUT, bool UNPACKED = false, int SG = 1>
constexpr bool uses_factored_buffer() {
  return ST == ScaleType::Factored && (UNPACKED ? SG == 2 : !LUT);
}

// The factored scales and offsets of row blocks rb .. rb + blocks - 1 as f32 (load_params16's D x m,
// the same bits) into pre (factored_slot; 2 x blocks x groups x 2 x SG x 16 floats): once a row block
// instead of once a token tile.
template <int SG>
void expand_factored(const RowLaneGeometry& geo, const uint8_t* rb, int blocks, float* pre) {
  const int64_t G = geo.groups, bpg = geo.blocks_per_group;
  for (int i = 0; i < blocks; ++i) {
    const uint8_t* r = rb + i * geo.row_block_bytes;
    for (int64_t g = 0; g < G; ++g) {
      const uint8_t* params = rowlane_group(geo, r, g) + bpg * geo.code_bytes;
      for (int which = 0; which < (geo.offsets ? 2 : 1); ++which)
        for (int sg = 0; sg < SG; ++sg)
          _mm512_storeu_ps(pre + factored_slot(G, SG, i, g, which, sg),
                           load_params16<ScaleType::Factored>(geo, params, rowlane_header(geo, r, g), which, sg));
    }
  }
}

// Row blocks rb .. rb + RB - 1 (first row nb) x the NT first tokens of token tile `tile` of tt (NT > 4:
// tiles `tile` and tile + 1; its first token's outputs at out); m[i]: row block i's lanes to store.
// The other arguments are q8_tile's; asum is tt's. BPG: blocks per group if fixed (1: every GGUF
// type's groups; measured faster, the loops over groups and their blocks then one), else 0 (geo's).
// TWO (with FOUR): 2-bit codes (nibble_vector). pre (BUF, uses_factored_buffer): the row blocks' scales
// and offsets as expand_factored wrote them, loaded instead of multiplied out again in every token tile.
template <int RB, int NT, bool FOUR, bool TWO, bool LUT, bool BASED, ScaleType ST, int SG, int BPG,
          bool BUF = uses_factored_buffer<ST, LUT>()>
__attribute__((noinline)) void q8_prefill_tile(const RowLaneGeometry& geo, int zero, const uint8_t* rb, int base,
                                               __m512i book, const TokenTiles& tt, int64_t tile, const float* bias,
                                               int64_t nb, const __mmask16* m, float* out, int64_t ldo,
                                               const float* pre) {
  static_assert(NT >= 1 && NT <= 8 && (NT <= 4 || RB == 1));
  const int64_t G = geo.groups, bpg = BPG ? BPG : geo.blocks_per_group, next = tt.blocks * 128;
  const __m512i nib = code_mask<TWO>();
  const int8_t* aq = tt.tile_q(tile);
  const float* axs = tt.tile_xs(tile);
  const float* aS = tt.tile_S(tile);
  const int32_t* ahs = tt.tile_hs(tile);
  __m512 acc[RB][NT];  // every loop over it unrolled: indexed by a variable, it would live in memory
#pragma GCC unroll 2
  for (int i = 0; i < RB; ++i)
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    const uint8_t* gp[RB];
    const uint8_t* hdr[RB];
    __m512 s[RB][SG];
#pragma GCC unroll 2
    for (int i = 0; i < RB; ++i) {
      gp[i] = rowlane_group(geo, rb + i * geo.row_block_bytes, g);
      hdr[i] = rowlane_header(geo, rb + i * geo.row_block_bytes, g);
#pragma GCC unroll 2
      for (int sg = 0; sg < SG; ++sg) {
        if constexpr (BUF)
          s[i][sg] = _mm512_loadu_ps(pre + factored_slot(G, SG, i, g, 0, sg));
        else
          s[i][sg] = load_params16<ST>(geo, gp[i] + bpg * geo.code_bytes, hdr[i], 0, sg);
      }
    }
    for (int64_t jb = 0; jb < bpg; ++jb) {
      const int64_t b = g * bpg + jb;
      __m512i w[RB][8];  // w[i][k]: inputs 4k..4k+3 of row block i
#pragma GCC unroll 2
      for (int i = 0; i < RB; ++i) {
        const uint8_t* cp = gp[i] + jb * geo.code_bytes;
#pragma GCC unroll 8
        for (int v = 0; v < (FOUR ? 4 : 8); ++v) {
          const __m512i W = FOUR ? nibble_vector<TWO>(cp, v) : _mm512_loadu_si512(cp + 64 * v);
          if constexpr (FOUR) {
            w[i][v] = _mm512_and_si512(W, nib);                              // inputs 4v + j
            w[i][4 + v] = _mm512_and_si512(_mm512_srli_epi16(W, 4), nib);  // inputs 16 + 4v + j
            if constexpr (LUT) w[i][v] = _mm512_shuffle_epi8(book, w[i][v]), w[i][4 + v] = _mm512_shuffle_epi8(book, w[i][4 + v]);
          } else {
            w[i][v] = W;
          }
        }
      }
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) {  // token j: slot j % 4 of token tile j / 4
        const int8_t* a = aq + (j / 4) * next + b * 128 + 32 * (j % 4);
        const __m512 xs = _mm512_set1_ps(axs[(j / 4) * (next / 32) + b * 4 + j % 4]);
#pragma GCC unroll 2
        for (int sg = 0; sg < SG; ++sg) {  // group 16: inputs 0..15 (w[.][0..3]) and 16..31 (w[.][4..7])
          __m512i init = _mm512_setzero_si512();
          if constexpr (BASED) {  // half blocks 2b, 2b + 1 of this token
            const int32_t* hs = ahs + (j / 4) * (next / 16) + 2 * b * 4 + j % 4;
            init = _mm512_set1_epi32(base * (SG == 2 ? hs[4 * sg] : hs[0] + hs[4]));
          }
          __m512i d0[RB], d1[RB];
#pragma GCC unroll 2
          for (int i = 0; i < RB; ++i) d0[i] = init, d1[i] = _mm512_setzero_si512();
#pragma GCC unroll 8
          for (int k = 4 * sg; k < 4 * sg + 8 / SG; k += 2) {
            const __m512i a0 = bcast4(a + 4 * k), a1 = bcast4(a + 4 * k + 4);
#pragma GCC unroll 2
            for (int i = 0; i < RB; ++i)
              d0[i] = _mm512_dpbusd_epi32(d0[i], w[i][k], a0), d1[i] = _mm512_dpbusd_epi32(d1[i], w[i][k + 1], a1);
          }
#pragma GCC unroll 2
          for (int i = 0; i < RB; ++i)
            acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(d0[i], d1[i])), _mm512_mul_ps(s[i][sg], xs),
                                        acc[i][j]);
        }
      }
    }
    if (zero == 0) continue;  // implied zero 0: no offset term
#pragma GCC unroll 2
    for (int i = 0; i < RB; ++i)
#pragma GCC unroll 2
      for (int sg = 0; sg < SG; ++sg) {
        constexpr bool kBuffer = BUF;
        const __m512 o = !geo.offsets ? _mm512_mul_ps(s[i][sg], _mm512_set1_ps(float(-zero)))
                         : kBuffer    ? _mm512_loadu_ps(pre + factored_slot(G, SG, i, g, 1, sg))
                                      : load_params16<ST>(geo, gp[i] + bpg * geo.code_bytes, hdr[i], 1, sg);
#pragma GCC unroll 8
        for (int j = 0; j < NT; ++j)
          acc[i][j] =
              _mm512_fmadd_ps(o, _mm512_set1_ps(aS[(j / 4) * tt.gs * 4 + (g * SG + sg) * 4 + j % 4]), acc[i][j]);
      }
  }
#pragma GCC unroll 2
  for (int i = 0; i < RB; ++i) {
    const int64_t n = nb + 16 * i;
    const __m512 bv = bias ? _mm512_maskz_loadu_ps(m[i], bias + n) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j)
      _mm512_mask_storeu_ps(out + j * ldo + n, m[i], bias ? _mm512_add_ps(acc[i][j], bv) : acc[i][j]);
  }
}

}  // namespace

}  // namespace llmctl::kernels::detail
