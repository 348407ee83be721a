// AVX2 variant of factor_values for a run of kFactoredGroups (8) values, one vector: each candidate
// D checked on the eight at once with the scalar's operations (v times 1 / D, rounded by adding and
// subtracting 1.5 x 2^23, truncated to int32, D times its float compared bit for bit), so it finds
// the scalar's D and m, or none. A model's load factors a few million runs.
#include <immintrin.h>

#include "kernels/cpu/qlinear_impl.h"
#include "kernels/cpu/qweight_factored_impl.h"

namespace llmctl::kernels::detail {

static_assert(kFactoredGroups == 8, "one AVX2 vector a run");

bool factor_values8_avx2(const float* v, uint16_t* d, int8_t* m, uint16_t hint) {
  const __m256 x = _mm256_loadu_ps(v);
  return factor_search(v, 8, d, m, hint, [&](float D) {
    uint16_t h;
    if (!f16_candidate(D, &h)) return false;
    const __m256 q = _mm256_mul_ps(x, _mm256_set1_ps(1.0f / D));
    const __m256 in = _mm256_and_ps(_mm256_cmp_ps(q, _mm256_set1_ps(-128.5f), _CMP_GE_OQ),
                                    _mm256_cmp_ps(q, _mm256_set1_ps(127.5f), _CMP_LE_OQ));  // false for NaN
    if (_mm256_movemask_ps(in) != 0xFF) return false;
    const __m256 round = _mm256_set1_ps(kFactorRound);
    const __m256i c = _mm256_cvttps_epi32(_mm256_sub_ps(_mm256_add_ps(q, round), round));
    const __m256i out = _mm256_or_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(-128), c),
                                        _mm256_cmpgt_epi32(c, _mm256_set1_epi32(127)));
    const __m256 back = _mm256_mul_ps(_mm256_set1_ps(D), _mm256_cvtepi32_ps(c));
    const __m256i same = _mm256_cmpeq_epi32(_mm256_castps_si256(back), _mm256_castps_si256(x));
    if (!_mm256_testz_si256(out, out) || _mm256_movemask_ps(_mm256_castsi256_ps(same)) != 0xFF) return false;
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(m), _mm_packs_epi16(w, w));
    *d = h;
    return true;
  });
}

}  // namespace llmctl::kernels::detail
