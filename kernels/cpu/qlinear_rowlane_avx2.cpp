// AVX2 (FMA, F16C) kernels of the row-lane layout: the f32 mode here, the int8 mode's tile in
// qlinear_rowlane_avx2_tile.h (what the layout and the operations are: see there).
#include <immintrin.h>

#include "kernels/cpu/qlinear_rowlane_avx2_tile.h"

namespace llmctl::kernels::detail {

namespace {

// The f32 mode for half h of the row block at rb x NT tokens (NT <= 2: 4 accumulators a token).
// SIX: 6-bit narrow codes, unpacked by six_bit_quad; CB (with FOUR): the codes' bits (nibble_vector).
template <int NT, bool FOUR, int CB, bool SIX, bool LUT, bool NARROW, ScaleType ST, int SG>
void f32_tile(const RowLaneGeometry& geo, int zero, const uint8_t* rb, int h, const float* x, int64_t K, int64_t t,
              const float* bias, int64_t nb, __m256i m, float* out, int64_t ldo, const int8_t* codebook, int base) {
  const int64_t G = geo.groups, bpg = geo.blocks_per_group;
  const __m256i mask = _mm256_set1_epi32(CB == 2 ? 0x03 : FOUR ? 0x0F : 0xFF), seven = _mm256_set1_epi32(7);
  const __m256i stored_minus = _mm256_set1_epi32(NARROW ? -base : 128);  // code = stored value - this
  // LUT: the codebook's entries 0..7 and 8..15 as int32 (vpermd takes an index's low 3 bits)
  __m256i book_lo = _mm256_setzero_si256(), book_hi = _mm256_setzero_si256();
  if constexpr (LUT) {
    int64_t lo8, hi8;
    std::memcpy(&lo8, codebook, 8), std::memcpy(&hi8, codebook + 8, 8);
    book_lo = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(lo8));
    book_hi = _mm256_cvtepi8_epi32(_mm_cvtsi64_si128(hi8));
  }
  __m256 acc[NT][4];
  for (int j = 0; j < NT; ++j)
    for (int i = 0; i < 4; ++i) acc[j][i] = _mm256_setzero_ps();
  for (int64_t g = 0; g < G; ++g) {
    const uint8_t* gp = rowlane_group(geo, rb, g);
    const uint8_t* params = gp + bpg * geo.code_bytes;
    const uint8_t* hdr = rowlane_header(geo, rb, g);
    __m256 s[SG], o[SG];
    for (int sg = 0; sg < SG; ++sg) {
      s[sg] = load_params8<ST>(geo, params, super_d8(hdr, 0, h), 0, sg, h);
      o[sg] = geo.offsets ? load_params8<ST>(geo, params, super_d8(hdr, 1, h), 1, sg, h)
              : zero == 0 ? _mm256_set1_ps(-0.0f) : _mm256_mul_ps(s[sg], _mm256_set1_ps(float(-zero)));
    }
    for (int64_t jb = 0; jb < bpg; ++jb) {
      const int64_t b = g * bpg + jb;
      const uint8_t* cp = gp + jb * geo.code_bytes + 32 * h;
      // one input's 8 codes -> 8 weights, then every token's FMA
      auto step = [&](__m256i W, int shift, int input) {
        __m256i c = _mm256_and_si256(_mm256_srli_epi32(W, shift), mask);
        if constexpr (!FOUR || NARROW) c = _mm256_sub_epi32(c, stored_minus);
        if constexpr (LUT)
          c = _mm256_blendv_epi8(_mm256_permutevar8x32_epi32(book_lo, c), _mm256_permutevar8x32_epi32(book_hi, c),
                                 _mm256_cmpgt_epi32(c, seven));
        const int sg = SG == 2 && input >= 16;  // group 16: inputs 16..31 are the second group
        const __m256 wf = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c), s[sg], o[sg]);
        for (int j = 0; j < NT; ++j)
          acc[j][input % 4] = _mm256_fmadd_ps(_mm256_set1_ps(x[(t + j) * K + b * 32 + input]), wf, acc[j][input % 4]);
      };
      if constexpr (FOUR) {
        for (int v = 0; v < 4; ++v) {
          const __m256i W = nibble_vector<CB>(cp, v);
          for (int i = 0; i < 4; ++i) step(W, 8 * i, 4 * v + i);
          for (int i = 0; i < 4; ++i) step(W, 8 * i + 4, 16 + 4 * v + i);
        }
      } else if constexpr (SIX) {
#pragma GCC unroll 2
        for (int p = 0; p < 2; ++p) {
          __m256i quad[4];
          six_bit_quad(cp, p, quad);
#pragma GCC unroll 4
          for (int q = 0; q < 4; ++q)
            for (int i = 0; i < 4; ++i) step(quad[q], 8 * i, 16 * p + 4 * q + i);
        }
      } else {
        for (int v = 0; v < 8; ++v) {
          const __m256i W = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(cp + 64 * v));
          for (int i = 0; i < 4; ++i) step(W, 8 * i, 4 * v + i);
        }
      }
    }
  }
  const int64_t n = nb + 8 * h;
  const __m256 bv = bias ? _mm256_maskload_ps(bias + n, m) : _mm256_setzero_ps();
  for (int j = 0; j < NT; ++j) {
    const __m256 sum = _mm256_add_ps(_mm256_add_ps(acc[j][0], acc[j][1]), _mm256_add_ps(acc[j][2], acc[j][3]));
    _mm256_maskstore_ps(out + (t + j) * ldo + n, m, bias ? _mm256_add_ps(sum, bv) : sum);
  }
}

template <bool FOUR, int CB, bool SIX, bool LUT, bool NARROW, ScaleType ST, int SG>
void f32_rows(const float* x, int64_t T, const QWeightView& w, const float* bias, int64_t n0, int64_t n1, float* out,
              int64_t ldo) {
  const RowLaneGeometry geo = rowlane_geometry(w.bits, w.k, w.group, w.scale_type, w.implied_zero);
  KERNEL_CHECK(geo.halves == SG) << "row-lane kernel for " << SG << " groups a unit given " << geo.halves;
  for (int64_t nb = n0 / 16 * 16; nb < n1; nb += 16) {
    const uint8_t* rb = w.packed + (nb / 16) * geo.row_block_bytes;
    for (int h = 0; h < 2; ++h) {
      if (!any_lane(nb + 8 * h, n0, n1)) continue;
      const __m256i m = lane_mask8(nb + 8 * h, n0, n1);
      for_token_tiles<2>(T, [&](auto nt, int64_t t) {
        f32_tile<nt(), FOUR, CB, SIX, LUT, NARROW, ST, SG>(geo, w.implied_zero, rb, h, x, w.k, t, bias, nb, m, out, ldo,
                                                  w.codebook, w.narrow_base);
      });
    }
  }
}

}  // namespace


void qlinear_rows_q8_rowlane_avx2(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0,
                                  int64_t n1, float* out, int64_t ldo) {
  q8_rowlane<false>(x, w, bias, n0, n1, out, ldo);
}

void qlinear_rows_f32_rowlane_avx2(const float* x, int64_t T, const QWeightView& w, const float* bias, int64_t n0,
                                   int64_t n1, float* out, int64_t ldo) {
  check_rowlane_kind(w);
  with_scale_type(w.scale_type, [&](auto st) {
    with_group_kind(w, [&](auto four, auto cb, auto six, auto lut, auto narrow, auto sg) {
      f32_rows<four(), cb(), six(), lut(), narrow(), st(), sg()>(x, T, w, bias, n0, n1, out, ldo);
    });
  });
}

}  // namespace llmctl::kernels::detail
