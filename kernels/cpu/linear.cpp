#include "kernels/cpu/linear.h"

#include <cstring>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "kernels/cpu/linear_impl.h"

namespace llmctl::kernels {

namespace {
bool detect_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  // F16C through CPUID: clang (16 here) does not know __builtin_cpu_supports("f16c").
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C);
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c;
#else
  return false;
#endif
}
const bool g_avx2 = cpu_has_avx2();
}  // namespace

// A function-local static: other files' static initializers (qlinear.cpp's) may ask first.
bool cpu_has_avx2() {
  static const bool has = detect_avx2();
  return has;
}

void linear_rows(const float* x, int64_t T, int64_t K, const void* w, WeightType wt, const float* bias, int64_t n0,
                 int64_t n1, float* out, int64_t ldo) {
  if (g_avx2)
    detail::linear_rows_avx2(x, T, K, w, wt, bias, n0, n1, out, ldo);
  else
    detail::linear_rows_scalar(x, T, K, w, wt, bias, n0, n1, out, ldo);
}

float dot_f32(const float* a, const float* b, int64_t n) {
  return g_avx2 ? detail::dot_f32_avx2(a, b, n) : detail::dot_f32_scalar(a, b, n);
}

}  // namespace llmctl::kernels
