// Row-wise CPU kernels over plain pointers (f32 activations). Each works on a range of rows so the
// caller can split rows across threads; per-row results never depend on the split.
#pragma once
#include <cstdint>

namespace llmctl::kernels {

// Rows [r0, r1) of x[R, H]: with residual, residual += x first and the norm reads residual.
// out[i] = w[i] * (x[i] * inv), inv = 1 / sqrt(float(ss / H) + eps), ss the sum of squares in double
// as 8 partial sums, partial l adding double(x[i]) * x[i] for i % 8 == l in order, added as
// ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)) (one chain of H dependent additions took 0.9 us
// at H = 576, on a decode step's serial path); the AVX2 variant gives the portable one's bits.
void rms_norm_rows(const float* x, const float* w, float eps, int64_t H, int64_t r0, int64_t r1, float* out,
                   float* residual);

// Rows [r0, r1) of qkv[R, (Hq + 2 Hkv) D], in place: each q head (the first Hq D values) and k
// head (the next Hkv D) becomes head / sqrt(mean(head^2) + eps) * w (q_w or k_w, [D]), as
// rms_norm_rows computes it; the v heads are untouched (Qwen3's q_norm / k_norm).
void head_rms_norm_rows(float* qkv, int64_t D, int64_t hq, int64_t hkv, const float* q_w, const float* k_w, float eps,
                        int64_t r0, int64_t r1);

// Rows [r0, r1) of gate_up[R, 2I] -> out[R, I] = silu(gate) * up.
void silu_mul_rows(const float* gate_up, int64_t I, int64_t r0, int64_t r1, float* out);
// The same for columns [c0, c1) of those rows only (threads sharing a decode step's wide row): each
// value is computed on its own, the same bits however rows and columns are split (likewise
// gelu_tanh_mul_cols).
void silu_mul_cols(const float* gate_up, int64_t I, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out);
// out[r, i] = gelu_tanh(gate_up[r, i]) * gate_up[r, I + i] for rows [r0, r1) (GeGLU). PyTorch's
// gelu(approximate="tanh") is 0.5 g (1 + tanh(a)), a = sqrt(2 / pi) (g + 0.044715 g^3); here, in f32,
// g / (1 + e^(-2a)): the same function without the cancellation in 1 + tanh(a) for a << 0, which
// leaves the tanh form in f32 only a few correct bits there (results ~1e-7 of g and below).
void gelu_tanh_mul_rows(const float* gate_up, int64_t I, int64_t r0, int64_t r1, float* out);
void gelu_tanh_mul_cols(const float* gate_up, int64_t I, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* out);

// Rotate-half RoPE (HF layout) on one head vector x[D] at `position`: pairs (i, i + D/2) rotated by
// angle = float(position) * inv_freq[i], computed in f32 like the reference implementation.
void rope_head(float* x, int64_t D, int32_t position, const float* inv_freq);
// The same on `heads` head vectors one after another (x[heads, D], one token's q or k heads): the
// angles' cosines and sines are computed once for all of them; each head's result is rope_head's.
// rotary_dim > 0 (partial rotary): only each head's first rotary_dim values turn, as pairs
// (i, i + rotary_dim / 2) with inv_freq[rotary_dim / 2]; the rest are left as they are. scale
// multiplies the cosines and sines (YaRN's and LongRoPE's attention factor).
void rope_heads(float* x, int64_t heads, int64_t D, int32_t position, const float* inv_freq, int64_t rotary_dim = 0,
                float scale = 1.0f);

}  // namespace llmctl::kernels
