#include "kernels/cpu/kv_quant.h"

#include <algorithm>
#include <cmath>

#include "kernels/fp8_e4m3.h"

namespace llmctl::kernels {

void quantize_kv_row_int8(const float* x, int64_t D, int8_t* q, float* scale_zero) {
  float lo = x[0], hi = x[0];
  for (int64_t d = 1; d < D; ++d) lo = std::min(lo, x[d]), hi = std::max(hi, x[d]);
  const float scale = (hi - lo) / 255.0f;
  const float inv = scale > 0 ? 1.0f / scale : 0.0f;  // a constant row: every code -128, exact
  for (int64_t d = 0; d < D; ++d) {
    const float c = std::nearbyint((x[d] - lo) * inv);  // ties to even (default rounding mode)
    q[d] = int8_t(int(std::clamp(c, 0.0f, 255.0f)) - 128);
  }
  scale_zero[0] = scale;
  scale_zero[1] = lo;
}

void quantize_kv_row_fp8(const float* x, int64_t D, float scale, uint8_t* q) {
  const float inv = 1.0f / scale;
  for (int64_t d = 0; d < D; ++d) q[d] = f32_to_fp8_e4m3(x[d] * inv);
}

void dequantize_kv_row_int8(const int8_t* q, int64_t D, const float* scale_zero, float* out) {
  const float s = scale_zero[0], z = scale_zero[1];
  for (int64_t d = 0; d < D; ++d) out[d] = float(int(q[d]) + 128) * s + z;
}

namespace {
// Every code's value: a table lookup instead of the bit decode in the attention's inner loop.
struct Fp8Table {
  float v[256];
  Fp8Table() {
    for (int c = 0; c < 256; ++c) v[c] = fp8_e4m3_to_f32(uint8_t(c));
  }
};
const Fp8Table kFp8;
}  // namespace

void dequantize_kv_row_fp8(const uint8_t* q, int64_t D, float scale, float* out) {
  for (int64_t d = 0; d < D; ++d) out[d] = kFp8.v[q[d]] * scale;
}

void dequantize_kv_positions(const PagedKvQuantView& c, const int32_t* block_table, int32_t j0, int32_t j1,
                             float* k_out, float* v_out) {
  const int64_t D = c.head_dim, B = c.block_size, H = c.num_kv_heads;
  for (int32_t j = j0; j < j1; ++j) {
    const int64_t slot = int64_t(block_table[j / B]) * B + j % B;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t at = slot * H + h, dst = (int64_t(j) * H + h) * D;
      if (c.kind == KvQuant::Int8) {
        dequantize_kv_row_int8(static_cast<const int8_t*>(c.k) + at * D, D, c.k_scale + at * 2, k_out + dst);
        dequantize_kv_row_int8(static_cast<const int8_t*>(c.v) + at * D, D, c.v_scale + at * 2, v_out + dst);
      } else {
        dequantize_kv_row_fp8(static_cast<const uint8_t*>(c.k) + at * D, D, c.k_scale[h], k_out + dst);
        dequantize_kv_row_fp8(static_cast<const uint8_t*>(c.v) + at * D, D, c.v_scale[h], v_out + dst);
      }
    }
  }
}

}  // namespace llmctl::kernels
