// The int8 mode's prefill tile of the AVX2 and AVX-VNNI row-lane kernels, included by
// qlinear_rowlane_avx2_tile.h after its helpers: half h of a row block x up to 4 tokens, every kind
// of code (4-bit plain, narrow or a codebook's; 8-bit narrow, the 6-bit ones once unpacked; 8-bit wide,
// Q8_0's and int8 checkpoints', signed without VNNI as a codebook's values are); and without VNNI the
// 8-token tile (q8_tile8) for every kind.
// Weight-stationary: a block's codes are decoded once into 8 registers (4 bits: the low and high
// nibbles of its 4 vectors, through the codebook if any; 8 bits: its 8 vectors), register i then
// holding the 4 inputs 4i..4i+3 of each of the half's 8 rows, and every token's activations are
// broadcast against them. The tokens' activations, scales and sums are first interleaved per tile of
// 4 (TokenTiles), so that the loop walks one pointer per kind instead of one per token. q8_tile,
// which decodes per vector, keeps NT x SG integer sums and addresses each token on its own, spilled
// vector and address registers to the stack in prefill (16 of each) and ran 1.2-1.3x slower.
// The integers and the f32 operations per (row, token), and their order, are q8_tile's (and so the
// scalar reference's): the results are the same bits.
#pragma once
#include "kernels/cpu/qlinear_token_tiles.h"

namespace llmctl::kernels::detail {

namespace {

// The integer dot product of codes w[0..N) (w[i]: inputs 4i..4i+3 of 8 rows) with activations a[0..4N)
// per row. vpmaddubsw: 4 bits summed in 16 bits (at most 8 products of 2 x 15 x 127).
// VNNI: unsigned codes of any kind, vpdpbusd in two chains (its latency). SIGNED (a codebook's
// values, or wide 8-bit codes, without VNNI): w holds |value| and sv the values (in memory: 16
// registers hold one of the two), each product |value| x (activation with the value's sign) at most
// 2 x 128 x 127 a pair, summed in 32 bits.
template <bool VNNI, bool FOUR, int N, bool SIGNED = false>
__attribute__((always_inline)) inline __m256i codes_dot(const __m256i* w, const int8_t* a, __m256i ones,
                                                      const int8_t* sv = nullptr) {
  if constexpr (SIGNED) {
    auto product = [&](int i) {
      const __m256i v = _mm256_load_si256(reinterpret_cast<const __m256i*>(sv + 32 * i));
      return _mm256_madd_epi16(_mm256_maddubs_epi16(w[i], _mm256_sign_epi8(bcast4(a + 4 * i), v)), ones);
    };
    __m256i d0 = product(0), d1 = product(1);
#pragma GCC unroll 4
    for (int i = 2; i < N; i += 2) d0 = _mm256_add_epi32(d0, product(i)), d1 = _mm256_add_epi32(d1, product(i + 1));
    return _mm256_add_epi32(d0, d1);
  } else if constexpr (VNNI) {
    __m256i d0 = dpbusd<VNNI>(_mm256_setzero_si256(), w[0], bcast4(a));
    __m256i d1 = dpbusd<VNNI>(_mm256_setzero_si256(), w[1], bcast4(a + 4));
#pragma GCC unroll 4
    for (int i = 2; i < N; i += 2) {
      d0 = dpbusd<VNNI>(d0, w[i], bcast4(a + 4 * i));
      d1 = dpbusd<VNNI>(d1, w[i + 1], bcast4(a + 4 * i + 4));
    }
    return _mm256_add_epi32(d0, d1);
  } else if constexpr (FOUR) {
    __m256i d = _mm256_maddubs_epi16(w[0], bcast4(a));
#pragma GCC unroll 8
    for (int i = 1; i < N; ++i) d = _mm256_add_epi16(d, _mm256_maddubs_epi16(w[i], bcast4(a + 4 * i)));
    return _mm256_madd_epi16(d, ones);
  } else {
    static_assert(FOUR, "narrow 8-bit codes without VNNI take narrow_block");
  }
}

// A token's block into its f32 sums in memory: acc += float(dot) x (the rows' scales sv x the token's
// activation scale xs), q8_prefill_tile's operations in its order.
__attribute__((always_inline)) inline void accumulate_token(float* acc, __m256i dot, __m256 sv, float xs) {
  _mm256_store_ps(acc, _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(sv, _mm256_set1_ps(xs)),
                                       _mm256_load_ps(acc)));
}

// positions(p, q) for each quad q of a block's CB-bit codes at cp (inputs 4q..4q+3 of the half's 8
// rows), p their codes as bytes: each 4-bit vector v unpacked once, its low nibbles quad v (inputs
// 4v + j), its high ones quad 4 + v (16 + 4v + j).
template <int CB, class Positions>
__attribute__((always_inline)) inline void for_block_positions(const uint8_t* cp, Positions&& positions) {
  const __m256i nib = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int v = 0; v < 4; ++v) {
    const __m256i W = nibble_vector<CB>(cp, v);
    positions(_mm256_and_si256(W, nib), v);
    positions(_mm256_and_si256(_mm256_srli_epi16(W, 4), nib), 4 + v);
  }
}

// quad(u, q) for each quad q of a block's codes at cp (inputs 4q..4q+3 of the half's 8 rows), u their
// values + 128 as bytes: a codebook's looked up (lut_u: its values + 128; CB: its positions' bits),
// wide 8-bit codes as stored.
template <bool FOUR, int CB, class Quad>
__attribute__((always_inline)) inline void for_block_quads(const uint8_t* cp, __m256i lut_u, Quad&& quad) {
  if constexpr (FOUR) {
    for_block_positions<CB>(cp, [&](__m256i p, int q) { quad(_mm256_shuffle_epi8(lut_u, p), q); });
  } else {
#pragma GCC unroll 8
    for (int v = 0; v < 8; ++v) quad(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + 64 * v)), v);
  }
}

// The values + 128 of a quad zero-extended to 16 bits: those of each 4-byte lane's even bytes (inputs
// 4q, 4q + 2 of a row), and of its odd ones (4q + 1, 4q + 3).
inline __m256i even_bytes16(__m256i u) { return _mm256_and_si256(u, _mm256_set1_epi16(0x00FF)); }
inline __m256i odd_bytes16(__m256i u) { return _mm256_srli_epi16(u, 8); }

// Half h of the row block at rb, its blocks' quads as widened_block takes them, once for all its
// token tiles: block b's quad q at eo[16 b + 2 q] (even_bytes16) and eo[16 b + 2 q + 1] (odd).
template <bool FOUR, int CB>
void widen_half(const RowLaneGeometry& geo, const uint8_t* rb, int h, const int8_t* codebook, __m256i* eo) {
  __m256i lut_u = _mm256_setzero_si256();
  if constexpr (FOUR)
    lut_u = _mm256_xor_si256(_mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codebook))),
                             _mm256_set1_epi8(char(0x80)));
  RowLaneGroupCursor cur(geo, rb);
  for (int64_t g = 0; g < geo.groups; ++g, cur.next())
    for (int64_t jb = 0; jb < geo.blocks_per_group; ++jb) {
      __m256i* out = eo + 16 * (g * geo.blocks_per_group + jb);
      for_block_quads<FOUR, CB>(cur.group() + jb * geo.code_bytes + 32 * h, lut_u, [&](__m256i u, int q) {
        _mm256_store_si256(out + 2 * q, even_bytes16(u));
        _mm256_store_si256(out + 2 * q + 1, odd_bytes16(u));
      });
    }
}

// base x the activations' integer sums of a block's NT tokens, per group of the block (SG 2: its two
// halves; SG 1: both halves summed): corr[sg][j], 4 tokens a vector operation instead of scalar
// arithmetic, a multiply and a broadcast from a register each. The tiles skip it for base 0 (Q5_K's
// codes; the harness: 35.3 -> 30.5 cycles a block of 4 tokens); vectorized, Q6_K's prefill x1.05
// (generate, ABBA pairs). hs, next: as in narrow_block.
template <int NT, int SG>
__attribute__((always_inline)) inline void base_corrections(const int32_t* hs, int64_t next, int base,
                                                           int32_t (*corr)[8]) {
  const __m128i b = _mm_set1_epi32(base);
#pragma GCC unroll 2
  for (int u = 0; u < (NT > 4 ? 2 : 1); ++u) {  // token tile u: tokens 4u..4u+3
    const __m128i h0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hs + u * (next / 16)));
    const __m128i h1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hs + u * (next / 16) + 4));
    if constexpr (SG == 2) {
      _mm_store_si128(reinterpret_cast<__m128i*>(corr[0] + 4 * u), _mm_mullo_epi32(h0, b));
      _mm_store_si128(reinterpret_cast<__m128i*>(corr[1] + 4 * u), _mm_mullo_epi32(h1, b));
    } else {
      _mm_store_si128(reinterpret_cast<__m128i*>(corr[0] + 4 * u), _mm_mullo_epi32(_mm_add_epi32(h0, h1), b));
    }
  }
}

// widened_block's groups of 16: group sg's four quads (4 sg .. 4 sg + 3) against every token, from
// -128 x the token's half-block sum sg, then its scales s[sg]; the integers and the f32 steps per
// (row, token) in q8_prefill_tile's order (group 0, then group 1, block by block).
template <bool FOUR, int CB, int NT, bool PRE>
__attribute__((always_inline)) inline void widened_halves(const void* src, const int16_t* a16, const int32_t* hs,
                                                         const float* xs, int64_t next, __m256i lut_u,
                                                         const float* const* s, float (*acc)[8]) {
  const int8_t* a0 = reinterpret_cast<const int8_t*>(a16);
  const int8_t* a1 = reinterpret_cast<const int8_t*>(a16 + next);
  asm("" : "+r"(a0), "+r"(a1));  // as in widened_block
  [[maybe_unused]] const auto* cp = static_cast<const uint8_t*>(src);  // not PRE: the codes
  alignas(16) int32_t corr[2][8];
  base_corrections<NT, 2>(hs, next, -128, corr);
  auto pair = [&](int j, int p) { return bcast4((j < 4 ? a0 : a1) + 2 * (32 * (j % 4) + p)); };
#pragma GCC unroll 2
  for (int sg = 0; sg < 2; ++sg) {
    __m256i d[NT];
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) d[j] = _mm256_set1_epi32(corr[sg][j]);
    auto quad = [&](__m256i e, __m256i o, int q) {
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) {
        d[j] = _mm256_add_epi32(d[j], _mm256_add_epi32(_mm256_madd_epi16(e, pair(j, 4 * q)),
                                                       _mm256_madd_epi16(o, pair(j, 4 * q + 2))));
        asm("" : "+x"(d[j]));  // as in widened_block
      }
    };
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const int q = 4 * sg + v;
      if constexpr (PRE) {
        const __m256i* eo = static_cast<const __m256i*>(src);
        quad(_mm256_load_si256(eo + 2 * q), _mm256_load_si256(eo + 2 * q + 1), q);
      } else if constexpr (FOUR) {  // vector v's low nibbles are quad v, its high ones quad 4 + v
        const __m256i W = nibble_vector<CB>(cp, v);
        const __m256i c = _mm256_and_si256(sg ? _mm256_srli_epi16(W, 4) : W, _mm256_set1_epi8(0x0F));
        const __m256i u = _mm256_shuffle_epi8(lut_u, c);
        quad(even_bytes16(u), odd_bytes16(u), q);
      } else {  // wide 8-bit codes: vector q is quad q
        const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + 64 * q));
        quad(even_bytes16(u), odd_bytes16(u), q);
      }
    }
    const __m256 sv = _mm256_loadu_ps(s[sg]);
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) accumulate_token(acc[j], d[j], sv, xs[(j / 4) * (next / 32) + j % 4]);
  }
}

// Signed values without VNNI (a codebook's, wide 8-bit codes'), a block's group of 32 (widened_tile) or
// its two groups of 16 (widened_halves, called from here), as
// 16-bit products: each value + 128, a byte (a codebook's looked up so, a wide code's as stored), is
// zero-extended to 16 bits twice, the even bytes of each 4-byte lane (mask) and the odd ones (shift),
// and vpmaddwd takes them against the token's activations as int16 (TokenTiles::q16, in that order);
// -128 x the activations' integer sum (TokenTiles::wc, each token's sum starting from it) then makes
// the signed dot product, the same integer. Two vpmaddwd per 4 inputs x 8 rows a token, where moving
// the values' signs to the activations took vpsignb + vpmaddubsw + vpmaddwd, and with no per-block
// store and reload of the values (128 tokens, 1 thread, an AVX2-only EPYC: wide codes 1.05-1.19x, a
// codebook's 1.00-1.05x). The block's vectors go one at a time against every token (each token's
// integer sum in a register). A vpmaddwd and the vpaddd after it cost about 0.62 cycles there (0.5 for
// vpmaddwd alone), twice a 4-bit code's vpmaddubsw + vpaddw for the same products: the bound of this
// kind of code; what else a block costs (its codes' decoding, the f32 step per token) is spread over up
// to 8 tokens, token j from token tile j / 4, slot j % 4 (the tiles `next` int16s apart in q16 and
// next / 32 elements in wc and xs).
// PRE: the block's quads from widen_half (src: its 16 vectors), else decoded here (src: its codes +
// 32 x the half). a16: tile 0's int16 activations of the block (4 x 32); wc, xs: its corrections and
// activation scales (4 each); s[sg]: the 8 rows' scales of group sg; acc[j]: token j's outputs.
// SG 2 (groups of 16: IQ2_XS / IQ2_S / IQ1_M codebooks): the block's quads 0..3 (inputs 0..15) and
// 4..7 (16..31) in two passes, each from -128 x its half-block sums (hs, as narrow_block's) instead of wc.
template <bool FOUR, int CB, int NT, bool PRE, int SG = 1>
__attribute__((always_inline)) inline void widened_block(const void* src, const int16_t* a16, const int32_t* wc,
                                                        const int32_t* hs, const float* xs, int64_t next,
                                                        __m256i lut_u, const float* const* s, float (*acc)[8]) {
  static_assert(NT >= 1 && NT <= 8);
  if constexpr (SG == 2) {
    widened_halves<FOUR, CB, NT, PRE>(src, a16, hs, xs, next, lut_u, s, acc);
    return;
  }
  // the two tiles' activations through two base registers (their addresses per token and quad spilled
  // to the stack otherwise)
  const int8_t* a0 = reinterpret_cast<const int8_t*>(a16);
  const int8_t* a1 = reinterpret_cast<const int8_t*>(a16 + next);
  asm("" : "+r"(a0), "+r"(a1));
  __m256i d[NT];
#pragma GCC unroll 8
  for (int j = 0; j < NT; ++j) d[j] = _mm256_set1_epi32(wc[(j / 4) * (next / 32) + j % 4]);
  auto pair = [&](int j, int p) {  // token j's int16 activations p, p + 1 in every lane
    return bcast4((j < 4 ? a0 : a1) + 2 * (32 * (j % 4) + p));
  };
  auto quad = [&](__m256i e, __m256i o, int q) {  // quad q: even_bytes16, odd_bytes16
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) {
      d[j] = _mm256_add_epi32(d[j], _mm256_add_epi32(_mm256_madd_epi16(e, pair(j, 4 * q)),
                                                     _mm256_madd_epi16(o, pair(j, 4 * q + 2))));
      // the sum stays a chain: reassociated into one tree of the block's 16 products, GCC computed them
      // all first and spilled them (1.3x slower; 1.7x with 8 tokens)
      asm("" : "+x"(d[j]));
    }
  };
  if constexpr (PRE) {
    const __m256i* eo = static_cast<const __m256i*>(src);
#pragma GCC unroll 8
    for (int q = 0; q < 8; ++q) quad(_mm256_load_si256(eo + 2 * q), _mm256_load_si256(eo + 2 * q + 1), q);
  } else {
    for_block_quads<FOUR, CB>(static_cast<const uint8_t*>(src), lut_u,
                          [&](__m256i u, int q) { quad(even_bytes16(u), odd_bytes16(u), q); });
  }
  const __m256 sv = _mm256_loadu_ps(s[0]);
#pragma GCC unroll 8
  for (int j = 0; j < NT; ++j) {
    accumulate_token(acc[j], d[j], sv, xs[(j / 4) * (next / 32) + j % 4]);
  }
}

// One block of 4-bit codes without a codebook (plain; NARROW: code - base; CB 2 or 3: 2- or 3-bit codes,
// taken as 4-bit ones are) x NT <= 8 tokens, q8_prefill_tile's integers (vpmaddubsw of codes and activations,
// at most 8 summed in 16 bits; + base x the activations' sums if NARROW), the block's vectors decoded
// one at a time against every token (each token's 16-bit sums in a register) instead of all 8 at
// once against one token's. SG 2: the block is two groups, the low nibbles (inputs 0..15) and the high
// ones (16..31), taken in two passes (their sums would not fit the registers together), each with
// its scales s[sg]. a8, hs (NARROW), xs, next: as in narrow_block.
template <int NT, int SG, int CB, bool NARROW>
__attribute__((always_inline)) inline void four_block(const uint8_t* cp, const int8_t* a8, const int32_t* hs,
                                                     const float* xs, int64_t next, int base, const float* const* s,
                                                     float (*acc)[8]) {
  static_assert(NT >= 1 && NT <= 8);
  const __m256i nib = code_mask<CB>(), ones = _mm256_set1_epi16(1);
  const int8_t* a0 = a8;
  const int8_t* a1 = a8 + next;
  asm("" : "+r"(a0), "+r"(a1));  // as in widened_block
  alignas(16) int32_t corr[SG][8];
  if (NARROW && base != 0) base_corrections<NT, SG>(hs, next, base, corr);
#pragma GCC unroll 2
  for (int sg = 0; sg < SG; ++sg) {
    __m256i d[NT];
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      const __m256i W = nibble_vector<CB>(cp, v);
      const __m256i lo = _mm256_and_si256(W, nib);  // inputs 4v + i
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(W, 4), nib);  // inputs 16 + 4v + i
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) {
        const int8_t* a = (j < 4 ? a0 : a1) + 32 * (j % 4) + 4 * v;
        const __m256i p = SG == 2 ? _mm256_maddubs_epi16(sg ? hi : lo, bcast4(a + 16 * sg))
                                  : _mm256_add_epi16(_mm256_maddubs_epi16(lo, bcast4(a)),
                                                     _mm256_maddubs_epi16(hi, bcast4(a + 16)));
        d[j] = v == 0 ? p : _mm256_add_epi16(d[j], p);
        asm("" : "+x"(d[j]));  // as in widened_block (1.5x slower without)
      }
    }
    const __m256 sv = _mm256_loadu_ps(s[sg]);
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) {
      __m256i dot = _mm256_madd_epi16(d[j], ones);
      if (NARROW && base != 0) dot = _mm256_add_epi32(dot, _mm256_set1_epi32(corr[sg][j]));
      accumulate_token(acc[j], dot, sv, xs[(j / 4) * (next / 32) + j % 4]);
    }
  }
}

// Quad q of a block's codebook positions at cp (CB bits; the 4-bit layout's vector q % 4: its low
// nibbles are quads 0..3, its high ones 4..7), as bytes; book_quad: looked up in lut (16 bytes,
// broadcast to both lanes).
template <int CB>
__attribute__((always_inline)) inline __m256i book_positions(const uint8_t* cp, int q) {
  const __m256i W = nibble_vector<CB>(cp, q % 4);
  return _mm256_and_si256(q < 4 ? W : _mm256_srli_epi16(W, 4), _mm256_set1_epi8(0x0F));
}
template <int CB>
__attribute__((always_inline)) inline __m256i book_quad(const uint8_t* cp, int q, __m256i lut) {
  return _mm256_shuffle_epi8(lut, book_positions<CB>(cp, q));
}

// One block of narrow 8-bit codes (code - base: 0..63 with STEP 2, 0..31 with STEP 4; the 6-bit ones
// unpacked) x NT <= 8 tokens: vpmaddubsw's pairs of products summed in 16 bits STEP at a time (2 x 2 x
// 63 x 127, 4 x 2 x 31 x 127), then in 32 bits, + base x the activations' sums; the vectors STEP at a
// time against every token. BOOK: the codes are 4-bit codebook positions and lut their values - base
// (codebook_narrow_step: STEP 1 for values spanning up to 128, 2 x 128 x 127), one vpmaddubsw and a
// vpmaddwd a quad and token where a codebook's signed values widened to 16 bits took two vpmaddwd
// and twice the broadcasts (widened_block). SG 2: the block is two groups (inputs 0..15 and 16..31),
// each its own sums and scales s[sg]. a8: tile 0's int8 activations of the block (4 x 32); hs: its
// half-block sums (hs[j], hs[4 + j]: token j's); xs: its activation scales; the second tile's next
// (tt.blocks x 128) bytes of activations, next / 16 sums and next / 32 scales further.
template <int NT, int SG, int STEP, bool BOOK = false, int CB = 4>
__attribute__((always_inline)) inline void narrow_block(const uint8_t* cp, const int8_t* a8, const int32_t* hs,
                                                       const float* xs, int64_t next, int base, __m256i lut,
                                                       const float* const* s, float (*acc)[8]) {
  static_assert(NT >= 1 && NT <= 8 && (STEP == 1 || STEP == 2 || STEP == 4));
  constexpr int V = 8 / SG;  // vectors (quads) a group
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* a0 = a8;
  const int8_t* a1 = a8 + next;
  asm("" : "+r"(a0), "+r"(a1));  // as in widened_block
  alignas(16) int32_t corr[SG][8];
  if (base != 0) base_corrections<NT, SG>(hs, next, base, corr);  // Q5_K's codes from 0 need none
#pragma GCC unroll 2
  for (int sg = 0; sg < SG; ++sg) {
    __m256i d[NT];
#pragma GCC unroll 8
    for (int v0 = sg * V; v0 < (sg + 1) * V; v0 += STEP) {
      __m256i W[STEP];
#pragma GCC unroll 4
      for (int i = 0; i < STEP; ++i)
        W[i] = BOOK ? book_quad<CB>(cp, v0 + i, lut)
                    : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + 64 * (v0 + i)));
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j) {
        const int8_t* a = (j < 4 ? a0 : a1) + 32 * (j % 4) + 4 * v0;
        __m256i p = _mm256_maddubs_epi16(W[0], bcast4(a));
        if constexpr (STEP >= 2) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(W[1], bcast4(a + 4)));
        if constexpr (STEP == 4)
          p = _mm256_add_epi16(p, _mm256_add_epi16(_mm256_maddubs_epi16(W[2], bcast4(a + 8)),
                                                   _mm256_maddubs_epi16(W[3], bcast4(a + 12))));
        const __m256i p32 = _mm256_madd_epi16(p, ones);
        d[j] = v0 == sg * V ? p32 : _mm256_add_epi32(d[j], p32);
        asm("" : "+x"(d[j]));  // as in widened_block
      }
    }
    const __m256 sv = _mm256_loadu_ps(s[sg]);
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) {
      const __m256i dot = base != 0 ? _mm256_add_epi32(d[j], _mm256_set1_epi32(corr[sg][j])) : d[j];
      accumulate_token(acc[j], dot, sv, xs[(j / 4) * (next / 32) + j % 4]);
    }
  }
}

// magnitude_block's quads [v0, v0 + N) against NT tokens: d[j] (32-bit sums) += token j's products,
// summed in 16 bits (first: d[j] = them).
template <int NT, int N, bool BOOK, int CB>
__attribute__((always_inline)) inline void magnitude_quads(const uint8_t* cp, int64_t sign_off, const int8_t* a0,
                                                          const int8_t* a1, int v0, bool first, __m256i ones,
                                                          __m256i lut_abs, __m256i lut_v, __m256i* d) {
  __m256i W[N], V[N];  // |value|, the values (BOOK: looked up from the positions at cp, once per tile)
#pragma GCC unroll 3
  for (int i = 0; i < N; ++i) {
    if constexpr (BOOK) {
      const __m256i p = book_positions<CB>(cp, v0 + i);  // unpacked once for both tables
      W[i] = _mm256_shuffle_epi8(lut_abs, p), V[i] = _mm256_shuffle_epi8(lut_v, p);
    } else {
      W[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + 64 * (v0 + i)));
      V[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + sign_off + 64 * (v0 + i)));
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < NT; ++j) {
    const int8_t* a = (j < 4 ? a0 : a1) + 32 * (j % 4) + 4 * v0;
    __m256i p;
#pragma GCC unroll 3
    for (int i = 0; i < N; ++i) {
      const __m256i pi = _mm256_maddubs_epi16(W[i], _mm256_sign_epi8(bcast4(a + 4 * i), V[i]));
      p = i == 0 ? pi : _mm256_add_epi16(p, pi);
    }
    const __m256i p32 = _mm256_madd_epi16(p, ones);
    d[j] = first ? p32 : _mm256_add_epi32(d[j], p32);
    asm("" : "+x"(d[j]));  // as in widened_block
  }
}

// One block of a codebook's values as magnitudes and signs (codebook_magnitude_step: GGUF IQ2's grid,
// +-{8, 25, 43}, IQ3_XXS's, up to +-62) x NT <= 8 tokens: |value| at cp and the values themselves at cp +
// sign_off (both unpacked from the positions once per row block, past 8 tokens), or BOOK: cp the 4-bit
// positions, looked up in lut_abs (|value|) and lut_v (the values) once per tile. Each product is |value|
// x (the activation with the value's sign), vpsignb then vpmaddubsw, summed in 16 bits M quads at a time
// (3 x 2 x 43 x 127, 2 x 2 x 62 x 127 < 32768) before the one vpmaddwd. Narrow codes (value - the least,
// a span over 63) took a vpmaddwd after every vpmaddubsw: 2 multiplies a quad and token against 1 + 1 / M
// here, the bound of both on Zen 2 (one multiply every 0.67 cycles, a vpsignb beside it for free). The
// integers are the signed dot products themselves (no base correction) and the f32 steps narrow_block's:
// the same bits. a8, xs, next, s, acc: as in narrow_block.
template <int NT, int SG, int M, bool BOOK, int CB>
__attribute__((always_inline)) inline void magnitude_block(const uint8_t* cp, int64_t sign_off, const int8_t* a8,
                                                          const float* xs, int64_t next, __m256i lut_abs,
                                                          __m256i lut_v, const float* const* s, float (*acc)[8]) {
  static_assert(NT >= 1 && NT <= 8 && (M == 2 || M == 3));
  constexpr int V = 8 / SG;  // quads a group, M at a time (V = 4, M = 3: 3 then 1)
  const __m256i ones = _mm256_set1_epi16(1);
  const int8_t* a0 = a8;
  const int8_t* a1 = a8 + next;
  asm("" : "+r"(a0), "+r"(a1));  // as in widened_block
#pragma GCC unroll 2
  for (int sg = 0; sg < SG; ++sg) {
    __m256i d[NT];
#pragma GCC unroll 4
    for (int c = 0; c < (V + M - 1) / M; ++c) {
      const int v0 = sg * V + M * c;
      if constexpr (V % M != 0) {
        if (c == V / M) {
          magnitude_quads<NT, V % M, BOOK, CB>(cp, sign_off, a0, a1, v0, false, ones, lut_abs, lut_v, d);
          continue;
        }
      }
      magnitude_quads<NT, M, BOOK, CB>(cp, sign_off, a0, a1, v0, c == 0, ones, lut_abs, lut_v, d);
    }
    const __m256 sv = _mm256_loadu_ps(s[sg]);
#pragma GCC unroll 8
    for (int j = 0; j < NT; ++j) accumulate_token(acc[j], d[j], sv, xs[(j / 4) * (next / 32) + j % 4]);
  }
}

// The scales of unit g's SG groups for half h (8 rows each): sp[sg], factored ones expanded in pre
// (expand_half), others loaded into sv[sg].
template <ScaleType ST, int SG>
__attribute__((always_inline)) inline void unit_scales(const RowLaneGeometry& geo, const uint8_t* params,
                                                      const float* pre, int64_t g, int h, float (*sv)[8],
                                                      const float** sp) {
  for (int sg = 0; sg < SG; ++sg) {
    if constexpr (ST == ScaleType::Factored) {
      sp[sg] = pre + 16 * SG * g + 8 * sg;
    } else {
      _mm256_store_ps(sv[sg], load_params8<ST>(geo, params, _mm256_setzero_ps(), 0, sg, h));
      sp[sg] = sv[sg];
    }
  }
}

// The offsets of unit g's group sg for half h (zero != 0): -zero x its scales s where implied, else
// stored (factored ones expanded in pre).
template <ScaleType ST, int SG>
__attribute__((always_inline)) inline __m256 unit_offsets(const RowLaneGeometry& geo, const uint8_t* params,
                                                         const float* pre, const float* s, int zero, int64_t g,
                                                         int sg, int h) {
  if (!geo.offsets) return _mm256_mul_ps(_mm256_loadu_ps(s), _mm256_set1_ps(float(-zero)));
  if constexpr (ST == ScaleType::Factored) return _mm256_loadu_ps(pre + 16 * SG * g + 8 * (SG + sg));
  else return load_params8<ST>(geo, params, _mm256_setzero_ps(), 1, sg, h);
}

// The prefill tiles of 8 tokens (eight_token_tile) by KIND: widened_block (signed values; LUT: a
// codebook's, else wide 8-bit codes), four_block (4-bit codes: plain, CB 2 or 3, NARROW4), narrow_block
// (narrow 8-bit codes summed STEP vpmaddubsw at a time; LUT: a codebook's values - base, as
// codebook_narrow_step takes them), magnitude_block (a codebook's values as magnitudes and signs,
// unpacked with the values sign_off bytes further, or LUT: looked up; STEP: its M). Half h of the row
// block at rb (first row nb) x NT <= 8 tokens from token tile `tile` of tt (NT > 4: tiles `tile` and
// tile + 1), its first token's outputs at out; m: the half's lanes to store; PRE: the half's quads from
// widen_half at eo. Its sums live in memory (acc), the 16 registers holding 8 tokens' integer sums and a
// block's vectors. Measured at 128 tokens x 1024 -> 960, 1 thread, an AVX2-only EPYC, cycles a block of
// 4 tokens: IQ4_NL codes 66.8 for q8_prefill_tile's 4 tokens, 57 with 8 (with the corrections from
// TokenTiles and stepped group pointers), 50 with the quads decoded once per half (PRE; 16 tokens 1.04x,
// 8 tokens 0.96x: not for one tile); plain 4-bit codes 36.3 -> 29.2 (8 and 16 tokens alike); narrow codes
// 39.8 -> 35.4 (STEP 4, group 32), 47.0 -> 42.8 (0..63, group 16: Q6_K's). The other arguments are
// q8_prefill_tile's.
enum class Tile8 { Widened, Four, Narrow, Magnitude };
template <Tile8 KIND, bool LUT, int NT, ScaleType ST, int SG, int BPG, bool PRE, int STEP, int CB = 4,
          bool NARROW4 = false>
__attribute__((noinline)) void q8_tile8(const RowLaneGeometry& geo, int zero, const uint8_t* rb, int h,
                                        const TokenTiles& tt, int64_t tile, const float* bias, int64_t nb, __m256i m,
                                        float* out, int64_t ldo, const int8_t* codebook, int base, const float* pre,
                                        const __m256i* eo, int64_t sign_off = 0) {
  constexpr bool kWidened = KIND == Tile8::Widened;
  constexpr bool kMagnitude = KIND == Tile8::Magnitude;
  static_assert((kWidened || !PRE) && (KIND == Tile8::Narrow || kMagnitude || STEP == 2) &&
                (KIND != Tile8::Four || !LUT) &&
                (KIND == Tile8::Four || !NARROW4));
  const int64_t G = geo.groups, bpg = BPG ? BPG : geo.blocks_per_group, next = tt.blocks * 128;
  // LUT: the codebook's values + 128 (widened), - base (narrow) or their magnitudes
  __m256i lut_u = _mm256_setzero_si256();
  __m256i lut_v = _mm256_setzero_si256();  // magnitudes: the values (and lut_u their magnitudes)
  if constexpr (LUT) {
    lut_v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codebook)));
    lut_u = kMagnitude ? _mm256_abs_epi8(lut_v)
                       : _mm256_sub_epi8(lut_v, _mm256_set1_epi8(char(kWidened ? -128 : base)));
  }
  const int8_t* aq = kWidened ? nullptr : tt.tile_q(tile);
  const int16_t* aq16 = kWidened ? tt.tile_q16(tile) : nullptr;
  const int32_t* awc = kWidened ? tt.tile_wc(tile) : nullptr;
  const int32_t* ahs = KIND == Tile8::Narrow || NARROW4 || (kWidened && SG == 2) ? tt.tile_hs(tile) : nullptr;
  const float* axs = tt.tile_xs(tile);
  const float* aS = tt.tile_S(tile);
  alignas(32) float acc[NT][8] = {};
  alignas(32) float sv[SG][8];  // F16 / F32 scales of the group
  RowLaneGroupCursor cur(geo, rb);
  for (int64_t g = 0; g < G; ++g, cur.next()) {
    const uint8_t* gp = cur.group();
    const uint8_t* params = gp + bpg * geo.code_bytes;
    const float* sp[SG];
    unit_scales<ST, SG>(geo, params, pre, g, h, sv, sp);
    for (int64_t jb = 0; jb < bpg; ++jb) {
      const int64_t b = g * bpg + jb;
      const uint8_t* cp = gp + jb * geo.code_bytes + 32 * h;
      if constexpr (kWidened)
        widened_block<LUT, CB, NT, PRE, SG>(PRE ? static_cast<const void*>(eo + 16 * b) : cp, aq16 + b * 128,
                                            awc + b * 4,
                                        SG == 2 ? ahs + b * 8 : nullptr, axs + b * 4, next, lut_u, sp, acc);
      else if constexpr (KIND == Tile8::Four)
        four_block<NT, SG, CB, NARROW4>(cp, aq + b * 128, NARROW4 ? ahs + b * 8 : nullptr, axs + b * 4, next, base,
                                         sp, acc);
      else if constexpr (kMagnitude)
        magnitude_block<NT, SG, STEP, LUT, CB>(cp, sign_off, aq + b * 128, axs + b * 4, next, lut_u, lut_v, sp, acc);
      else
        narrow_block<NT, SG, STEP, LUT, CB>(cp, aq + b * 128, ahs + b * 8, axs + b * 4, next, base, lut_u, sp, acc);
    }
    if (zero == 0) continue;  // implied zero 0: no offset term
    for (int sg = 0; sg < SG; ++sg) {
      const __m256 o = unit_offsets<ST, SG>(geo, params, pre, sp[sg], zero, g, sg, h);
#pragma GCC unroll 8
      for (int j = 0; j < NT; ++j)
        _mm256_store_ps(acc[j], _mm256_fmadd_ps(o, _mm256_set1_ps(aS[(j / 4) * tt.gs * 4 + (g * SG + sg) * 4 + j % 4]),
                                                _mm256_load_ps(acc[j])));
    }
  }
  const int64_t n = nb + 8 * h;
  const __m256 bv = bias ? _mm256_maskload_ps(bias + n, m) : _mm256_setzero_ps();
#pragma GCC unroll 8
  for (int j = 0; j < NT; ++j) {
    const __m256 a = _mm256_load_ps(acc[j]);
    _mm256_maskstore_ps(out + j * ldo + n, m, bias ? _mm256_add_ps(a, bv) : a);
  }
}

// Half h of the row block at rb (first row nb) x the NT first tokens of token tile `tile` of tt (its
// first token's outputs at out); m: the half's lanes to store. pre: factored scales expanded by
// expand_half (needed for ScaleType::Factored). The other arguments are q8_tile's. BPG: blocks per
// group if fixed (1: groups of 32 or 16, every GGUF type's: the loops over groups and their blocks
// then one, measured 1.05-1.2x by type), else 0 (geo's). CB (with FOUR): the codes' bits (nibble_vector).
template <bool VNNI, int NT, bool FOUR, int CB, bool LUT, bool NARROW, ScaleType ST, int SG, int BPG>
__attribute__((noinline)) void q8_prefill_tile(const RowLaneGeometry& geo, int zero, const uint8_t* rb, int h,
                                               const TokenTiles& tt, int64_t tile, const float* bias, int64_t nb,
                                               __m256i m, float* out, int64_t ldo, const int8_t* codebook, int base,
                                               const float* pre) {
  const int64_t G = geo.groups, bpg = BPG ? BPG : geo.blocks_per_group;
  const __m256i nib = code_mask<CB>(), ones = _mm256_set1_epi16(1);
  constexpr bool kCorrect = uses_base<VNNI, FOUR, LUT, NARROW>();
  if constexpr (kCorrect && !NARROW) base = -128;  // VNNI's unsigned 8-bit codes and codebook values
  constexpr bool kWide = !FOUR && !NARROW;      // 8-bit codes stored code ^ 0x80
  constexpr bool kSigned = (LUT || kWide) && !VNNI;  // signed values (codes_dot): a codebook's, wide codes'
  const __m256i flip = _mm256_set1_epi8(char(0x80));
  __m256i lut = _mm256_setzero_si256();  // LUT: the values (VNNI: value + 128 as an unsigned byte)
  if constexpr (LUT) lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codebook)));
  if constexpr (LUT && VNNI) lut = _mm256_xor_si256(lut, _mm256_set1_epi8(char(0x80)));
  alignas(32) int8_t vals[kSigned ? 8 * 32 : 1];  // the block's values (w: their magnitudes)
  const int8_t* aq = tt.tile_q(tile);
  const float* axs = tt.tile_xs(tile);
  const float* aS = tt.tile_S(tile);
  const int32_t* ahs = tt.tile_hs(tile);
  __m256 acc[NT];
#pragma GCC unroll 4
  for (int j = 0; j < NT; ++j) acc[j] = _mm256_setzero_ps();
  alignas(32) float sv[SG][8];  // F16 / F32 scales of the group (factored: pre's)
  for (int64_t g = 0; g < G; ++g) {
    const uint8_t* gp = rowlane_group(geo, rb, g);
    const uint8_t* params = gp + bpg * geo.code_bytes;
    const float* sp[SG];
    unit_scales<ST, SG>(geo, params, pre, g, h, sv, sp);
    for (int64_t jb = 0; jb < bpg; ++jb) {
      const int64_t b = g * bpg + jb;
      const uint8_t* cp = gp + jb * geo.code_bytes + 32 * h;
      __m256i w[8];  // w[i]: inputs 4i..4i+3 of the half's rows
#pragma GCC unroll 8
      for (int v = 0; v < (FOUR ? 4 : 8); ++v) {
        const __m256i W =
            FOUR ? nibble_vector<CB>(cp, v) : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + 64 * v));
        if constexpr (FOUR) {
          w[v] = _mm256_and_si256(W, nib);                              // inputs 4v + j
          w[4 + v] = _mm256_and_si256(_mm256_srli_epi16(W, 4), nib);  // inputs 16 + 4v + j
          if constexpr (LUT) w[v] = _mm256_shuffle_epi8(lut, w[v]), w[4 + v] = _mm256_shuffle_epi8(lut, w[4 + v]);
          if constexpr (kSigned) {
            _mm256_store_si256(reinterpret_cast<__m256i*>(vals + 32 * v), w[v]);
            _mm256_store_si256(reinterpret_cast<__m256i*>(vals + 32 * (4 + v)), w[4 + v]);
            w[v] = _mm256_abs_epi8(w[v]), w[4 + v] = _mm256_abs_epi8(w[4 + v]);
          }
        } else if constexpr (kSigned) {  // wide without VNNI: the signed codes, and their magnitudes
          const __m256i c = _mm256_xor_si256(W, flip);
          _mm256_store_si256(reinterpret_cast<__m256i*>(vals + 32 * v), c);
          w[v] = _mm256_abs_epi8(c);
        } else {
          w[v] = W;  // narrow: code - base, 0..63; wide (VNNI): code + 128
        }
      }
#pragma GCC unroll 4
      for (int j = 0; j < NT; ++j) {
        const int8_t* a = aq + b * 128 + 32 * j;
        const __m256 xs = _mm256_set1_ps(axs[b * 4 + j]);
#pragma GCC unroll 2
        for (int sg = 0; sg < SG; ++sg) {  // group 16: inputs 0..15 (w[0..3]) and 16..31 (w[4..7])
          __m256i d = codes_dot<VNNI, FOUR, 8 / SG, kSigned>(w + 4 * sg, a + 16 * sg, ones,
                                                                    kSigned ? vals + 128 * sg : nullptr);
          if constexpr (kCorrect) {  // the signed codes' dot product: + base x the activations' integer sum
            const int32_t* hs = ahs + 2 * b * 4 + j;  // half blocks 2b, 2b + 1 of this token
            d = _mm256_add_epi32(d, _mm256_set1_epi32(base * (SG == 2 ? hs[4 * sg] : hs[0] + hs[4])));
          }
          acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(_mm256_loadu_ps(sp[sg]), xs), acc[j]);
        }
      }
    }
    if (zero == 0) continue;  // implied zero 0: no offset term
    for (int sg = 0; sg < SG; ++sg) {
      const __m256 o = unit_offsets<ST, SG>(geo, params, pre, sp[sg], zero, g, sg, h);
#pragma GCC unroll 4
      for (int j = 0; j < NT; ++j) acc[j] = _mm256_fmadd_ps(o, _mm256_set1_ps(aS[(g * SG + sg) * 4 + j]), acc[j]);
    }
  }
  const int64_t n = nb + 8 * h;
  const __m256 bv = bias ? _mm256_maskload_ps(bias + n, m) : _mm256_setzero_ps();
#pragma GCC unroll 4  // every loop over acc unrolled: indexed by a variable, it would live in memory
  for (int j = 0; j < NT; ++j) _mm256_maskstore_ps(out + j * ldo + n, m, bias ? _mm256_add_ps(acc[j], bv) : acc[j]);
}

}  // namespace

}  // namespace llmctl::kernels::detail
