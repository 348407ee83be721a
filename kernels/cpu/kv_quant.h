// Quantized paged KV cache on the CPU: rows quantized as they are written, dequantized as
// attention reads them. Two layouts (engine/kv/kv_cache_spec.h says how the engine sizes them):
//   Int8: int8 codes with a scale and a zero point per token and kv head (dynamic, asymmetric:
//         x ~= (q + 128) * scale + zero, zero = the row's min, scale = (max - min) / 255);
//   Fp8:  fp8 e4m3 codes with one fixed scale per kv head (x ~= e4m3(q) * scale, calibrated
//         k_scale / v_scale; kernels/fp8_e4m3.h).
#pragma once
#include <cstdint>

namespace llmctl::kernels {

enum class KvQuant { Int8, Fp8 };

// One head row of D values -> codes; Int8 writes scale_zero[0..1] = (scale, zero).
void quantize_kv_row_int8(const float* x, int64_t D, int8_t* q, float* scale_zero);
// Fp8 with a fixed scale (> 0): q[d] = e4m3(x[d] / scale), saturating at +-448.
void quantize_kv_row_fp8(const float* x, int64_t D, float scale, uint8_t* q);
// The inverse of each: out[D] f32.
void dequantize_kv_row_int8(const int8_t* q, int64_t D, const float* scale_zero, float* out);
void dequantize_kv_row_fp8(const uint8_t* q, int64_t D, float scale, float* out);

struct PagedKvQuantView {
  KvQuant kind;
  const void* k;  // [NB, B, Hkv, D] codes (int8 or e4m3)
  const void* v;
  // Int8: [NB, B, Hkv, 2] (scale, zero) per token and head. Fp8: [Hkv] scales.
  const float* k_scale;
  const float* v_scale;
  int64_t block_size, num_kv_heads, head_dim;
  // Key j of an attention kernel's call is the sequence's key first_key + j (attention.h: the kernels
  // set it for a sliding window; callers leave it 0). dequantize_kv_positions does not read it.
  int32_t first_key = 0;
};

// The keys and values of one sequence's positions [j0, j1), read through its block table, as f32:
// k_out / v_out [position, Hkv, D] (row j at offset j * Hkv * D). Where attention does not read a
// quantized cache in place (kernels/cpu/attention.h: paged_attention_head_quant), it dequantizes a
// sequence's context once per step with this, then runs the f32 kernel over it; both give the
// same results.
void dequantize_kv_positions(const PagedKvQuantView& cache, const int32_t* block_table, int32_t j0, int32_t j1,
                             float* k_out, float* v_out);

}  // namespace llmctl::kernels
