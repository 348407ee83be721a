// AVX-VNNI (VEX vpdpbusd, with AVX2, FMA, F16C: Intel Alder Lake and later client CPUs, Zen 5) kernel
// of the row-lane layout's int8 mode: the AVX2 tile (qlinear_rowlane_avx2_tile.h) with VNNI = true,
// every code taken unsigned and corrected by base x the activations' sums. Its f32 mode is AVX2's.
#include <immintrin.h>

#include "kernels/cpu/qlinear_rowlane_avx2_tile.h"

namespace llmctl::kernels::detail {

void qlinear_rows_q8_rowlane_avxvnni(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0,
                                     int64_t n1, float* out, int64_t ldo) {
  KERNEL_CHECK(w.layout == QLayout::RowLane16 && (!w.codebook || (w.bits == 4 && w.narrow_base == kWideCodes)))
      << "rowlane kernel given another layout, or a codebook for 8-bit or narrow codes";
  with_scale_type(w.scale_type, [&](auto st) {
    with_group_kind(w, [&](auto four, auto lut, auto narrow, auto sg) {
      q8_rows<true, four(), lut(), narrow(), st(), sg()>(x, w, bias, n0, n1, out, ldo);
    });
  });
}

}  // namespace llmctl::kernels::detail
