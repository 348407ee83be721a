// AVX-512 (F, BW, VL, VNNI) kernels of the row-lane layout (qlinear.h, QLayout::RowLane16): lane r
// of every vector is row r of a block of 16, so one block of 32 inputs is, per token,
//   int8 mode: 8 vpdpbusd (4 inputs x 16 rows each, the token's 4 int8 activations broadcast) into
//              one integer sum, one convert and one FMA by (16 row scales x the block's activation
//              scale); per group one more FMA, offsets x S[group]; no horizontal sums, one masked
//              store of 16 outputs.
//              4 bits: the codes' low and high nibbles (inputs 4v + j and 16 + 4v + j) are split
//              into unsigned bytes once per tile.
//              8 bits: codes are stored + 128 (unsigned); the integer sums start from -128 * the sum
//              of the block's activation codes, so they stay exact.
//              4 bits with a codebook: vpshufb turns the nibbles into their values + 128, unsigned,
//              and the sums start from -128 * the activations' sum as for 8 bits.
//              Narrow codes (stored = code - base: 0..63 in 8 bits, 0..15 in 4): taken unsigned as
//              stored, the sums starting from base * the activations' sum.
//              6 bits (narrow): each quad of 3 vectors is unpacked into the 8-bit layout's 4
//              (six_bit_quad), then taken as 8-bit narrow codes.
//   f32 mode:  codes -> f32 -> fma(code, scale, offset) per input, then one FMA per token into
//              accumulator input % 4 (a codebook's values by one vpermd of it as int32).
//   Groups of 16: a block's inputs 0..15 (low nibbles, or vectors 0..3 of 8 bits) and 16..31 are
//   two groups, each with its own integer dot product, scale and offset.
// A tile is RB row blocks x NT tokens: int8 mode 2 x 4 (each broadcast feeds two row blocks; 1 x 8
// for groups of 16; from 4 tokens q8_prefill_tile, qlinear_rowlane_avx512_prefill.h, else q8_tile),
// f32 mode 1 x 4; the weight codes are loaded and split once for the NT tokens. The operations per
// (row, token), and their order, are those of the scalar reference (qlinear_rowlane.cpp) whatever
// RB, NT, T or [n0, n1) (integer sums are exact in any order): the results equal it bit for bit.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/qlinear_impl.h"
#include "kernels/kernel_check.h"

namespace llmctl::kernels::detail {

namespace {

template <bool F16>
inline __m512 load16(const uint8_t* p) {
  if constexpr (F16)
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  else
    return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
}

// Scales (which 0) or offsets (which 1) of the 16 rows of group sg (group 16: 0 or 1, else 0) of a
// unit whose parameters start at params (after its codes); hdr: its super-block's header (factored
// scales: D x m, as rowlane_param).
template <ScaleType ST>
inline __m512 load_params16(const RowLaneGeometry& geo, const uint8_t* params, const uint8_t* hdr, int which,
                            int sg = 0) {
  const int slot = which * geo.halves + sg;
  if constexpr (ST == ScaleType::Factored) {
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(hdr + 32 * which)));
    const __m128i m = _mm_loadu_si128(reinterpret_cast<const __m128i*>(params + 16 * slot));
    return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(m)));
  } else {
    return load16<ST == ScaleType::F16>(params + slot * geo.param_bytes);
  }
}

inline __m512i bcast4(const int8_t* p) {  // 4 activation bytes to every lane
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// The 4-bit layout's vector v of the block at cp: as stored, or for 2-bit codes (TWO, qlinear.h)
// vector v / 2 shifted right by 2 (v % 2). Its codes are the bits code_mask keeps of it (the low
// nibbles) and of it >> 4 (the high ones).
template <bool TWO>
inline __m512i nibble_vector(const uint8_t* cp, int v) {
  if constexpr (TWO) {
    const __m512i b = _mm512_loadu_si512(cp + 64 * (v / 2));
    return v % 2 ? _mm512_srli_epi16(b, 2) : b;
  } else {
    return _mm512_loadu_si512(cp + 64 * v);
  }
}
template <bool TWO>
inline __m512i code_mask() {
  return _mm512_set1_epi8(TWO ? 0x03 : 0x0F);
}

// The 6-bit layout's quad p of the block at cp (qlinear.h) as the 8-bit layout's vectors 4p..4p+3 of
// stored values (0..63): three ANDs, and the fourth vector's bits gathered from the three's tops.
inline void six_bit_quad(const uint8_t* cp, int p, __m512i q[4]) {
  const __m512i v0 = _mm512_loadu_si512(cp + 192 * p), v1 = _mm512_loadu_si512(cp + 192 * p + 64),
                v2 = _mm512_loadu_si512(cp + 192 * p + 128), low6 = _mm512_set1_epi8(0x3F);
  q[0] = _mm512_and_si512(v0, low6), q[1] = _mm512_and_si512(v1, low6), q[2] = _mm512_and_si512(v2, low6);
  // (v0 >> 6) | (v1 >> 6) << 2 | (v2 >> 6) << 4 per byte: 16-bit shifts, each field kept by a mask
  // (0xCA: mask ? a : b, bit by bit)
  const __m512i t = _mm512_and_si512(_mm512_srli_epi16(v2, 2), _mm512_set1_epi8(0x30));
  const __m512i u = _mm512_ternarylogic_epi32(_mm512_set1_epi8(0x0C), _mm512_srli_epi16(v1, 4), t, 0xCA);
  q[3] = _mm512_ternarylogic_epi32(_mm512_set1_epi8(0x03), _mm512_srli_epi16(v0, 6), u, 0xCA);
}

// Lanes of rows nb + r in [n0, n1); none for a block past n1 (a pair's second block at the end).
inline __mmask16 lane_mask(int64_t nb, int64_t n0, int64_t n1) {
  const int64_t lo = std::clamp<int64_t>(n0 - nb, 0, 16), hi = std::clamp<int64_t>(n1 - nb, 0, 16);
  return __mmask16(((1u << hi) - 1) & ~((1u << lo) - 1));
}

// Bytes ahead of the codes in use that a tile prefetches, in each of its row blocks' streams. Decode
// on a Zen 5 VM (2 threads, weights streamed from memory): Q8_0 +35%, Q4_0 +25% against none; 2 KB
// ahead recovers half of that, 16 KB no more.
constexpr int64_t kPrefetchAhead = 8192;

// RB row blocks (rows nb..nb+16 RB - 1, the first one's bytes at rb, the next ones following it) x
// NT tokens from t, int8 activations; m[i]: the lanes of row block i to store. prefetch: the first
// token tile of these row blocks (the later ones find the codes in cache).
// asum (BASED: codes stored from a base, see q8_rows; qact_half_sums): the activations' integer sums
// per half block, which base multiplies into each integer sum's start. book (LUT): the codebook's values + 128, in each
// 128-bit lane. SG: groups a unit (2: group 16, whose inputs 0..15 and 16..31 of a block get their
// own integer dot products, scales and offsets). SIX: 6-bit narrow codes (BASED). TWO (with FOUR):
// 2-bit codes, each 4-bit vector from half a 2-bit one (nibble_vector).
// Per block of 32 inputs, vector by vector: the RB blocks' codes are loaded (and split) once for the
// NT tokens, and each token's broadcast activations feed the RB dot products; SG integer chains per
// (token, row block). Accumulators: (SG + 1) x RB x NT vectors; RB = 2, NT = 4, SG = 1 fills 24 of
// the 32 registers.
template <int RB, int NT, bool FOUR, bool TWO, bool SIX, bool LUT, bool BASED, ScaleType ST, int SG>
void q8_tile(const RowLaneGeometry& geo, int zero, const uint8_t* rb, const QActivations& x, const int32_t* asum,
             int base, __m512i book, const float* S, int64_t t, const float* bias, int64_t nb, const __mmask16* m, float* out,
             int64_t ldo, bool prefetch) {
  const int64_t K = x.k, blocks = K / 32, G = geo.groups, bpg = geo.blocks_per_group, GS = G * SG;
  const __m512i nib = code_mask<TWO>();
  const int8_t* xq = x.q + t * K;
  __m512 acc[RB][NT];
  for (int i = 0; i < RB; ++i)
    for (int j = 0; j < NT; ++j) acc[i][j] = _mm512_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    const uint8_t* gp[RB];
    const uint8_t* hdr[RB];
    __m512 s[RB][SG];
    for (int i = 0; i < RB; ++i) {
      gp[i] = rowlane_group(geo, rb + i * geo.row_block_bytes, g);
      hdr[i] = rowlane_header(geo, rb + i * geo.row_block_bytes, g);
      for (int sg = 0; sg < SG; ++sg) s[i][sg] = load_params16<ST>(geo, gp[i] + bpg * geo.code_bytes, hdr[i], 0, sg);
    }
    for (int64_t jb = 0; jb < bpg; ++jb) {
      const int64_t b = g * bpg + jb;
      if (prefetch)
        for (int i = 0; i < RB; ++i)
          for (int64_t l = 0; l < geo.code_bytes; l += 64)
            _mm_prefetch(reinterpret_cast<const char*>(gp[i] + jb * geo.code_bytes + kPrefetchAhead + l), _MM_HINT_T0);
      __m512i dot[RB][NT][SG];
      for (int j = 0; j < NT; ++j) {
        for (int sg = 0; sg < SG; ++sg) {
          __m512i init = _mm512_setzero_si512();
          if constexpr (BASED) {  // asum is empty otherwise
            const int32_t* hs = asum + (t + j) * (K / 16) + 2 * b;
            init = _mm512_set1_epi32(base * (SG == 2 ? hs[sg] : hs[0] + hs[1]));
          }
          for (int i = 0; i < RB; ++i) dot[i][j][sg] = init;
        }
      }
      if constexpr (FOUR) {
        for (int v = 0; v < 4; ++v) {
          __m512i lo[RB], hi[RB];
          for (int i = 0; i < RB; ++i) {
            const __m512i W = nibble_vector<TWO>(gp[i] + jb * geo.code_bytes, v);
            lo[i] = _mm512_and_si512(W, nib);                         // inputs 4v + j
            hi[i] = _mm512_and_si512(_mm512_srli_epi16(W, 4), nib);  // inputs 16 + 4v + j
            if constexpr (LUT) lo[i] = _mm512_shuffle_epi8(book, lo[i]), hi[i] = _mm512_shuffle_epi8(book, hi[i]);
          }
          for (int j = 0; j < NT; ++j) {
            const int8_t* a = xq + j * K + b * 32;
            const __m512i alo = bcast4(a + 4 * v), ahi = bcast4(a + 16 + 4 * v);
            for (int i = 0; i < RB; ++i) dot[i][j][0] = _mm512_dpbusd_epi32(dot[i][j][0], lo[i], alo);
            for (int i = 0; i < RB; ++i) dot[i][j][SG - 1] = _mm512_dpbusd_epi32(dot[i][j][SG - 1], hi[i], ahi);
          }
        }
      } else if constexpr (SIX) {  // per quad: its 4 vectors unpacked once for the NT tokens
#pragma GCC unroll 2
        for (int p = 0; p < 2; ++p) {
          const int sg = SG == 2 ? p : 0;  // group 16: quad 0 is inputs 0..15
          __m512i quad[RB][4];
          for (int i = 0; i < RB; ++i) six_bit_quad(gp[i] + jb * geo.code_bytes, p, quad[i]);
#pragma GCC unroll 4
          for (int q = 0; q < 4; ++q)
            for (int j = 0; j < NT; ++j) {
              const __m512i a = bcast4(xq + j * K + b * 32 + 16 * p + 4 * q);
              for (int i = 0; i < RB; ++i) dot[i][j][sg] = _mm512_dpbusd_epi32(dot[i][j][sg], quad[i][q], a);
            }
        }
      } else {
        for (int v = 0; v < 8; ++v) {
          const int sg = SG == 2 ? v / 4 : 0;  // group 16: vectors 0..3 are inputs 0..15
          __m512i W[RB];
          for (int i = 0; i < RB; ++i)
            W[i] = _mm512_loadu_si512(gp[i] + jb * geo.code_bytes + 64 * v);  // inputs 4v + j
          for (int j = 0; j < NT; ++j) {
            const __m512i a = bcast4(xq + j * K + b * 32 + 4 * v);
            for (int i = 0; i < RB; ++i) dot[i][j][sg] = _mm512_dpbusd_epi32(dot[i][j][sg], W[i], a);
          }
        }
      }
      for (int j = 0; j < NT; ++j) {
        const __m512 xs = _mm512_set1_ps(x.scale[(t + j) * blocks + b]);
        for (int i = 0; i < RB; ++i)
          for (int sg = 0; sg < SG; ++sg)
            acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[i][j][sg]), _mm512_mul_ps(s[i][sg], xs), acc[i][j]);
      }
    }
    if (zero == 0) continue;  // implied zero 0: no offset term
    for (int i = 0; i < RB; ++i)
      for (int sg = 0; sg < SG; ++sg) {
        const __m512 o = geo.offsets ? load_params16<ST>(geo, gp[i] + bpg * geo.code_bytes, hdr[i], 1, sg)
                                     : _mm512_mul_ps(s[i][sg], _mm512_set1_ps(float(-zero)));
        for (int j = 0; j < NT; ++j)
          acc[i][j] = _mm512_fmadd_ps(o, _mm512_set1_ps(S[(t + j) * GS + g * SG + sg]), acc[i][j]);
      }
  }
  for (int i = 0; i < RB; ++i) {
    const int64_t n = nb + 16 * i;
    const __m512 bv = bias ? _mm512_maskz_loadu_ps(m[i], bias + n) : _mm512_setzero_ps();
    for (int j = 0; j < NT; ++j)
      _mm512_mask_storeu_ps(out + (t + j) * ldo + n, m[i], bias ? _mm512_add_ps(acc[i][j], bv) : acc[i][j]);
  }
}

// The same tile in the f32 mode. book32 (LUT): the codebook's 16 values as int32; base: NARROW's
// (SIX: 6-bit narrow codes, unpacked as q8_tile does; TWO: 2-bit codes, as q8_tile takes them).
template <int NT, bool FOUR, bool TWO, bool SIX, bool LUT, bool NARROW, ScaleType ST, int SG>
void f32_tile(const RowLaneGeometry& geo, int zero, const uint8_t* rb, const float* x, int64_t K, int64_t t,
              const float* bias, int64_t nb, __mmask16 m, float* out, int64_t ldo, __m512i book32, int base) {
  const int64_t G = geo.groups, bpg = geo.blocks_per_group;
  const __m512i mask = _mm512_set1_epi32(TWO ? 0x03 : FOUR ? 0x0F : 0xFF);
  const __m512i stored_minus = _mm512_set1_epi32(NARROW ? -base : 128);  // code = stored value - this
  __m512 acc[NT][4];
  for (int j = 0; j < NT; ++j)
    for (int i = 0; i < 4; ++i) acc[j][i] = _mm512_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    const uint8_t* gp = rowlane_group(geo, rb, g);
    const uint8_t* params = gp + bpg * geo.code_bytes;
    const uint8_t* hdr = rowlane_header(geo, rb, g);
    __m512 s[SG], o[SG];
    for (int sg = 0; sg < SG; ++sg) {
      s[sg] = load_params16<ST>(geo, params, hdr, 0, sg);
      o[sg] = geo.offsets ? load_params16<ST>(geo, params, hdr, 1, sg)
              : zero == 0 ? _mm512_set1_ps(-0.0f) : _mm512_mul_ps(s[sg], _mm512_set1_ps(float(-zero)));
    }
    for (int64_t jb = 0; jb < bpg; ++jb) {
      const int64_t b = g * bpg + jb;
      const uint8_t* cp = gp + jb * geo.code_bytes;
      // one input's 16 codes -> 16 weights, then every token's FMA
      auto step = [&](__m512i W, int shift, int input) {
        __m512i c = _mm512_and_si512(_mm512_srli_epi32(W, shift), mask);
        if constexpr (!FOUR || NARROW) c = _mm512_sub_epi32(c, stored_minus);
        if constexpr (LUT) c = _mm512_permutexvar_epi32(c, book32);
        const int sg = SG == 2 && input >= 16;  // group 16: inputs 16..31 are the second group
        const __m512 wf = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c), s[sg], o[sg]);
        for (int j = 0; j < NT; ++j)
          acc[j][input % 4] = _mm512_fmadd_ps(_mm512_set1_ps(x[(t + j) * K + b * 32 + input]), wf, acc[j][input % 4]);
      };
      if constexpr (FOUR) {
        for (int v = 0; v < 4; ++v) {
          const __m512i W = nibble_vector<TWO>(cp, v);
          for (int i = 0; i < 4; ++i) step(W, 8 * i, 4 * v + i);
          for (int i = 0; i < 4; ++i) step(W, 8 * i + 4, 16 + 4 * v + i);
        }
      } else if constexpr (SIX) {
#pragma GCC unroll 2
        for (int p = 0; p < 2; ++p) {
          __m512i quad[4];
          six_bit_quad(cp, p, quad);
#pragma GCC unroll 4
          for (int q = 0; q < 4; ++q)
            for (int i = 0; i < 4; ++i) step(quad[q], 8 * i, 16 * p + 4 * q + i);
        }
      } else {
        for (int v = 0; v < 8; ++v) {
          const __m512i W = _mm512_loadu_si512(cp + 64 * v);
          for (int i = 0; i < 4; ++i) step(W, 8 * i, 4 * v + i);
        }
      }
    }
  }
  const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + nb) : _mm512_setzero_ps();
  for (int j = 0; j < NT; ++j) {
    const __m512 sum = _mm512_add_ps(_mm512_add_ps(acc[j][0], acc[j][1]), _mm512_add_ps(acc[j][2], acc[j][3]));
    _mm512_mask_storeu_ps(out + (t + j) * ldo + nb, m, bias ? _mm512_add_ps(sum, bv) : sum);
  }
}

// Tokens [0, T) in tiles of NMAX (<= 8) and the remainder as one tile: tile(nt, t).
template <int NMAX, class Tile>
void for_token_tiles(int64_t T, Tile&& tile) {
  int64_t t = 0;
  for (; t + NMAX <= T; t += NMAX) tile(std::integral_constant<int, NMAX>{}, t);
  switch (T - t) {
    case 1: tile(std::integral_constant<int, 1>{}, t); break;
    case 2: if constexpr (NMAX > 2) tile(std::integral_constant<int, 2>{}, t); break;
    case 3: if constexpr (NMAX > 3) tile(std::integral_constant<int, 3>{}, t); break;
    case 4: if constexpr (NMAX > 4) tile(std::integral_constant<int, 4>{}, t); break;
    case 5: if constexpr (NMAX > 5) tile(std::integral_constant<int, 5>{}, t); break;
    case 6: if constexpr (NMAX > 6) tile(std::integral_constant<int, 6>{}, t); break;
    case 7: if constexpr (NMAX > 7) tile(std::integral_constant<int, 7>{}, t); break;
    default: break;
  }
}

// Token tiles of up to NMAX over every row block of [n0, n1); tile(nt, t, rb, nb, mask).
template <int NMAX, class Tile>
void for_tiles(const RowLaneGeometry& geo, const uint8_t* packed, int64_t T, int64_t n0, int64_t n1, Tile&& tile) {
  for (int64_t nb = n0 / 16 * 16; nb < n1; nb += 16) {
    const __mmask16 m = lane_mask(nb, n0, n1);
    const uint8_t* rb = packed + (nb / 16) * geo.row_block_bytes;
    for_token_tiles<NMAX>(T, [&](auto nt, int64_t t) { tile(nt, t, rb, nb, m); });
  }
}

// Whether a weight's int8 dot products are of codes stored from a base (8-bit codes + 128, a
// codebook's values + 128, narrow codes - base), corrected by base x the activations' sums.
template <bool FOUR, bool LUT, bool NARROW>
constexpr bool uses_base() {
  return !FOUR || LUT || NARROW;
}

// The codebook's values + 128 as bytes, in each 128-bit lane (vpshufb's table); zero without one.
__m512i book_bytes(const int8_t* codebook) {
  if (!codebook) return _mm512_setzero_si512();
  alignas(16) uint8_t b[16];
  for (int i = 0; i < 16; ++i) b[i] = uint8_t(int(codebook[i]) + 128);
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(b)));
}

}  // namespace

}  // namespace llmctl::kernels::detail

#include "kernels/cpu/qlinear_rowlane_avx512_prefill.h"
#include "kernels/cpu/qlinear_rowlane_amx.h"

namespace llmctl::kernels::detail {

namespace {

template <bool FOUR, bool TWO, bool SIX, bool LUT, bool NARROW, ScaleType ST, int SG>
void q8_rows(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0, int64_t n1, float* out,
             int64_t ldo) {
  constexpr bool kBased = uses_base<FOUR, LUT, NARROW>();
  const RowLaneGeometry geo = rowlane_geometry(w.bits, w.k, w.group, w.scale_type, w.implied_zero);
  KERNEL_CHECK(geo.halves == SG) << "row-lane kernel for " << SG << " groups a unit given " << geo.halves;
  thread_local std::vector<float> S;
  S.resize(static_cast<size_t>(x.t * geo.groups * SG));
  qact_group_sums(x, w.group, S.data());
  thread_local std::vector<int32_t> own_sums;  // per half block of 16 inputs
  const int32_t* asum = kBased ? qact_half_sums_of(x, own_sums) : nullptr;
  const int base = NARROW ? w.narrow_base : -128;  // code = stored value + base
  const __m512i book = book_bytes(LUT ? w.codebook : nullptr);
  // From 4 tokens, row blocks in pairs (each activation broadcast then feeds two dot products; an odd
  // last one alone). Fewer tokens stream the weights one row block at a time: decode (T = 1) of the
  // Q4_0 and Q8_0 models measured 20-25% slower with pairs, prefetching or not. Groups of 16 (twice
  // the integer chains) run one row block at a time.
  const bool pairs = x.t >= 4 && SG == 1;
  // More than one token tile: each row block (pair) unpacked once into the 8-bit layout, its tiles then
  // the 8-bit ones (the same integers): 6 bits as narrow codes (T = 64 measured 1.2x slower unpacking
  // per tile), a codebook's values + 128 as wide codes (its positions looked up once, not per tile)
  const bool expand = (SIX || LUT) && x.t > 4;
  const RowLaneGeometry geo8 = SIX || LUT ? rowlane_geometry(8, w.k, w.group, w.scale_type, w.implied_zero) : geo;
  thread_local std::vector<uint8_t> wide;
  if (expand) wide.resize(size_t(2 * geo8.row_block_bytes));
  // From 4 tokens the prefill tile (6 bits: once unpacked, T > 4), over the tokens interleaved
  const bool prefill = x.t >= 4 && (!SIX || expand);
  TokenTiles& tt = thread_token_tiles();
  // the tiles over a codebook's unpacked codes take factored scales from the buffer in groups of 16 only
  constexpr bool kUnpackedBuffer = uses_factored_buffer<ST, LUT, true, SG>();
  const bool factored_buffer = uses_factored_buffer<ST, LUT>() || (LUT && kUnpackedBuffer && expand);
  thread_local std::vector<float> pre;  // expand_factored's: a row block pair's
  if (factored_buffer && prefill) pre.resize(size_t(2 * geo.groups * 2 * SG * 16));
  // tokens [c0, c1) at a time (one chunk but in long prefills: TokenTiles' memory)
  for (int64_t c0 = 0, c1 = std::min(x.t, kTokenChunk); c0 < x.t; c0 = c1, c1 = std::min(x.t, c1 + kTokenChunk)) {
    if (prefill) interleave_tokens(x, c0, c1, S.data(), geo.groups * SG, asum, tt);
    for (int64_t nb = n0 / 16 * 16; nb < n1; nb += pairs ? 32 : 16) {
      const __mmask16 m[2] = {lane_mask(nb, n0, n1), lane_mask(nb + 16, n0, n1)};
      const uint8_t* rb = w.packed + (nb / 16) * geo.row_block_bytes;
      const bool two = pairs && nb + 16 < n1;
      // factored scales multiplied out once for the chunk's token tiles (q8_prefill_tile takes them so)
      const float* fpre = nullptr;
      if constexpr (ST == ScaleType::Factored) {
        if (factored_buffer && prefill) {
          expand_factored<SG>(geo, rb, two ? 2 : 1, pre.data());
          fpre = pre.data();
        }
      }
      if (LUT && expand)
        for (int i = 0; i < (two ? 2 : 1); ++i)
          rowlane_unpack_to_eight(geo, geo8, rb + i * geo.row_block_bytes, wide.data() + i * geo8.row_block_bytes,
                                  [&](const uint8_t* src, uint8_t* dst) {
                                    const __m512i nib = _mm512_set1_epi8(0x0F);
                                    for (int v = 0; v < 4; ++v) {
                                      const __m512i W = _mm512_loadu_si512(src + 64 * v);
                                      _mm512_storeu_si512(dst + 64 * v,
                                                          _mm512_shuffle_epi8(book, _mm512_and_si512(W, nib)));
                                      _mm512_storeu_si512(
                                          dst + 64 * (4 + v),
                                          _mm512_shuffle_epi8(book, _mm512_and_si512(_mm512_srli_epi16(W, 4), nib)));
                                    }
                                  });
      if (SIX && expand)
        for (int i = 0; i < (two ? 2 : 1); ++i)
          rowlane_unpack_to_eight(geo, geo8, rb + i * geo.row_block_bytes, wide.data() + i * geo8.row_block_bytes,
                                  [](const uint8_t* src, uint8_t* dst) {
                                    for (int p = 0; p < 2; ++p) {
                                      __m512i q[4];
                                      six_bit_quad(src, p, q);
                                      for (int v = 0; v < 4; ++v) _mm512_storeu_si512(dst + 64 * (4 * p + v), q[v]);
                                    }
                                  });
      auto tile = [&](auto nt, int64_t tc) {
        const int64_t t = c0 + tc;
        const int z = w.implied_zero;
        const uint8_t* codes = expand ? wide.data() : rb;
        const RowLaneGeometry& cg = expand ? geo8 : geo;
        auto prefill_tile = [&](auto rbs, auto bpg) {
          if constexpr (LUT) {  // unpacked: values + 128 as wide 8-bit codes
            if (expand)
              return q8_prefill_tile<rbs(), nt(), false, false, false, kBased, ST, SG, bpg(), kUnpackedBuffer>(
                  cg, z, codes, base, book, tt, tc / 4, bias, nb, m, out + t * ldo, ldo, fpre);
          }
          q8_prefill_tile<rbs(), nt(), FOUR, TWO, LUT, kBased, ST, SG, bpg()>(cg, z, codes, base, book, tt, tc / 4, bias,
                                                                        nb, m, out + t * ldo, ldo, fpre);
        };
        using One = std::integral_constant<int, 1>;
        using Two = std::integral_constant<int, 2>;
        using Any = std::integral_constant<int, 0>;
        if constexpr (nt() > 4) {  // groups of 16's prefill (below)
          cg.blocks_per_group == 1 ? prefill_tile(One{}, One{}) : prefill_tile(One{}, Any{});
        } else if (prefill && two) {
          cg.blocks_per_group == 1 ? prefill_tile(Two{}, One{}) : prefill_tile(Two{}, Any{});
        } else if (prefill) {
          cg.blocks_per_group == 1 ? prefill_tile(One{}, One{}) : prefill_tile(One{}, Any{});
        } else if (two)
          q8_tile<2, nt(), FOUR, TWO, SIX, LUT, kBased, ST, SG>(geo, z, rb, x, asum, base, book, S.data(), t, bias,
                                                      nb, m, out, ldo, t == 0);
        else
          q8_tile<1, nt(), FOUR, TWO, SIX, LUT, kBased, ST, SG>(geo, z, rb, x, asum, base, book, S.data(), t, bias,
                                                      nb, m, out, ldo, t == 0);
      };
      // groups of 16 (one row block a tile): two token tiles at a time, each block's codes decoded once
      // for 8 tokens
      if constexpr (SG == 2) {
        if (prefill) {
          for_token_tiles<8>(c1 - c0, tile);
          continue;
        }
      }
      for_token_tiles<4>(c1 - c0, tile);
    }
  }
}

template <bool FOUR, bool TWO, bool SIX, bool LUT, bool NARROW, ScaleType ST, int SG>
void f32_rows(const float* x, int64_t T, const QWeightView& w, const float* bias, int64_t n0, int64_t n1, float* out,
              int64_t ldo) {
  const RowLaneGeometry geo = rowlane_geometry(w.bits, w.k, w.group, w.scale_type, w.implied_zero);
  KERNEL_CHECK(geo.halves == SG) << "row-lane kernel for " << SG << " groups a unit given " << geo.halves;
  const __m512i book32 =
      LUT ? _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w.codebook))) : _mm512_setzero_si512();
  for_tiles<4>(geo, w.packed, T, n0, n1, [&](auto nt, int64_t t, const uint8_t* rb, int64_t nb, __mmask16 m) {
    f32_tile<nt(), FOUR, TWO, SIX, LUT, NARROW, ST, SG>(geo, w.implied_zero, rb, x, w.k, t, bias, nb, m, out, ldo, book32,
                                          w.narrow_base);
  });
}

// f(four, two, six, lut, narrow, st, sg): w's kind of codes, scale type and groups a unit (2: groups
// of 16) as template arguments, after checking that this kernel takes w.
template <class F>
void with_weight_kind(const QWeightView& w, F&& f) {
  check_rowlane_kind(w);
  KERNEL_CHECK(w.bits != 3) << "the AVX-512 row-lane kernels take no 3-bit codes (qweight_three_bit_ok: packed for "
                               "AVX2)";
  using B = std::bool_constant<true>;
  using NB = std::bool_constant<false>;
  const bool narrow = w.narrow_base != kWideCodes;
  with_scale_type(w.scale_type, [&](auto st) {
    auto kind = [&](auto four, auto two, auto six, auto lut, auto nar) {
      w.group == 16 ? f(four, two, six, lut, nar, st, std::integral_constant<int, 2>{})
                    : f(four, two, six, lut, nar, st, std::integral_constant<int, 1>{});
    };
    if (w.bits == 2) return kind(B{}, B{}, NB{}, NB{}, NB{});  // plain (check_rowlane_kind)
    if (w.bits == 6) return kind(NB{}, NB{}, B{}, NB{}, B{});  // narrow (check_rowlane_kind)
    if (w.bits == 8) return narrow ? kind(NB{}, NB{}, NB{}, NB{}, B{}) : kind(NB{}, NB{}, NB{}, NB{}, NB{});
    if (w.codebook) return kind(B{}, NB{}, NB{}, B{}, NB{});
    narrow ? kind(B{}, NB{}, NB{}, NB{}, B{}) : kind(B{}, NB{}, NB{}, NB{}, NB{});
  });
}

}  // namespace

void qlinear_rows_q8_rowlane_avx512(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0,
                                    int64_t n1, float* out, int64_t ldo) {
  with_weight_kind(w, [&](auto four, auto two, auto six, auto lut, auto narrow, auto st, auto sg) {
    q8_rows<four(), two(), six(), lut(), narrow(), st(), sg()>(x, w, bias, n0, n1, out, ldo);
  });
}

void qlinear_rows_q8_rowlane_amx(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0, int64_t n1,
                                 float* out, int64_t ldo) {
  with_weight_kind(w, [&](auto four, auto two, auto six, auto lut, auto narrow, auto st, auto sg) {
    const int64_t tiled = x.t / 16 * 16;
    if (tiled > 0) q8_rows_amx<four(), two(), six(), lut(), narrow(), st(), sg()>(x, w, bias, n0, n1, out, ldo);
    if (tiled < x.t)
      q8_rows<four(), two(), six(), lut(), narrow(), st(), sg()>(qactivation_rows(x, tiled, x.t), w, bias, n0, n1,
                                                                 out + tiled * ldo, ldo);
  });
}

void qlinear_rows_f32_rowlane_avx512(const float* x, int64_t T, const QWeightView& w, const float* bias, int64_t n0,
                                     int64_t n1, float* out, int64_t ldo) {
  with_weight_kind(w, [&](auto four, auto two, auto six, auto lut, auto narrow, auto st, auto sg) {
    f32_rows<four(), two(), six(), lut(), narrow(), st(), sg()>(x, T, w, bias, n0, n1, out, ldo);
  });
}

}  // namespace llmctl::kernels::detail
