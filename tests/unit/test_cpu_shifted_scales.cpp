// Factored scales stored times 2^s (QWeightView::out_shift): GGUF IQ2 / IQ3_XXS / IQ1 blocks whose
// block scale d is below 2^-11, as most of a real model's are, have sub-block scales d / 8 (d / 4)
// that no f16 D holds exactly; the CPU packer factors them times 2^s instead and the kernels multiply
// their results back. Checked: such a weight is packed factored and shifted; its dequantized rows are
// the canonical values bit for bit; its outputs (f32 and int8 activations, decode and prompt rows, a
// bias) are 2^-s times those of the same weight with every scale times 2^s (packed unshifted), bit
// for bit, and near a double reference.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_quantized_weight.h"
#include "engine/model/weights/load_weights.h"
#include "kernels/cpu/qlinear.h"
#include "quant/format/gguf_group_affine.h"
#include "quant/format/half_float.h"
#include "tests/unit/gguf_test_blocks.h"
#include "tests/unit/qlinear_test_util.h"
#include "tests/unit/skip.h"

using namespace llmctl;

namespace {

// Random blocks of `type` (d at byte 0) with every d a random half in [2^-16, 2^-11).
LinearWeight small_d_weight(uint32_t type, int64_t n, int64_t k, std::mt19937& rng) {
  const int64_t blocks = quant::gguf_group_affine_blocks(type, n, k);
  std::vector<uint8_t> b = qtest::random_blocks(type, blocks, rng);
  quant::GgmlBlockLayout l;
  REQUIRE(quant::ggml_block_layout(type, &l));
  std::uniform_real_distribution<float> e(-16.0f, -11.0f);
  for (int64_t i = 0; i < blocks; ++i) {
    const uint16_t h = quant::f32_to_half_bits(std::exp2(e(rng)));
    b[size_t(i) * l.type_size] = uint8_t(h), b[size_t(i) * l.type_size + 1] = uint8_t(h >> 8);
  }
  auto w = quant::group_affine_from_gguf(type, b.data(), b.size(), n, k, nullptr);
  REQUIRE(w.has_value());
  return pack_quantized_linear(std::move(*w), ShardSpec{});
}

// A copy of w whose scales and offsets are times 2^s.
LinearWeight times_pow2(const LinearWeight& w, int s) {
  LinearWeight o = w;
  for (Tensor* t : {&o.scales, &o.zeros}) {
    if (t->empty()) continue;
    REQUIRE(t->dtype == DType::F32);
    Tensor c = Tensor::empty_host(DType::F32, t->shape);
    for (int64_t i = 0; i < t->numel(); ++i) c.ptr<float>()[i] = std::ldexp(t->ptr<float>()[i], s);
    *t = c;
  }
  return o;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("cpu packing: IQ scales that are f16 subnormals are factored times 2^s, the same values and outputs") {
  if (kernels::qweight_preferred_layout(8, 32) != kernels::QLayout::RowLane16)
    LLMCTL_SKIP("no row-lane layout on this ISA");
  std::mt19937 rng(41);
  const int64_t N = 48, K = 512;
  for (uint32_t type : {16u, 17u, 18u, 19u}) {  // IQ2_XXS, IQ2_XS, IQ3_XXS, IQ1_S
    const std::string label = quant::ggml_type_label(type);
    CAPTURE(label);
    const LinearWeight c = small_d_weight(type, N, K, rng);
    REQUIRE(c.scales.dtype == DType::F32);
    const LinearWeight packed = pack_cpu_quantized(c);
    const kernels::QWeightView v = cpu_qweight_view(packed);
    REQUIRE(v.layout == kernels::QLayout::RowLane16);  // groups of 16 and 32 alike
    CHECK(v.scale_type == kernels::ScaleType::Factored);
    REQUIRE(v.out_shift > 0);
    const int s = v.out_shift;
    const LinearWeight ref_packed = pack_cpu_quantized(times_pow2(c, s));
    const kernels::QWeightView ref = cpu_qweight_view(ref_packed);
    CHECK(ref.scale_type == kernels::ScaleType::Factored);
    CHECK(ref.out_shift == 0);
    CHECK(packed.data.nbytes() == ref_packed.data.nbytes());

    // dequantized rows: scale x code + offset of the canonical form, bit for bit
    const int64_t G = K / c.group_size;
    std::vector<float> row(K), want(K);
    for (int64_t r : {int64_t(0), int64_t(17), N - 1}) {
      kernels::qweight_dequantize_row(v, r, row.data());
      for (int64_t i = 0; i < K; ++i) {
        const float sc = c.scales.ptr<float>()[r * G + i / c.group_size];
        const float of = c.zeros.empty() ? -0.0f : c.zeros.ptr<float>()[r * G + i / c.group_size];
        volatile float p = sc * float(int8_t(c.data.ptr<uint8_t>()[r * K + i]));
        want[size_t(i)] = p + of;
      }
      CHECK(same_bits(row, want));
    }

    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> bias(N);
    for (float& b : bias) b = nd(rng);
    for (int64_t T : {1, 3, 37}) {
      CAPTURE(T);
      std::vector<float> x(size_t(T * K));
      for (float& e : x) e = nd(rng);
      const qtest::ActBuf q(x.data(), T, K);
      for (bool int8 : {false, true}) {
        CAPTURE(int8);
        std::vector<float> out(size_t(T * N)), plain(size_t(T * N)), big(size_t(T * N));
        auto run = [&](const kernels::QWeightView& w, const float* b, std::vector<float>& o) {
          if (int8)
            kernels::qlinear_rows_q8(q.q, w, b, 0, N, o.data(), N);
          else
            kernels::qlinear_rows_f32(x.data(), T, w, b, 0, N, o.data(), N);
        };
        run(v, bias.data(), out);
        run(v, nullptr, plain);
        run(ref, nullptr, big);
        std::vector<float> want_plain(big.size()), want_bias(big.size());
        for (size_t i = 0; i < big.size(); ++i) {
          want_plain[i] = std::ldexp(big[i], -s);
          volatile float u = want_plain[i];
          want_bias[i] = u + bias[i % size_t(N)];
        }
        CHECK(same_bits(plain, want_plain));
        CHECK(same_bits(out, want_bias));
        // and near the double reference (the activations' int8 rounding for int8)
        double worst = 0.0, top = 0.0;
        for (int64_t t = 0; t < T; ++t)
          for (int64_t n = 0; n < N; ++n) {
            double acc = 0.0;
            for (int64_t i = 0; i < K; ++i) {
              const double a = int8 ? q.deq(t, i) : double(x[size_t(t * K + i)]);
              const int64_t g = n * G + i / c.group_size;
              const double of = c.zeros.empty() ? 0.0 : double(c.zeros.ptr<float>()[g]);
              acc += a * (double(c.scales.ptr<float>()[g]) * double(int8_t(c.data.ptr<uint8_t>()[n * K + i])) + of);
            }
            worst = std::max(worst, std::fabs(acc - double(plain[size_t(t * N + n)])));
            top = std::max(top, std::fabs(acc));
          }
        CHECK(top > 0.0);
        CHECK(worst <= 1e-5 * top);
      }
    }
  }
}
