// Portable variant of the qlinear kernels, the reference order the others are tested against.
//   f32 mode: w = scale * code + offset per input, 16 partial sums over the row, combined pairwise.
//   int8 mode: per block of 32 an exact integer dot product (two of 16 when group == 16), scaled
//   by scale * activation scale and summed in order; then the offsets' term sum_g offset[g] * S[g]
//   (qact_group_sums), added last.
#include <cstdint>
#include <vector>

#include "kernels/cpu/qlinear_impl.h"
#include "kernels/kernel_check.h"

namespace llmctl::kernels::detail {

namespace {
// Code j of a packed row (0..15 for 4 bits, -128..127 for 8).
inline int code_at(const QWeightView& w, const uint8_t* row, int64_t j) {
  if (w.bits == 8) return int(int8_t(row[j]));
  const uint8_t b = row[(j / 32) * 16 + (j % 16)];
  return (j % 32) < 16 ? (b & 0xF) : (b >> 4);
}
}  // namespace

void dequantize_row_rows(const QWeightView& w, int64_t n, float* out) {
  const int64_t K = w.k, G = K / w.group;
  const uint8_t* row = w.packed + n * qweight_row_bytes(w.bits, K);
  for (int64_t k = 0; k < K; ++k) {
    const int64_t g = n * G + k / w.group;
    const float prod = rows_scale(w, g) * float(code_at(w, row, k));
    out[k] = prod + rows_offset(w, g);
  }
}

void qlinear_rows_f32_scalar(const float* x, int64_t T, const QWeightView& w, const float* bias, int64_t n0,
                             int64_t n1, float* out, int64_t ldo) {
  if (w.layout == QLayout::RowLane16) return qlinear_rows_f32_rowlane_scalar(x, T, w, bias, n0, n1, out, ldo);
  KERNEL_CHECK(!w.codebook && w.narrow_base == kWideCodes) << "Rows layout given a codebook or narrow codes";
  const int64_t K = w.k, G = K / w.group, rb = qweight_row_bytes(w.bits, K);
  std::vector<float> wrow(static_cast<size_t>(K));
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w.packed + n * rb;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = n * G + k / w.group;
      wrow[size_t(k)] = rows_scale(w, g) * float(code_at(w, row, k)) + rows_offset(w, g);
    }
    for (int64_t t = 0; t < T; ++t) {
      const float* xr = x + t * K;
      float acc[16] = {};
      for (int64_t i = 0; i < K; i += 16)
        for (int l = 0; l < 16; ++l) acc[l] += xr[i + l] * wrow[size_t(i + l)];
      for (int l = 0; l < 8; ++l) acc[l] += acc[l + 8];
      for (int l = 0; l < 4; ++l) acc[l] += acc[l + 4];
      const float s = (acc[0] + acc[2]) + (acc[1] + acc[3]);
      out[t * ldo + n] = bias ? s + bias[n] : s;
    }
  }
}

void qlinear_rows_q8_scalar(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0, int64_t n1,
                            float* out, int64_t ldo) {
  if (w.layout == QLayout::RowLane16) return qlinear_rows_q8_rowlane_scalar(x, w, bias, n0, n1, out, ldo);
  KERNEL_CHECK(!w.codebook && w.narrow_base == kWideCodes) << "Rows layout given a codebook or narrow codes";
  const int64_t K = w.k, G = K / w.group, rb = qweight_row_bytes(w.bits, K), blocks = K / 32;
  std::vector<float> S(static_cast<size_t>(x.t * G));
  qact_group_sums(x, w.group, S.data());
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w.packed + n * rb;
    for (int64_t t = 0; t < x.t; ++t) {
      const int8_t* q = x.q + t * K;
      float acc = 0;
      for (int64_t b = 0; b < blocks; ++b) {
        int32_t half[2] = {0, 0};
        for (int i = 0; i < 32; ++i) half[i / 16] += code_at(w, row, b * 32 + i) * int32_t(q[b * 32 + i]);
        const float d = x.scale[t * blocks + b];
        if (w.group == 16) {
          acc += rows_scale(w, n * G + 2 * b) * d * float(half[0]);
          acc += rows_scale(w, n * G + 2 * b + 1) * d * float(half[1]);
        } else {
          acc += rows_scale(w, n * G + b * 32 / w.group) * d * float(half[0] + half[1]);
        }
      }
      float off = 0;
      if (w.offset)  // none stored: every offset -0, whose terms leave off at +0
        for (int64_t g = 0; g < G; ++g) off += rows_offset(w, n * G + g) * S[size_t(t * G + g)];
      const float s = acc + off;
      out[t * ldo + n] = bias ? s + bias[n] : s;
    }
  }
}

}  // namespace llmctl::kernels::detail
