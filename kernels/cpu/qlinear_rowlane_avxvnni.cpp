// AVX-VNNI (VEX vpdpbusd, with AVX2, FMA, F16C: Intel Alder Lake and later client CPUs, Zen 5) kernel
// of the row-lane layout's int8 mode: the AVX2 tile (qlinear_rowlane_avx2_tile.h) with VNNI = true,
// every code taken unsigned and corrected by base x the activations' sums. Its f32 mode is AVX2's.
#include <immintrin.h>

#include "kernels/cpu/qlinear_rowlane_avx2_tile.h"

namespace llmctl::kernels::detail {

void qlinear_rows_q8_rowlane_avxvnni(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0,
                                     int64_t n1, float* out, int64_t ldo) {
  q8_rowlane<true>(x, w, bias, n0, n1, out, ldo);
}

}  // namespace llmctl::kernels::detail
