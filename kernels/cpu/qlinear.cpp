// Packing, activation quantization and the run-time choice among the qlinear variants
// (qlinear_scalar.cpp, qlinear_avx2.cpp, qlinear_avx512.cpp).
#include "kernels/cpu/qlinear.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <string_view>

#if defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "kernels/cpu/linear.h"
#include "kernels/cpu/qlinear_impl.h"
#include "kernels/kernel_check.h"

namespace llmctl::kernels {

namespace detail {
namespace {
enum class Isa { Scalar, Avx2, AvxVnni, Avx512 };  // AvxVnni: Avx2 with the VNNI row-lane int8 kernel
bool has_avx512_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}
bool has_avx_vnni() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return cpu_has_avx2() && __builtin_cpu_supports("avxvnni");
#else
  return false;
#endif
}
bool has_amx_int8() {
#if defined(__x86_64__) && defined(__linux__)
  static const bool ok = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (!has_avx512_vnni() || !__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    if (!((d >> 24) & 1) || !((d >> 25) & 1)) return false;  // AMX-TILE, AMX-INT8
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));  // (OSXSAVE: AVX-512's check above needs it)
    if ((lo & (3u << 17)) != (3u << 17)) return false;          // the OS saves the tile state
    // Linux lends the tile data state to a process that asks (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA);
    // a machine or VM that does not grant it leaves AMX off.
    return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  }();
  return ok;
#else
  return false;
#endif
}
Isa best_isa() {
  if (has_avx512_vnni()) return Isa::Avx512;
  if (has_avx_vnni()) return Isa::AvxVnni;
  if (cpu_has_avx2()) return Isa::Avx2;  // with fma and f16c
  return Isa::Scalar;
}
// An AMD CPU (family_17h: Zen 1 / Zen 2 only), by CPUID.
bool amd_cpu(bool family_17h) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return family_17h ? __builtin_cpu_is("amdfam17h") : __builtin_cpu_is("amd");
#else
  (void)family_17h;
  return false;
#endif
}
// Whether the AVX2 decode tiles prefetch every kind of code (qlinear.h select_cpu_kernels' prefetch):
// AMD family 17h (Zen 1 / Zen 2), whose hardware prefetchers fall short of the memory's bandwidth on
// one stream a core (a Zen 2 EPYC VM: decode 1.1-1.5x with them, GGUF files of 4-bit, 6-bit, codebook codes);
// elsewhere wide 8-bit codes only (a Zen 4 EPYC VM, compute-bound there: 6-bit decode 1.12x without).
bool prefers_prefetch_all() { return amd_cpu(true); }
// Whether the AVX2 prompt tiles take IQ2 / IQ3_XXS-like codebooks as magnitudes (qlinear.h
// select_codebook_prefill): AMD CPUs, where vpsignb does not take a multiplier's pipe (Zen 2: a
// vpmaddubsw every 0.67 cycles, with or without a vpsignb beside it).
bool prefers_codebook_magnitudes() { return amd_cpu(false); }
Isa g_isa = best_isa();
bool g_prefetch_all = prefers_prefetch_all();
bool g_codebook_magnitudes = prefers_codebook_magnitudes();
bool g_amx = g_isa == Isa::Avx512 && has_amx_int8();  // the int8 row-lane prefill on AMX tiles
bool g_rows_layout = false;  // select_cpu_kernels(..., rows_layout)
}  // namespace

bool rows_layout_selected() { return g_rows_layout; }

void check_scale_layout(const QWeightView& w) {
  KERNEL_CHECK(w.scale_type != ScaleType::Factored || w.layout == QLayout::RowLane16 ||
               (w.scale_d && (!w.offset || w.offset_d)))
      << "Rows layout, factored scales: the f16 multipliers are missing";
  KERNEL_CHECK(!w.codebook || (w.layout == QLayout::RowLane16 && (w.bits == 4 || w.bits == 3)))
      << "a codebook is taken by the row-lane kernels of 4-bit (or 3-bit) codes only";
  KERNEL_CHECK(w.narrow_base == kWideCodes || (w.layout == QLayout::RowLane16 && !w.codebook))
      << "narrow codes are taken by the row-lane kernels only, without a codebook";
  KERNEL_CHECK(w.bits != 6 || (w.layout == QLayout::RowLane16 && w.narrow_base != kWideCodes))
      << "6-bit codes are taken by the row-lane kernels only, as narrow codes";
  KERNEL_CHECK(w.bits != 2 || (w.layout == QLayout::RowLane16 && w.narrow_base == kWideCodes && !w.codebook))
      << "2-bit codes are taken by the row-lane kernels only, as codes 0..3";
  KERNEL_CHECK(w.bits != 3 || w.layout == QLayout::RowLane16) << "3-bit codes are taken by the row-lane kernels only";
  KERNEL_CHECK(w.out_shift == 0 || (w.layout == QLayout::RowLane16 && w.out_shift > 0 && w.out_shift <= 64))
      << "scales stored times 2^" << w.out_shift << ": the row-lane layout's, a shift of 1..64";
}

void check_rowlane_kind(const QWeightView& w) {
  KERNEL_CHECK(w.layout == QLayout::RowLane16 &&
               (!w.codebook || ((w.bits == 4 || w.bits == 3) && w.narrow_base == kWideCodes)) &&
               (w.bits != 6 || w.narrow_base != kWideCodes) && (w.bits != 2 || w.narrow_base == kWideCodes))
      << "row-lane kernel given another layout, a codebook for 8-bit or narrow codes, 6-bit codes that are not "
         "narrow or 2-bit ones that are";
}

bool cpu_has_avx512_vnni() { return g_isa == Isa::Avx512; }
bool cpu_has_amx_int8() { return has_amx_int8(); }
bool amx_selected() { return g_amx; }
bool prefetch_all_codes() { return g_prefetch_all; }
bool codebook_magnitudes() { return g_codebook_magnitudes; }
bool cpu_has_avx_vnni() { return has_avx_vnni(); }

void qact_half_sums(const QActivations& x, int32_t* H) {
  for (int64_t i = 0; i < x.t * (x.k / 16); ++i) {
    int32_t s = 0;
    for (int j = 0; j < 16; ++j) s += x.q[i * 16 + j];
    H[i] = s;
  }
}

void qact_write_tiles(const QActivations& x, int64_t t0, int64_t t1, int rows, int8_t* q, float* scale, float* sum,
                      int32_t* half_sum, int16_t* q16, int32_t* wc) {
  KERNEL_CHECK(rows > 0 && 0 <= t0 && t0 <= t1 && t1 <= x.t) << "tiles of " << rows << " of tokens [" << t0 << ", "
                                                             << t1 << ") of " << x.t;
  KERNEL_CHECK(!(q16 || wc) || (rows == 4 && x.half_sum)) << "int16 tiles: tiles of 4, from the half-block sums";
  const int64_t K = x.k, blocks = K / 32, end = t1 == x.t ? (t1 + rows - 1) / rows * rows : t1;
  for (int64_t t = t0; t < end; ++t) {
    const int64_t tile = t / rows, j = t % rows;
    const bool pad = t >= x.t;
    for (int64_t b = 0; b < blocks; ++b) {
      if (q) {
        int8_t* qt = q + ((tile * blocks + b) * rows + j) * 32;
        pad ? void(std::memset(qt, 0, 32)) : void(std::memcpy(qt, x.q + t * K + b * 32, 32));
      }
      if (scale) scale[(tile * blocks + b) * rows + j] = pad ? 0.f : x.scale[t * blocks + b];
      if (!q16) continue;
      int16_t* a16 = q16 + ((tile * blocks + b) * 4 + j) * 32;
      int32_t& c = wc[(tile * blocks + b) * 4 + j];
      if (pad) {
        std::fill(a16, a16 + 32, int16_t(0)), c = 0;
        continue;
      }
#if defined(__SSE2__)
      // 16 codes at a time: sign-extended to int16 (SSE2, every x86-64), then each quad's middle swapped
      for (int i = 0; i < 32; i += 16) {
        const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.q + t * K + b * 32 + i));
        const __m128i sign = _mm_cmpgt_epi8(_mm_setzero_si128(), v);
        for (int h = 0; h < 2; ++h) {
          __m128i w = h ? _mm_unpackhi_epi8(v, sign) : _mm_unpacklo_epi8(v, sign);
          w = _mm_shufflehi_epi16(_mm_shufflelo_epi16(w, _MM_SHUFFLE(3, 1, 2, 0)), _MM_SHUFFLE(3, 1, 2, 0));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(a16 + i + 8 * h), w);
        }
      }
#else
      const int8_t* a = x.q + t * K + b * 32;
      for (int i = 0; i < 32; i += 4)
        a16[i] = a[i], a16[i + 1] = a[i + 2], a16[i + 2] = a[i + 1], a16[i + 3] = a[i + 3];
#endif
      c = -128 * (x.half_sum[t * 2 * blocks + 2 * b] + x.half_sum[t * 2 * blocks + 2 * b + 1]);
    }
    for (int64_t h = 0; h < 2 * blocks; ++h) {
      const int64_t at = (tile * 2 * blocks + h) * rows + j;
      if (sum) sum[at] = pad ? 0.f : x.sum[t * 2 * blocks + h];
      if (half_sum) half_sum[at] = pad ? 0 : x.half_sum[t * 2 * blocks + h];
    }
  }
}

const int32_t* qact_half_sums_of(const QActivations& x, std::vector<int32_t>& scratch) {
  if (x.half_sum) return x.half_sum;
  scratch.resize(size_t(x.t * (x.k / 16)));
  qact_half_sums(x, scratch.data());
  return scratch.data();
}

void qact_group_sums(const QActivations& x, int group, float* S) {
  const int64_t G = x.k / group, halves = x.k / 16, per = group / 16;
  for (int64_t t = 0; t < x.t; ++t) {
    const float* h = x.sum + t * halves;
    for (int64_t g = 0; g < G; ++g) {
      float s = 0;
      for (int64_t i = 0; i < per; ++i) s += h[g * per + i];
      S[t * G + g] = s;
    }
  }
}
}  // namespace detail

int64_t qweight_row_bytes(int bits, int64_t k) { return bits == 4 ? k / 2 : k; }

void qweight_pack(int bits, int64_t n, int64_t k, const uint8_t* codes, uint8_t* out) {
  if (bits == 8) {
    std::memcpy(out, codes, size_t(n * k));
    return;
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t b = 0; b < k / 32; ++b) {
      const uint8_t* c = codes + r * k + b * 32;
      uint8_t* o = out + r * (k / 2) + b * 16;
      for (int j = 0; j < 16; ++j) o[j] = uint8_t((c[j] & 0xF) | (c[j + 16] & 0xF) << 4);
    }
}

void qweight_unpack(int bits, int64_t n, int64_t k, const uint8_t* packed, uint8_t* codes) {
  if (bits == 8) {
    std::memcpy(codes, packed, size_t(n * k));
    return;
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t b = 0; b < k / 32; ++b) {
      const uint8_t* p = packed + r * (k / 2) + b * 16;
      uint8_t* c = codes + r * k + b * 32;
      for (int j = 0; j < 16; ++j) {
        c[j] = p[j] & 0xF;
        c[j + 16] = p[j] >> 4;
      }
    }
}

namespace {
size_t round64(size_t b) { return (b + 63) / 64 * 64; }

// The buffer: q, scale, sum, half_sum [T rows each], then (16 tokens or more: tiles of 16 where AMX
// runs; 4 or more: of 4 where the AVX-512 or AVX2 tiles run; room for either whatever runs, so that
// the size does not depend on the kernels chosen) tile_q, tile_scale, tile_sum or tile_half_sum,
// and where asked (widened) tile_q16, tile_wc [(T + 3) / 4 x 4 rows each].
size_t qactivation_rows_bytes(int64_t T, int64_t K) {
  return round64(size_t(T * K)) + round64(size_t(T * K / 32) * 4) + 2 * round64(size_t(T * K / 16) * 4);
}
int64_t tile_room_rows(int64_t T) { return T >= 4 ? (T + 3) / 4 * 4 : 0; }
size_t qactivation_tile_bytes(int64_t T, int64_t K, bool widened) {
  const int64_t R = tile_room_rows(T);
  return round64(size_t(R * K)) + round64(size_t(R * K / 32) * 4) + round64(size_t(R * K / 16) * 4) +
         (widened ? round64(size_t(R * K) * 2) + round64(size_t(R * K / 32) * 4) : 0);
}
// The tile height the chosen kernels read: 16 (AMX), 4 (the AVX-512 and AVX2 prefill tiles; AVX-512's
// too where AMX runs but the prompt is under a tile of 16) or none.
int act_tile_rows(int64_t T) {
  if (detail::g_amx && T >= 16) return 16;
  const bool avx = detail::g_isa == detail::Isa::Avx512 || detail::g_isa == detail::Isa::Avx2 ||
                   detail::g_isa == detail::Isa::AvxVnni;
  return avx && T >= kActTileMinRows ? 4 : 0;
}
}  // namespace

size_t qactivation_bytes(int64_t T, int64_t K, bool widened) {
  return qactivation_rows_bytes(T, K) + qactivation_tile_bytes(T, K, widened);
}

namespace detail {
void quantize_act_blocks_scalar(const float* x, int64_t b0, int64_t b1, int8_t* q, float* scale, float* sum,
                                int32_t* half_sum) {
  // Round to nearest even by adding and subtracting 1.5 * 2^23 (|v| <= 127): no libm call, and the
  // loops vectorize.
  constexpr float kRound = 12582912.0f;
  for (int64_t b = b0; b < b1; ++b) {
    const float* xb = x + b * 32;
    float amax = 0;
    for (int i = 0; i < 32; ++i) {
      const float a = std::fabs(xb[i]);
      amax = a > amax ? a : amax;
    }
    const float d = amax / 127.0f, id = amax > 0 ? 127.0f / amax : 0.0f;
    int8_t* qb = q + b * 32;
    int32_t qi[32];
    for (int i = 0; i < 32; ++i) {
      float v = (xb[i] * id + kRound) - kRound;
      v = v > 127.f ? 127.f : v < -127.f ? -127.f : v;
      qi[i] = int32_t(v);
      qb[i] = int8_t(qi[i]);
    }
    for (int h = 0; h < 2; ++h) {
      int32_t s = 0;
      for (int i = h * 16; i < h * 16 + 16; ++i) s += qi[i];
      sum[b * 2 + h] = d * float(s);
      half_sum[b * 2 + h] = s;
    }
    scale[b] = d;
  }
}
}  // namespace detail

namespace {
// The rows' part of quantize_activation_rows' buffer (codes, scales, sums, integer half-block sums),
// blocks [b0, b1) of x's T K / 32 written; their view.
QActivations quantize_row_blocks(const float* x, int64_t T, int64_t K, int64_t b0, int64_t b1, void* buf) {
  auto* base = static_cast<uint8_t*>(buf);
  auto* q = reinterpret_cast<int8_t*>(base);
  auto* scale = reinterpret_cast<float*>(base + round64(size_t(T * K)));
  auto* sum = reinterpret_cast<float*>(base + round64(size_t(T * K)) + round64(size_t(T * K / 32) * 4));
  auto* half_sum = reinterpret_cast<int32_t*>(reinterpret_cast<uint8_t*>(sum) + round64(size_t(T * K / 16) * 4));
  if (cpu_has_avx2())
    detail::quantize_act_blocks_avx2(x, b0, b1, q, scale, sum, half_sum);
  else
    detail::quantize_act_blocks_scalar(x, b0, b1, q, scale, sum, half_sum);
  return QActivations{T, K, q, scale, sum, half_sum};
}
}  // namespace

QActivations quantize_activation_blocks(const float* x, int64_t T, int64_t K, int64_t b0, int64_t b1, void* buf) {
  KERNEL_CHECK(act_tile_rows(T) == 0 && 0 <= b0 && b0 <= b1 && b1 <= T * K / 32)
      << "quantize_activation_blocks [" << b0 << ", " << b1 << ") of " << T << " x " << K / 32 << " blocks";
  return quantize_row_blocks(x, T, K, b0, b1, buf);
}

QActivations quantize_activation_rows(const float* x, int64_t T, int64_t K, int64_t t0, int64_t t1, void* buf,
                                      bool widened) {
  auto* base = static_cast<uint8_t*>(buf);
  // blocks never straddle rows: K % 32 == 0
  QActivations view = quantize_row_blocks(x, T, K, t0 * K / 32, t1 * K / 32, buf);
  if (const int rows = act_tile_rows(T)) {  // the prefill kernels' tiles, from the rows just written
    const int64_t R = tile_room_rows(T);
    uint8_t* tiles = base + qactivation_rows_bytes(T, K);
    auto* tq = reinterpret_cast<int8_t*>(tiles);
    auto* ts = reinterpret_cast<float*>(tiles + round64(size_t(R * K)));
    uint8_t* sums = tiles + round64(size_t(R * K)) + round64(size_t(R * K / 32) * 4);
    float* tsum = rows == 16 ? reinterpret_cast<float*>(sums) : nullptr;
    int32_t* thalf = rows == 16 ? nullptr : reinterpret_cast<int32_t*>(sums);
    view.tile_rows = rows, view.tile_q = tq, view.tile_scale = ts, view.tile_sum = tsum, view.tile_half_sum = thalf;
    int16_t* q16 = nullptr;
    int32_t* wc = nullptr;
    if (widened && rows == 4) {
      uint8_t* wide = sums + round64(size_t(R * K / 16) * 4);
      q16 = reinterpret_cast<int16_t*>(wide);
      wc = reinterpret_cast<int32_t*>(wide + round64(size_t(R * K) * 2));
      view.tile_q16 = q16, view.tile_wc = wc;
    }
    const int64_t whole = rows == 16 ? T / 16 * 16 : T;  // AMX: whole tiles only
    if (t0 < std::min(t1, whole))
      detail::qact_write_tiles(view, t0, std::min(t1, whole), rows, tq, ts, tsum, thalf, q16, wc);
  }
  return view;
}

QActivations qactivation_rows(const QActivations& x, int64_t t0, int64_t t1) {
  KERNEL_CHECK(0 <= t0 && t0 <= t1 && t1 <= x.t) << "qactivation_rows [" << t0 << ", " << t1 << ") of " << x.t;
  const int64_t K = x.k;  // per row: K codes, K / 32 scales, K / 16 sums and integer sums
  QActivations v{t1 - t0, K, x.q + t0 * K, x.scale + t0 * K / 32, x.sum + t0 * K / 16,
                 x.half_sum ? x.half_sum + t0 * K / 16 : nullptr};
  const int rows = x.tile_rows;
  // x's tiles from tile t0 / rows (tiles of 4 are padded: the view's last one must be x's last, or whole)
  if (rows && t0 % rows == 0 && (rows == 16 || t1 == x.t || (t1 - t0) % rows == 0)) {
    v.tile_rows = rows, v.tile_q = x.tile_q + t0 * K, v.tile_scale = x.tile_scale + t0 * K / 32;
    v.tile_sum = x.tile_sum ? x.tile_sum + t0 * K / 16 : nullptr;
    v.tile_half_sum = x.tile_half_sum ? x.tile_half_sum + t0 * K / 16 : nullptr;
    v.tile_q16 = x.tile_q16 ? x.tile_q16 + t0 * K : nullptr;
    v.tile_wc = x.tile_wc ? x.tile_wc + t0 * K / 32 : nullptr;
  }
  return v;
}

QActivations quantize_activations(const float* x, int64_t T, int64_t K, void* buf) {
  return quantize_activation_rows(x, T, K, 0, T, buf);
}

namespace {

// A weight whose scales (and offsets) are stored times 2^out_shift (QWeightView::out_shift): its
// kernel's rows [n0, n1) of T tokens, computed without the bias, times 2^-out_shift (exact: a power
// of two), then the bias added: the sums a weight of the unshifted scales gives, bit for bit.
void unshift_rows(const QWeightView& w, int64_t T, const float* bias, int64_t n0, int64_t n1, float* out,
                  int64_t ldo) {
  const float back = std::ldexp(1.0f, -w.out_shift);
  for (int64_t t = 0; t < T; ++t) {  // two loops, each vectorized (a branch per element was 1% of a prompt)
    float* o = out + t * ldo;
    if (bias)
      for (int64_t n = n0; n < n1; ++n) o[n] = o[n] * back + bias[n];
    else
      for (int64_t n = n0; n < n1; ++n) o[n] *= back;
  }
}

void rows_f32(const float* x, int64_t T, const QWeightView& w, const float* bias, int64_t n0, int64_t n1, float* out,
              int64_t ldo) {
  switch (detail::g_isa) {
    case detail::Isa::Avx512: return detail::qlinear_rows_f32_avx512(x, T, w, bias, n0, n1, out, ldo);
    case detail::Isa::Avx2:
    case detail::Isa::AvxVnni: return detail::qlinear_rows_f32_avx2(x, T, w, bias, n0, n1, out, ldo);
    case detail::Isa::Scalar: return detail::qlinear_rows_f32_scalar(x, T, w, bias, n0, n1, out, ldo);
  }
}

void rows_q8(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0, int64_t n1, float* out,
             int64_t ldo) {
  switch (detail::g_isa) {
    case detail::Isa::Avx512:
      if (detail::g_amx && w.layout == QLayout::RowLane16 && x.t >= 16)  // a whole tile of 16 tokens
        return detail::qlinear_rows_q8_rowlane_amx(x, w, bias, n0, n1, out, ldo);
      return detail::qlinear_rows_q8_avx512(x, w, bias, n0, n1, out, ldo);
    case detail::Isa::Avx2: return detail::qlinear_rows_q8_avx2(x, w, bias, n0, n1, out, ldo);
    case detail::Isa::AvxVnni:
      if (w.layout == QLayout::RowLane16) return detail::qlinear_rows_q8_rowlane_avxvnni(x, w, bias, n0, n1, out, ldo);
      return detail::qlinear_rows_q8_avx2(x, w, bias, n0, n1, out, ldo);
    case detail::Isa::Scalar: return detail::qlinear_rows_q8_scalar(x, w, bias, n0, n1, out, ldo);
  }
}

}  // namespace

void qlinear_rows_f32(const float* x, int64_t T, const QWeightView& w, const float* bias, int64_t n0, int64_t n1,
                      float* out, int64_t ldo) {
  detail::check_scale_layout(w);
  if (w.out_shift == 0) return rows_f32(x, T, w, bias, n0, n1, out, ldo);
  rows_f32(x, T, w, nullptr, n0, n1, out, ldo);
  unshift_rows(w, T, bias, n0, n1, out, ldo);
}

void qlinear_rows_q8(const QActivations& x, const QWeightView& w, const float* bias, int64_t n0, int64_t n1,
                     float* out, int64_t ldo) {
  detail::check_scale_layout(w);
  if (w.out_shift == 0) return rows_q8(x, w, bias, n0, n1, out, ldo);
  rows_q8(x, w, nullptr, n0, n1, out, ldo);
  unshift_rows(w, x.t, bias, n0, n1, out, ldo);
}

void qweight_dequantize_row(const QWeightView& w, int64_t row, float* out) {
  KERNEL_CHECK(row >= 0 && row < w.n) << "dequantize row " << row << " of " << w.n;
  detail::check_scale_layout(w);
  if (w.layout == QLayout::RowLane16) {
    detail::dequantize_row_rowlane(w, row, out);
    if (w.out_shift != 0) unshift_rows(w, 1, nullptr, 0, w.k, out, w.k);  // scale x code + offset, times 2^-s
    return;
  }
  detail::dequantize_row_rows(w, row, out);
}

void select_cpu_kernels(std::string_view isa, bool rows_layout, std::string_view prefetch) {
  if (prefetch != "auto" && prefetch != "all" && prefetch != "wide")
    KERNEL_FAIL() << "unknown CPU weight prefetch '" << std::string(prefetch) << "' (auto, all or wide)";
  using detail::Isa;
  Isa want = detail::best_isa();
  bool amx = want == Isa::Avx512 && detail::has_amx_int8();
  if (isa == "amx") {
    if (!detail::has_amx_int8())
      KERNEL_FAIL() << "--cpu-isa amx: this CPU (or its OS) offers no AMX-INT8 tiles beside AVX-512 VNNI";
    want = Isa::Avx512;
  } else if (isa == "avx512-vnni") {
    if (!detail::has_avx512_vnni()) KERNEL_FAIL() << "--cpu-isa avx512-vnni: this CPU lacks AVX-512 VNNI";
    want = Isa::Avx512;
  } else if (isa == "avx-vnni") {
    if (!detail::has_avx_vnni()) KERNEL_FAIL() << "--cpu-isa avx-vnni: this CPU lacks AVX-VNNI with AVX2, FMA and F16C";
    want = Isa::AvxVnni;
  } else if (isa == "avx2") {
    if (!cpu_has_avx2()) KERNEL_FAIL() << "--cpu-isa avx2: this CPU lacks AVX2 with FMA and F16C";
    want = Isa::Avx2;
  } else if (isa == "scalar") {
    want = Isa::Scalar;
  } else if (isa != "auto") {
    KERNEL_FAIL() << "unknown CPU kernel ISA '" << std::string(isa)
                  << "' (auto, amx, avx512-vnni, avx-vnni, avx2 or scalar)";
  }
  if (isa != "auto" && isa != "amx") amx = false;
  detail::g_isa = want;
  detail::g_amx = amx;
  detail::g_rows_layout = rows_layout;
  detail::g_prefetch_all = prefetch == "auto" ? detail::prefers_prefetch_all() : prefetch == "all";
}

void select_codebook_prefill(std::string_view choice) {
  if (choice != "auto" && choice != "magnitude" && choice != "narrow")
    KERNEL_FAIL() << "unknown codebook prefill '" << std::string(choice) << "' (auto, magnitude or narrow)";
  detail::g_codebook_magnitudes = choice == "auto" ? detail::prefers_codebook_magnitudes() : choice == "magnitude";
}

bool qlinear_widens_activations(const QWeightView& w) {
  // qlinear_rowlane_avx2_tile.h's widened_tile: no VNNI, a unit a group, a codebook (one too wide to be
  // taken as narrow codes: detail::codebook_narrow_step) or wide 8-bit codes
  return detail::g_isa == detail::Isa::Avx2 && w.layout == QLayout::RowLane16 && w.group % 32 == 0 &&
         (w.codebook != nullptr ? detail::codebook_narrow_step(w.codebook) == 0
                                : w.bits == 8 && w.narrow_base == kWideCodes);
}

const char* qlinear_isa() {
  switch (detail::g_isa) {
    case detail::Isa::Avx512: return "avx512-vnni";
    case detail::Isa::Avx2: return "avx2";
    case detail::Isa::AvxVnni: return "avx-vnni";
    case detail::Isa::Scalar: return "scalar";
  }
  return "scalar";
}

bool qweight_three_bit_ok() { return detail::g_isa == detail::Isa::Avx2 || detail::g_isa == detail::Isa::AvxVnni; }

bool qlinear_amx() { return detail::g_amx; }
const char* qlinear_prefetch() { return detail::g_prefetch_all ? "all" : "wide"; }
const char* qlinear_codebook_prefill() { return detail::g_codebook_magnitudes ? "magnitude" : "narrow"; }

bool qlinear_read_bound() { return detail::g_isa == detail::Isa::Avx512; }

}  // namespace llmctl::kernels
