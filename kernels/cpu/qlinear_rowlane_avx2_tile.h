// Shared by the AVX2 and AVX-VNNI row-lane kernels (qlinear_rowlane_avx2.cpp,
// qlinear_rowlane_avxvnni.cpp): the helpers and the int8-activation tile, each TU compiling its own
// copy (anonymous namespace) with its own target flags.
#pragma once
// AVX2 (FMA, F16C) kernels of the row-lane layout (qlinear.h, QLayout::RowLane16), for CPUs without
// AVX-512 VNNI. A row block's 64-byte vector holds 16 rows x 4 inputs; its first 32 bytes are rows
// 0..7 and its last 32 rows 8..15 (a "half"), so lane r of a 256-bit vector is row r of a half and
// one block of 32 inputs is, per token and half:
//   int8 mode: 4 bits: vpmaddubsw of the codes' low (high) nibbles, unsigned, with the token's 4
//              activations broadcast gives each row's inputs 4v + j (16 + 4v + j) in pairs; the 8
//              products of a block are summed in 16 bits (each is at most 2 x 15 x 127, eight
//              of them 30,480: no overflow), then vpmaddwd by 1 makes each row's exact integer dot
//              product. 8 bits: codes stored + 128 are flipped back to signed, and vpmaddubsw takes
//              |code| with the activations' signs moved to them (at most 2 x 128 x 127 a pair: no
//              saturation), then vpmaddwd, summed in 32 bits. Either way the integer is exactly
//              the scalar reference's; one convert and one FMA by (8 row scales x the block's
//              activation scale) follow, and per group one more FMA, offsets x S[group].
//              4 bits with a codebook: vpshufb turns the nibbles into their int8 values, taken
//              then as the 8-bit codes are (|value| x signed activation, vpmaddwd per vector).
//              In f32 mode the values come from two vpermd of the codebook as int32.
//              Narrow 8-bit codes (code - base, 0..63) go to vpmaddubsw as they are, no signs
//              moved, two vectors' products summed in 16 bits before vpmaddwd; narrow 4-bit ones
//              (0..15) take the 4-bit path; base x the block's integer activation sum then makes
//              the signed codes' dot product, the same integer. 2- and 3-bit codes (plain, narrow, a
//              codebook's positions) are made 4-bit vectors (nibble_vector) and go the 4-bit way.
//              6-bit codes (narrow): each quad of 3 vectors unpacked into the 8-bit layout's 4
//              (six_bit_quad), then as narrow 8-bit ones.
//   f32 mode:  codes -> f32 -> fma(code, scale, offset) per input, then one FMA per token into
//              accumulator input % 4.
//   AVX-VNNI (VNNI = true, vpdpbusd: unsigned x signed bytes summed in 32 bits, no saturation): every
//              code goes to it unsigned as stored (8-bit codes + 128, a codebook's values + 128, narrow
//              codes from their base) and the base (-128) x the activations' integer sums per half
//              block makes the signed dot product: no sign moved per token, no vpmaddwd.
// The operations per (row, token), and their order, are those of the scalar reference
// (qlinear_rowlane.cpp) whatever the tile, T or [n0, n1) split: the results equal it bit for bit
// (with AVX-VNNI: the same integers, summed in another order).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/qlinear_impl.h"
#include "kernels/kernel_check.h"

namespace llmctl::kernels::detail {

namespace {

template <bool F16>
inline __m256 load8(const uint8_t* p) {
  if constexpr (F16)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  else
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
}

// Factored scales: the D of rows 8h..8h+7 for the scales (which 0) or offsets (which 1) of the
// super-block whose header is hdr (converted once per super-block).
inline __m256 super_d8(const uint8_t* hdr, int which, int h) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(hdr + 32 * which + 16 * h)));
}

// Scales (which 0) or offsets (which 1) of rows 8h..8h+7 of group sg (group 16: 0 or 1) of a unit
// whose parameters start at params (after its codes); d: super_d8 of its super-block (factored
// scales: D x m, as rowlane_param).
template <ScaleType ST>
inline __m256 load_params8(const RowLaneGeometry& geo, const uint8_t* params, __m256 d, int which, int sg, int h) {
  const int slot = which * geo.halves + sg;
  if constexpr (ST == ScaleType::Factored) {
    int64_t m8;
    std::memcpy(&m8, params + 16 * slot + 8 * h, 8);
    return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_cvtsi64_si128(m8))));
  } else {
    constexpr bool f16 = ST == ScaleType::F16;
    return load8<f16>(params + slot * geo.param_bytes + h * 8 * (f16 ? 2 : 4));
  }
}

inline __m256i bcast4(const int8_t* p) {  // 4 activation bytes to every lane
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// Lanes r of the half whose first row is n with n + r in [n0, n1) (sign bits, for maskload/maskstore).
inline __m256i lane_mask8(int64_t n, int64_t n0, int64_t n1) {
  const int lo = int(std::clamp<int64_t>(n0 - n, 0, 8)), hi = int(std::clamp<int64_t>(n1 - n, 0, 8));
  const __m256i r = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(hi), r), _mm256_cmpgt_epi32(r, _mm256_set1_epi32(lo - 1)));
}

inline bool any_lane(int64_t n, int64_t n0, int64_t n1) { return n + 8 > n0 && n < n1; }

// The 6-bit layout's quad p (qlinear.h) of one half (cp: the block's codes + 32 x the half) as the
// 8-bit layout's vectors 4p..4p+3 of stored values (0..63): three ANDs, and the fourth vector's bits
// gathered from the three's tops ((v0 >> 6) | (v1 >> 6) << 2 | (v2 >> 6) << 4 per byte, by 16-bit
// shifts, each field kept by its mask).
inline void six_bit_quad(const uint8_t* cp, int p, __m256i q[4]) {
  auto load = [&](int i) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + 192 * p + 64 * i)); };
  const __m256i v0 = load(0), v1 = load(1), v2 = load(2), low6 = _mm256_set1_epi8(0x3F);
  q[0] = _mm256_and_si256(v0, low6), q[1] = _mm256_and_si256(v1, low6), q[2] = _mm256_and_si256(v2, low6);
  const __m256i t = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v2, 2), _mm256_set1_epi8(0x30)),
                                    _mm256_and_si256(_mm256_srli_epi16(v1, 4), _mm256_set1_epi8(0x0C)));
  q[3] = _mm256_or_si256(t, _mm256_and_si256(_mm256_srli_epi16(v0, 6), _mm256_set1_epi8(0x03)));
}

// The 4-bit layout's vector v of a block's codes at cp (+ 32 x the half), for codes of CB bits
// (qlinear.h): 4, as stored; 2, vector v / 2 shifted right by 2 (v % 2); 3, vectors 0..2 as stored
// less their nibbles' top bits, vector 3 gathered from those (vector q's: its bit q; 16-bit shifts,
// each field kept by its mask). Its codes are the bits code_mask keeps of it (the low nibbles) and of
// it >> 4 (the high ones).
template <int CB>
inline __m256i nibble_vector(const uint8_t* cp, int v) {
  static_assert(CB == 2 || CB == 3 || CB == 4);
  auto load = [&](int i) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + 64 * i)); };
  if constexpr (CB == 4) {
    return load(v);
  } else if constexpr (CB == 2) {
    return v % 2 ? _mm256_srli_epi16(load(v / 2), 2) : load(v / 2);
  } else {
    if (v < 3) return _mm256_and_si256(load(v), _mm256_set1_epi8(0x77));
    const __m256i b0 = _mm256_and_si256(_mm256_srli_epi16(load(0), 3), _mm256_set1_epi8(0x11));
    const __m256i b1 = _mm256_and_si256(_mm256_srli_epi16(load(1), 2), _mm256_set1_epi8(0x22));
    const __m256i b2 = _mm256_and_si256(_mm256_srli_epi16(load(2), 1), _mm256_set1_epi8(0x44));
    return _mm256_or_si256(_mm256_or_si256(b0, b1), b2);
  }
}
template <int CB>
inline __m256i code_mask() {
  return _mm256_set1_epi8(CB == 2 ? 0x03 : 0x0F);
}

// Bytes ahead of the codes in use that decode prefetches (as the AVX-512 kernels do). kPrefetchCodes:
// the kinds it prefetches everywhere, wide 8-bit codes; the rest only where prefetch_all_codes() (AMD
// family 17h: there they gained 1.1-1.5x decode, a Zen 2 EPYC VM whose one core reads 14 GB/s).
// Elsewhere the hardware's prefetchers keep up with 4-bit, 6-bit and narrow 8-bit blocks,
// whose decode the four to eight prefetches a block slowed (measured on a Zen 4 EPYC: a 1024 -> 49152
// decode on 1 thread, 4 bits 1297 -> 1222 us without them, Q6_K-like 1558 -> 1414; generate, ABBA
// pairs: Q6_K x1.12, Q5_K_M x1.07); wide 8-bit codes were as fast or faster with them (576 -> 49152:
// 945 against 1080 us).
constexpr int64_t kPrefetchAhead = 8192;
template <bool FOUR, bool SIX, bool NARROW>
constexpr bool kPrefetchCodes = !FOUR && !SIX && !NARROW;

#if defined(__AVXVNNI__)
constexpr bool kVnniCompiled = true;
template <bool V>
inline __m256i dpbusd(__m256i acc, __m256i u, __m256i s) {  // acc + 4-byte dot products (u8 x s8), exact
  return _mm256_dpbusd_avx_epi32(acc, u, s);
}
#else
constexpr bool kVnniCompiled = false;
template <bool V>
__m256i dpbusd(__m256i acc, __m256i u, __m256i s);  // no definition: only VNNI tiles call it
#endif

// Whether a tile's integer dot products are of codes stored from a base, corrected by base x the
// activations' sums: narrow codes, and with VNNI 8-bit codes (+ 128) and codebook values (+ 128).
template <bool VNNI, bool FOUR, bool LUT, bool NARROW>
constexpr bool uses_base() {
  return NARROW || (VNNI && (LUT || !FOUR));
}

// Whether the prefill tile takes a block's signed values (a codebook's, wide 8-bit codes') as 16-bit
// products (widened_block): without VNNI, in groups of 32 or 16; the tokens' activations as int16 then.
template <bool VNNI, bool FOUR, bool LUT, bool NARROW, int SG>
constexpr bool widened_tile() {
  return !VNNI && (LUT || (!FOUR && !NARROW));
}

// Whether the prefill takes 8 tokens at a time (q8_tile8), without VNNI: widened codes, 4-bit codes
// without a codebook (plain, narrow, 2-bit), narrow 8-bit codes (and 6-bit ones unpacked): every
// kind (q8_prefill_tile is left to VNNI's tiles).
template <bool VNNI, bool FOUR, int CB, bool LUT, bool NARROW, int SG>
constexpr bool eight_token_tile() {
  return widened_tile<VNNI, FOUR, LUT, NARROW, SG>() || (!VNNI && FOUR && !LUT) || (!VNNI && !FOUR && NARROW);
}

// Factored scales of half h of the row block at rb as f32, per unit g (16 SG floats each) and its
// group sg: 8 scales at pre[16 SG g + 8 sg], 8 offsets (if stored) at pre[16 SG g + 8 (SG + sg)]
// (load_params8's values): once per half for all its token tiles (prefill), not once per tile.
template <int SG>
void expand_half(const RowLaneGeometry& geo, const uint8_t* rb, int h, float* pre) {
  for (int64_t g = 0; g < geo.groups; ++g) {
    const uint8_t* params = rowlane_group(geo, rb, g) + geo.blocks_per_group * geo.code_bytes;
    const uint8_t* hdr = rowlane_header(geo, rb, g);
    for (int sg = 0; sg < SG; ++sg) {
      _mm256_storeu_ps(pre + 16 * SG * g + 8 * sg,
                       load_params8<ScaleType::Factored>(geo, params, super_d8(hdr, 0, h), 0, sg, h));
      if (geo.offsets)
        _mm256_storeu_ps(pre + 16 * SG * g + 8 * (SG + sg),
                         load_params8<ScaleType::Factored>(geo, params, super_d8(hdr, 1, h), 1, sg, h));
    }
  }
}

// Halves h0 .. h0 + H - 1 of the row block at rb (first row nb) x NT tokens from t, int8
// activations; m[i]: the lanes of half h0 + i to store. prefetch: stream the codes ahead (decode;
// the caller's stream_prefetch).
// pre: factored scales already expanded by expand_half (H = 1), or null. SG: groups a unit (2: group
// 16, whose two halves of a block get their own integer dot products, scales and offsets).
// LUT: 4-bit codes stand for codebook[code] (qlinear.h), looked up with vpshufb. NARROW: codes
// stored code - base (8 bits 0..63, 4 bits 0..15; SIX: 6-bit narrow codes); asum: the activations'
// integer sums per half block [T, K / 16]. VNNI: vpdpbusd of unsigned codes (see the top), compiled
// only with -mavxvnni. CB (with FOUR): the codes' bits, 4, 3 or 2 (nibble_vector).
// ONE: a unit is one block (group 32, and group 16 always), known at compile time: the block loop's
// counting and addressing otherwise cost a decode tile 15% (an AVX2 EPYC, 4-bit codes).
// Out of line: inlined into q8_rows beside the prefill tiles its decode code came out slower (Q8_0
// decode 158 -> 127 tok/s on an AVX2-only EPYC), and its own function it is the faster one for every kind.
template <bool VNNI, int H, int NT, bool FOUR, int CB, bool SIX, bool LUT, bool NARROW, ScaleType ST, int SG,
          bool ONE = SG == 2, bool PAIR = false>
__attribute__((noinline)) void q8_tile(const RowLaneGeometry& geo, int zero, const uint8_t* rb, int h0,
                                       const QActivations& x, const float* S, int64_t t, const float* bias, int64_t nb,
                                       const __m256i* m, float* out, int64_t ldo, bool prefetch, const int8_t* codebook,
                                       int base, const int32_t* asum, const float* pre = nullptr) {
  static_assert(!VNNI || kVnniCompiled, "VNNI tiles need -mavxvnni");
  static_assert(SG == 1 || ONE, "a group of 16 is one block");
  const int64_t K = x.k, blocks = K / 32, G = geo.groups, GS = G * SG;  // GS: groups
  const int64_t bpg = ONE ? 1 : geo.blocks_per_group;
  const __m256i nib = code_mask<CB>(), ones = _mm256_set1_epi16(1), flip = _mm256_set1_epi8(char(0x80));
  const int8_t* xq = x.q + t * K;
  __m256i lut = LUT ? _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codebook)))
                    : _mm256_setzero_si256();
  if (VNNI && LUT) lut = _mm256_xor_si256(lut, flip);  // value + 128 as an unsigned byte
  constexpr bool kCorrect = uses_base<VNNI, FOUR, LUT, NARROW>();
  if constexpr (kCorrect && !NARROW) base = -128;  // VNNI's unsigned 8-bit codes and codebook values
  __m256 acc[H][NT];
  for (int i = 0; i < H; ++i)
    for (int j = 0; j < NT; ++j) acc[i][j] = _mm256_setzero_ps();
  __m256 ds[H], dof[H];  // factored: the current super-block's D (scales, offsets)
  const int64_t code_bytes = geo.code_bytes;
  const bool offsets = geo.offsets;
  RowLaneGroupCursor cur(geo, rb);
  for (int64_t g = 0; g < G; ++g, cur.next()) {
    const uint8_t* gp = cur.group();
    const uint8_t* params = gp + bpg * code_bytes;
    if (ST == ScaleType::Factored && !pre && cur.first())
      for (int i = 0; i < H; ++i) {
        ds[i] = super_d8(cur.header(), 0, h0 + i);
        if (offsets) dof[i] = super_d8(cur.header(), 1, h0 + i);
      }
    __m256 s[H][SG];
    for (int i = 0; i < H; ++i)
      for (int sg = 0; sg < SG; ++sg)
        s[i][sg] = ST == ScaleType::Factored && pre ? _mm256_loadu_ps(pre + 16 * SG * g + 8 * sg)
                                                    : load_params8<ST>(geo, params, ds[i], 0, sg, h0 + i);
    for (int64_t jb = 0; jb < bpg; ++jb) {
      const int64_t b = g * bpg + jb;
      const uint8_t* cp = gp + jb * code_bytes;
      if (prefetch)
        for (int64_t l = 0; l < code_bytes; l += 64)
          _mm_prefetch(reinterpret_cast<const char*>(cp + kPrefetchAhead + l), _MM_HINT_T0);
      __m256i dot[H][NT][SG];
      for (int i = 0; i < H; ++i)
        for (int j = 0; j < NT; ++j)
          for (int sg = 0; sg < SG; ++sg) dot[i][j][sg] = _mm256_setzero_si256();  // 4 bits: 16-bit sums first
      if constexpr (VNNI) {  // every kind of code as unsigned bytes, summed in 32 bits
        // vpdpbusd's latency (~5 cycles) would chain one accumulator's 8 products a block: inputs 0..15
        // (slot 0) and 16..31 (slot 1) go to their own, and in decode (H x NT <= 2) even and odd
        // vectors too (slots + 2); integers, so the sum's order does not change it
        constexpr int P = H * NT <= 2 ? 2 : 1;
        __m256i e[H][NT][2 * P];
        for (int i = 0; i < H; ++i)
          for (int j = 0; j < NT; ++j)
            for (int q = 0; q < 2 * P; ++q) e[i][j][q] = _mm256_setzero_si256();
        if constexpr (SIX) {  // a quad's 4 vectors unpacked and used one half at a time (16 registers)
          for (int p = 0; p < 2; ++p)
            for (int i = 0; i < H; ++i) {
              __m256i quad[4];
              six_bit_quad(cp + 32 * (h0 + i), p, quad);
              for (int j = 0; j < NT; ++j)
                for (int q = 0; q < 4; ++q) {
                  const int v = 4 * p + q, slot = 2 * (v % P) + p;  // vectors 4..7 are inputs 16..31
                  e[i][j][slot] = dpbusd<VNNI>(e[i][j][slot], quad[q], bcast4(xq + j * K + b * 32 + 4 * v));
                }
            }
        } else {
          for (int v = 0; v < (FOUR ? 4 : 8); ++v) {
            const int par = 2 * (v % P), half = FOUR ? 0 : v / 4;  // 8 bits: vectors 4..7 are inputs 16..31
            __m256i lo[H], hi[H];
            for (int i = 0; i < H; ++i) {
              const __m256i W = FOUR ? nibble_vector<CB>(cp + 32 * (h0 + i), v)
                                     : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + 64 * v + 32 * (h0 + i)));
              if constexpr (FOUR) {
                lo[i] = _mm256_and_si256(W, nib), hi[i] = _mm256_and_si256(_mm256_srli_epi16(W, 4), nib);
                if constexpr (LUT) lo[i] = _mm256_shuffle_epi8(lut, lo[i]), hi[i] = _mm256_shuffle_epi8(lut, hi[i]);
              } else {
                lo[i] = W;  // 8 bits: code + 128, or narrow code - base
              }
            }
            for (int j = 0; j < NT; ++j) {
              const int8_t* a = xq + j * K + b * 32;
              for (int i = 0; i < H; ++i)
                if constexpr (FOUR) {  // low nibbles are inputs 4v + j, high 16 + 4v + j
                  e[i][j][par] = dpbusd<VNNI>(e[i][j][par], lo[i], bcast4(a + 4 * v));
                  e[i][j][par + 1] = dpbusd<VNNI>(e[i][j][par + 1], hi[i], bcast4(a + 16 + 4 * v));
                } else {
                  e[i][j][par + half] = dpbusd<VNNI>(e[i][j][par + half], lo[i], bcast4(a + 4 * v));
                }
            }
          }
        }
        for (int i = 0; i < H; ++i)  // group 16: inputs 0..15 and 16..31 are its two groups
          for (int j = 0; j < NT; ++j)
            for (int q = 0; q < 2 * P; ++q) {
              const int sg = SG == 2 ? q % 2 : 0;
              dot[i][j][sg] = _mm256_add_epi32(dot[i][j][sg], e[i][j][q]);
            }
      } else if constexpr (FOUR && LUT) {  // signed values: |value| x (activation with the value's sign), as 8 bits
        // PAIR (every |value| within 64, codebook_magnitude_step >= 2: IQ1's, IQ2's, IQ3_XXS's grids): two
        // vpmaddubsw's pairs (each at most 2 x 64 x 127) summed in 16 bits before one vpmaddwd
        [[maybe_unused]] __m256i held[H][NT][2];
#pragma GCC unroll 4
        for (int v = 0; v < 4; ++v) {
          __m256i lo[H], hi[H];
          for (int i = 0; i < H; ++i) {
            const __m256i W = nibble_vector<CB>(cp + 32 * (h0 + i), v);
            lo[i] = _mm256_shuffle_epi8(lut, _mm256_and_si256(W, nib));                         // inputs 4v + j
            hi[i] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(W, 4), nib));  // 16 + 4v + j
          }
          for (int j = 0; j < NT; ++j) {
            const int8_t* a = xq + j * K + b * 32;
            const __m256i alo = bcast4(a + 4 * v), ahi = bcast4(a + 16 + 4 * v);
            for (int i = 0; i < H; ++i) {
              const __m256i plo = _mm256_maddubs_epi16(_mm256_abs_epi8(lo[i]), _mm256_sign_epi8(alo, lo[i]));
              const __m256i phi = _mm256_maddubs_epi16(_mm256_abs_epi8(hi[i]), _mm256_sign_epi8(ahi, hi[i]));
              if constexpr (PAIR && SG == 1) {  // |values| within 64: two vpmaddubsw summed in 16 bits
                dot[i][j][0] = _mm256_add_epi32(dot[i][j][0], _mm256_madd_epi16(_mm256_add_epi16(plo, phi), ones));
              } else if constexpr (PAIR) {  // groups of 16: vectors v and v + 1 of each group
                if (v % 2 == 0) {
                  held[i][j][0] = plo, held[i][j][1] = phi;
                } else {
                  const __m256i p0 = _mm256_add_epi16(held[i][j][0], plo), p1 = _mm256_add_epi16(held[i][j][1], phi);
                  dot[i][j][0] = _mm256_add_epi32(dot[i][j][0], _mm256_madd_epi16(p0, ones));
                  dot[i][j][1] = _mm256_add_epi32(dot[i][j][1], _mm256_madd_epi16(p1, ones));
                }
              } else {
                dot[i][j][0] = _mm256_add_epi32(dot[i][j][0], _mm256_madd_epi16(plo, ones));
                dot[i][j][SG - 1] = _mm256_add_epi32(dot[i][j][SG - 1], _mm256_madd_epi16(phi, ones));
              }
            }
          }
        }
      } else if constexpr (FOUR) {
        for (int v = 0; v < 4; ++v) {
          __m256i lo[H], hi[H];
          for (int i = 0; i < H; ++i) {
            const __m256i W = nibble_vector<CB>(cp + 32 * (h0 + i), v);
            lo[i] = _mm256_and_si256(W, nib);                         // inputs 4v + j
            hi[i] = _mm256_and_si256(_mm256_srli_epi16(W, 4), nib);  // inputs 16 + 4v + j
          }
          for (int j = 0; j < NT; ++j) {
            const int8_t* a = xq + j * K + b * 32;
            const __m256i alo = bcast4(a + 4 * v), ahi = bcast4(a + 16 + 4 * v);
            for (int i = 0; i < H; ++i) {  // group 16: low nibbles are inputs 0..15, high 16..31
              dot[i][j][0] = _mm256_add_epi16(dot[i][j][0], _mm256_maddubs_epi16(lo[i], alo));
              dot[i][j][SG - 1] = _mm256_add_epi16(dot[i][j][SG - 1], _mm256_maddubs_epi16(hi[i], ahi));
            }
          }
        }
        for (int i = 0; i < H; ++i)
          for (int j = 0; j < NT; ++j)
            for (int sg = 0; sg < SG; ++sg) dot[i][j][sg] = _mm256_madd_epi16(dot[i][j][sg], ones);
      } else if constexpr (SIX) {  // narrow 6-bit codes: a quad's 4 vectors unpacked and used one half at a
                                   // time (16 registers), summed as NARROW's are below
        for (int p = 0; p < 2; ++p)
          for (int i = 0; i < H; ++i) {
            const int sg = SG == 2 ? p : 0;
            __m256i quad[4];
            six_bit_quad(cp + 32 * (h0 + i), p, quad);
            for (int j = 0; j < NT; ++j) {
              const int8_t* a = xq + j * K + b * 32 + 16 * p;
              const __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(quad[0], bcast4(a)),
                                                   _mm256_maddubs_epi16(quad[1], bcast4(a + 4)));
              const __m256i p23 = _mm256_add_epi16(_mm256_maddubs_epi16(quad[2], bcast4(a + 8)),
                                                   _mm256_maddubs_epi16(quad[3], bcast4(a + 12)));
              dot[i][j][sg] = _mm256_add_epi32(dot[i][j][sg],
                                               _mm256_add_epi32(_mm256_madd_epi16(p01, ones), _mm256_madd_epi16(p23, ones)));
            }
          }
      } else if constexpr (NARROW) {  // unsigned codes as they are; two vectors' pairs summed in 16 bits
                                      // (4 x 63 x 127 at most); the base x the activations' sum below
        for (int v = 0; v < 8; v += 2) {
          const int sg = SG == 2 ? v / 4 : 0;
          __m256i c0[H], c1[H];
          for (int i = 0; i < H; ++i) {
            c0[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + 64 * v + 32 * (h0 + i)));
            c1[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + 64 * (v + 1) + 32 * (h0 + i)));
          }
          for (int j = 0; j < NT; ++j) {
            const __m256i a0 = bcast4(xq + j * K + b * 32 + 4 * v), a1 = bcast4(xq + j * K + b * 32 + 4 * v + 4);
            for (int i = 0; i < H; ++i) {
              const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(c0[i], a0), _mm256_maddubs_epi16(c1[i], a1));
              dot[i][j][sg] = _mm256_add_epi32(dot[i][j][sg], _mm256_madd_epi16(p, ones));
            }
          }
        }
      } else {
        for (int v = 0; v < 8; ++v) {
          const int sg = SG == 2 ? v / 4 : 0;  // group 16: vectors 0..3 are inputs 0..15
          __m256i c[H], mag[H];
          for (int i = 0; i < H; ++i) {
            c[i] = _mm256_xor_si256(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + 64 * v + 32 * (h0 + i))), flip);  // signed codes
            mag[i] = _mm256_abs_epi8(c[i]);
          }
          for (int j = 0; j < NT; ++j) {
            const __m256i a = bcast4(xq + j * K + b * 32 + 4 * v);
            for (int i = 0; i < H; ++i) {
              const __m256i p = _mm256_maddubs_epi16(mag[i], _mm256_sign_epi8(a, c[i]));
              dot[i][j][sg] = _mm256_add_epi32(dot[i][j][sg], _mm256_madd_epi16(p, ones));
            }
          }
        }
      }
      if constexpr (kCorrect)  // the signed codes' dot product: + base x the activations' integer sum
        for (int j = 0; j < NT; ++j) {
          const int32_t* hs = asum + (t + j) * (K / 16) + 2 * b;
          const __m256i corr[2] = {_mm256_set1_epi32(base * (SG == 2 ? hs[0] : hs[0] + hs[1])),
                                   _mm256_set1_epi32(base * hs[1])};  // group 16: each half's own
          for (int i = 0; i < H; ++i)
            for (int sg = 0; sg < SG; ++sg) dot[i][j][sg] = _mm256_add_epi32(dot[i][j][sg], corr[sg]);
        }
      for (int j = 0; j < NT; ++j) {
        const __m256 xs = _mm256_set1_ps(x.scale[(t + j) * blocks + b]);
        for (int i = 0; i < H; ++i)
          for (int sg = 0; sg < SG; ++sg)
            acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[i][j][sg]), _mm256_mul_ps(s[i][sg], xs), acc[i][j]);
      }
    }
    if (zero == 0) continue;  // implied zero 0: no offset term
    for (int i = 0; i < H; ++i)
      for (int sg = 0; sg < SG; ++sg) {
        const __m256 o = !offsets ? _mm256_mul_ps(s[i][sg], _mm256_set1_ps(float(-zero)))
                         : ST == ScaleType::Factored && pre ? _mm256_loadu_ps(pre + 16 * SG * g + 8 * (SG + sg))
                                                            : load_params8<ST>(geo, params, dof[i], 1, sg, h0 + i);
        for (int j = 0; j < NT; ++j)
          acc[i][j] = _mm256_fmadd_ps(o, _mm256_set1_ps(S[(t + j) * GS + g * SG + sg]), acc[i][j]);
      }
  }
  for (int i = 0; i < H; ++i) {
    const int64_t n = nb + 8 * (h0 + i);
    const __m256 bv = bias ? _mm256_maskload_ps(bias + n, m[i]) : _mm256_setzero_ps();
    for (int j = 0; j < NT; ++j)
      _mm256_maskstore_ps(out + (t + j) * ldo + n, m[i], bias ? _mm256_add_ps(acc[i][j], bv) : acc[i][j]);
  }
}

}  // namespace

}  // namespace llmctl::kernels::detail

#include "kernels/cpu/qlinear_rowlane_avx2_prefill.h"

namespace llmctl::kernels::detail {

namespace {

// Tokens [0, T) in tiles of NMAX and the remainder as one tile: tile(nt, t).
template <int NMAX, class Tile>
void for_token_tiles(int64_t T, Tile&& tile) {
  static_assert(NMAX >= 1 && NMAX <= 8);
  int64_t t = 0;
  for (; t + NMAX <= T; t += NMAX) tile(std::integral_constant<int, NMAX>{}, t);
  const int64_t rest = T - t;  // 0 .. NMAX - 1
  [&]<int... R>(std::integer_sequence<int, R...>) {
    ((rest == R + 1 ? tile(std::integral_constant<int, R + 1>{}, t) : void()), ...);
  }(std::make_integer_sequence<int, NMAX - 1>{});
}

template <bool VNNI, bool FOUR, int CB, bool SIX, bool LUT, bool NARROW, ScaleType ST, int SG>
void q8_rows(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0, int64_t n1, float* out,
             int64_t ldo) {
  const RowLaneGeometry geo = rowlane_geometry(w.bits, w.k, w.group, w.scale_type, w.implied_zero);
  KERNEL_CHECK(geo.halves == SG) << "row-lane kernel for " << SG << " groups a unit given " << geo.halves;
  thread_local std::vector<float> S;
  S.resize(static_cast<size_t>(x.t * geo.groups * SG));
  qact_group_sums(x, w.group, S.data());
  constexpr bool kWidened = widened_tile<VNNI, FOUR, LUT, NARROW, SG>();
  constexpr bool kEight = eight_token_tile<VNNI, FOUR, CB, LUT, NARROW, SG>();
  constexpr bool kSums = uses_base<VNNI, FOUR, LUT, NARROW>() || kWidened;
  // narrow, VNNI or widened codes: the activations' integer sums per half block
  thread_local std::vector<int32_t> own_sums;
  const int32_t* asum = kSums ? qact_half_sums_of(x, own_sums) : nullptr;
  thread_local std::vector<float> pre;  // factored, prefill: expand_half's
  if (ST == ScaleType::Factored) pre.resize(size_t(16 * SG * geo.groups));
  struct alignas(32) Vector32 {
    uint8_t bytes[32];
  };
  // a codebook whose values span up to 128: narrow codes (value - its least) summed book_step vpmaddubsw at
  // a time, not widened
  const int book_step = kWidened && LUT ? codebook_narrow_step(w.codebook) : 0;
  const int book_base = book_step ? qweight_code_range(16, reinterpret_cast<const uint8_t*>(w.codebook)).lo : 0;
  const bool widen = kWidened && book_step == 0;
  // the codebook's values as bytes the unpacked tiles take: - the least (narrow), + 128 (VNNI: wide codes)
  __m256i book_n = _mm256_setzero_si256(), book_v = _mm256_setzero_si256();
  if constexpr (LUT)
    book_v = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.codebook)));
  if (book_step || (VNNI && LUT && SG == 2))
    book_n = _mm256_sub_epi8(book_v, _mm256_set1_epi8(char(VNNI ? -128 : book_base)));
  thread_local std::vector<Vector32> widened;  // widened, prefill past 8 tokens: widen_half's
  if (widen && x.t > 8) widened.resize(size_t(16 * geo.groups * geo.blocks_per_group));
  __m256i* eo = reinterpret_cast<__m256i*>(widened.data());
  const int z = w.implied_zero;
  // 6 bits, more than one token tile, and a codebook taken as narrow codes, more than one tile of 8 (with
  // VNNI a codebook in groups of 16, more than one tile of 4): each row block unpacked once into the 8-bit
  // layout (a codebook's values - its least; with VNNI + 128), its tiles then the 8-bit narrow ones (VNNI:
  // wide; the same integers). VNNI's groups of 32 gained nothing so (0.91-1.06x the time, 1 thread, 128
  // tokens, 1024 -> 5632 and 2816 -> 1024; groups of 16 0.76-0.88x).
  const bool book_expand = (book_step > 0 && x.t > 8) || (VNNI && LUT && SG == 2 && x.t > 4);
  // such a codebook whose magnitudes allow (IQ2's grid, IQ3_XXS's), where chosen (select_codebook_prefill:
  // AMD's), from 4 tokens: magnitude_block, past 8 tokens on the row block unpacked twice, |value| then the
  // values, else looking both up in the tile (1 thread, 1024 -> 5632 and 2816 -> 1024 on Zen 2, IQ2-like
  // groups of 16 / 32: 128 tokens 1.21-1.24x / 1.25-1.28x, 4-8 tokens 1.05-1.19x / 1.10-1.25x)
  const int book_mag = book_step && x.t > 3 && codebook_magnitudes() ? codebook_magnitude_step(w.codebook) : 0;
  const bool expand = (SIX && x.t > 4) || book_expand;
  const RowLaneGeometry geo8 = SIX || LUT ? rowlane_geometry(8, w.k, w.group, w.scale_type, w.implied_zero) : geo;
  const int64_t sign_off = book_mag && book_expand ? geo8.row_block_bytes : 0;  // the values after the magnitudes
  thread_local std::vector<uint8_t> wide;
  if (expand) wide.resize(size_t(geo8.row_block_bytes + sign_off));
  const bool prefill = x.t > 3 && (!SIX || expand);  // q8_prefill_tile's tokens
  // decode of a codebook whose |values| are within 64: two products' pairs summed in 16 bits (q8_tile's PAIR)
  const bool decode_pairs = LUT && !VNNI && codebook_magnitude_step(w.codebook) >= 2;
  const bool stream_prefetch = kPrefetchCodes<FOUR, SIX, NARROW> || prefetch_all_codes();  // q8_tile's
  TokenTiles& tt = thread_token_tiles();
  // tokens [c0, c1) at a time (one chunk but in long prefills: TokenTiles' memory)
  for (int64_t c0 = 0, c1 = std::min(x.t, kTokenChunk); c0 < x.t; c0 = c1, c1 = std::min(x.t, c1 + kTokenChunk)) {
    if (prefill)
      interleave_tokens(x, c0, c1, S.data(), geo.groups * SG, asum, tt, widen);
    for (int64_t nb = n0 / 16 * 16; nb < n1; nb += 16) {
      const __m256i m[2] = {lane_mask8(nb, n0, n1), lane_mask8(nb + 8, n0, n1)};
      const uint8_t* rb = w.packed + (nb / 16) * geo.row_block_bytes;
      if (x.t <= 3) {  // decode, batches of up to 3: both halves at once (each 64-byte line of codes
                       // read once); 2 and 3 tokens measured 6-13% faster so than half by half
        auto both_halves = [&](auto nt) {
          auto tile = [&](auto one) {
            auto run = [&](auto pair) {
              q8_tile<VNNI, 2, nt(), FOUR, CB, SIX, LUT, NARROW, ST, SG, one(), pair()>(
                  geo, z, rb, 0, x, S.data(), 0, bias, nb, m, out, ldo, stream_prefetch, w.codebook, w.narrow_base,
                  asum);
            };
            if constexpr (LUT && !VNNI) {
              if (decode_pairs) return run(std::true_type{});
            }
            run(std::false_type{});
          };
          if constexpr (SG == 2) tile(std::true_type{});
          else if (geo.blocks_per_group == 1) tile(std::true_type{});
          else tile(std::false_type{});
        };
        if (x.t == 1) both_halves(std::integral_constant<int, 1>{});
        if (x.t == 2) both_halves(std::integral_constant<int, 2>{});
        if (x.t == 3) both_halves(std::integral_constant<int, 3>{});
        continue;
      }
      if constexpr (SIX) {
        if (expand)
          rowlane_unpack_to_eight(geo, geo8, rb, wide.data(), [](const uint8_t* src, uint8_t* dst) {
            for (int h = 0; h < 2; ++h)
              for (int p = 0; p < 2; ++p) {
                __m256i q[4];
                six_bit_quad(src + 32 * h, p, q);
                for (int v = 0; v < 4; ++v)
                  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 64 * (4 * p + v) + 32 * h), q[v]);
              }
          });
      }
      if constexpr (LUT) {
        if (book_expand)
          rowlane_unpack_to_eight(geo, geo8, rb, wide.data(), [&](const uint8_t* src, uint8_t* dst) {
            const __m256i lut = book_mag ? _mm256_abs_epi8(book_v) : book_n;
            auto store = [&](int64_t at, __m256i table, __m256i positions) {
              _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + at), _mm256_shuffle_epi8(table, positions));
            };
            for (int h = 0; h < 2; ++h)
              for_block_positions<CB>(src + 32 * h, [&](__m256i p, int q) {
                store(64 * q + 32 * h, lut, p);
                if (book_mag) store(sign_off + 64 * q + 32 * h, book_v, p);
              });
          });
      }
      for (int h = 0; h < 2; ++h) {  // one half at a time (what the 16 registers hold)
        if (!any_lane(nb + 8 * h, n0, n1)) continue;
        if constexpr (ST == ScaleType::Factored) expand_half<SG>(geo, rb, h, pre.data());
        if (kEight && prefill) {  // up to 8 tokens
          // widened, more than one tile: the half's quads decoded once
          const bool decoded = widen && c1 - c0 > 8;
          if (decoded) widen_half<FOUR, CB>(geo, rb, h, w.codebook, eo);
          const RowLaneGeometry& cg = expand ? geo8 : geo;
          const uint8_t* crb = expand ? wide.data() : rb;
          for_token_tiles<8>(c1 - c0, [&](auto nt, int64_t tc) {
            auto tile8 = [&](auto kind, auto bpg, auto pre_decoded, auto step, auto lut) {
              if constexpr (kEight)
                q8_tile8<kind(), lut(), nt(), ST, SG, bpg(), pre_decoded(), step(), CB, FOUR && NARROW>(
                    cg, z, crb, h, tt, tc / 4, bias, nb, m[h], out + (c0 + tc) * ldo, ldo, w.codebook,
                    book_step ? book_base : w.narrow_base, ST == ScaleType::Factored ? pre.data() : nullptr,
                    eo, sign_off);
            };
            auto with_bpg = [&](auto kind, auto pre_decoded, auto step, auto lut) {
              if (cg.blocks_per_group == 1) tile8(kind, std::integral_constant<int, 1>{}, pre_decoded, step, lut);
              else tile8(kind, std::integral_constant<int, 0>{}, pre_decoded, step, lut);
            };
            using No = std::false_type;
            using Step2 = std::integral_constant<int, 2>;
            using Step4 = std::integral_constant<int, 4>;
            using Narrow = std::integral_constant<Tile8, Tile8::Narrow>;
            using Lut = std::bool_constant<LUT>;
            if constexpr (kWidened) {
              using Widened = std::integral_constant<Tile8, Tile8::Widened>;
              if constexpr (LUT) {  // a codebook as narrow codes: unpacked to 8 bits, or looked up in the tile
                auto book = [&](auto lut) {
                  using Magnitude = std::integral_constant<Tile8, Tile8::Magnitude>;
                  if (book_mag == 3) return with_bpg(Magnitude{}, No{}, std::integral_constant<int, 3>{}, lut);
                  if (book_mag == 2) return with_bpg(Magnitude{}, No{}, Step2{}, lut);
                  if (book_step == 1) return with_bpg(Narrow{}, No{}, std::integral_constant<int, 1>{}, lut);
                  if (book_step == 2) return with_bpg(Narrow{}, No{}, Step2{}, lut);
                  with_bpg(Narrow{}, No{}, Step4{}, lut);
                };
                if (book_step) return book_expand ? book(No{}) : book(std::true_type{});
              }
              // the remainder tile decodes its own (one PRE instance per kind)
              if constexpr (nt() == 8) {
                if (decoded) return with_bpg(Widened{}, std::true_type{}, Step2{}, Lut{});
              }
              with_bpg(Widened{}, No{}, Step2{}, Lut{});
            } else if constexpr (FOUR) {
              with_bpg(std::integral_constant<Tile8, Tile8::Four>{}, No{}, Step2{}, Lut{});
            } else {  // codes within 31 of the base: sums of four
              if (w.narrow_five) return with_bpg(Narrow{}, No{}, Step4{}, Lut{});
              with_bpg(Narrow{}, No{}, Step2{}, Lut{});
            }
          });
        } else {
          for_token_tiles<4>(c1 - c0, [&](auto nt, int64_t tc) {
            const int64_t t = c0 + tc;
            const float* fpre = ST == ScaleType::Factored ? pre.data() : nullptr;
            if constexpr (!kEight) {
              if (prefill) {  // 6-bit codes: unpacked (4 tokens: q8_tile's per-quad unpacking)
                const RowLaneGeometry& cg = expand ? geo8 : geo;
                auto prefill_tile = [&](auto bpg) {
                  if constexpr (LUT) {  // unpacked: values + 128 as wide 8-bit codes
                    if (book_expand)
                      return q8_prefill_tile<VNNI, nt(), false, 4, false, false, ST, SG, bpg()>(
                          cg, z, wide.data(), h, tt, tc / 4, bias, nb, m[h], out + t * ldo, ldo, nullptr,
                          w.narrow_base, fpre);
                  }
                  q8_prefill_tile<VNNI, nt(), FOUR, CB, LUT, NARROW, ST, SG, bpg()>(
                      cg, z, expand ? wide.data() : rb, h, tt, tc / 4, bias, nb, m[h], out + t * ldo, ldo, w.codebook,
                      w.narrow_base, fpre);
                };
                if (cg.blocks_per_group == 1) prefill_tile(std::integral_constant<int, 1>{});
                else prefill_tile(std::integral_constant<int, 0>{});
                return;
              }
            }
            q8_tile<VNNI, 1, nt(), FOUR, CB, SIX, LUT, NARROW, ST, SG>(
                geo, z, rb, h, x, S.data(), t, bias, nb, m + h, out, ldo, stream_prefetch && h == 0 && t == 0,
                w.codebook, w.narrow_base, asum, fpre);
          });
        }
      }
    }
  }
}

// f(four, cb, six, lut, narrow, sg) as integral constants for w's codes (4 and 3 bits: plain, with a
// codebook or narrow, cb their bits; 2 bits: plain, taken as 4; 6 bits: narrow; 8 bits: wide or
// narrow) and groups a unit (2: groups of 16).
template <class F>
void with_group_kind(const QWeightView& w, F&& f) {
  using B = std::bool_constant<true>;
  using NB = std::bool_constant<false>;
  using C2 = std::integral_constant<int, 2>;
  using C4 = std::integral_constant<int, 4>;
  auto per_sg = [&](auto four, auto cb, auto six, auto lut, auto narrow) {
    w.group == 16 ? f(four, cb, six, lut, narrow, std::integral_constant<int, 2>{})
                  : f(four, cb, six, lut, narrow, std::integral_constant<int, 1>{});
  };
  const bool narrow = w.narrow_base != kWideCodes;
  if (w.bits == 2) return per_sg(B{}, C2{}, NB{}, NB{}, NB{});  // plain (check_rowlane_kind)
  if (w.bits == 6) return per_sg(NB{}, C4{}, B{}, NB{}, B{});  // narrow (check_rowlane_kind)
  if (w.bits == 8) return narrow ? per_sg(NB{}, C4{}, NB{}, NB{}, B{}) : per_sg(NB{}, C4{}, NB{}, NB{}, NB{});
  auto nibbles = [&](auto cb) {  // 4 or 3 bits
    if (w.codebook) return per_sg(B{}, cb, NB{}, B{}, NB{});
    narrow ? per_sg(B{}, cb, NB{}, NB{}, B{}) : per_sg(B{}, cb, NB{}, NB{}, NB{});
  };
  if (w.bits == 3) return nibbles(std::integral_constant<int, 3>{});
  nibbles(C4{});
}

// The int8 mode's entry point: w's scale type and kind of codes as template arguments.
template <bool VNNI>
void q8_rowlane(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0, int64_t n1, float* out,
                int64_t ldo) {
  check_rowlane_kind(w);
  with_scale_type(w.scale_type, [&](auto st) {
    with_group_kind(w, [&](auto four, auto cb, auto six, auto lut, auto narrow, auto sg) {
      q8_rows<VNNI, four(), cb(), six(), lut(), narrow(), st(), sg()>(x, w, bias, n0, n1, out, ldo);
    });
  });
}

}  // namespace

}  // namespace llmctl::kernels::detail
