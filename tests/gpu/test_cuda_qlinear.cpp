// The CUDA group-affine quantized linear (kernels/cuda/qlinear.cu through CudaBackend's
// upload_quantized / linear_quantized) against the CPU reference kernel (kernels/cpu/qlinear.h,
// f32 activations: exact up to summation order) on random codes, scales, offsets and activations:
// 4 and 8 bits, groups 16/32/64/128, f16 and f32 scales, with and without offsets, K not a multiple
// of 256 (96, 576, 1536), odd N, T from 1 to 128, bf16/f16 activations through the backend and f32
// through the kernel; act-order weights (input_perm: x's columns gathered first); then batch
// invariance (a row's bits do not depend on T or its neighbours); a mixture's grouped linears
// (qlinear_grouped) against each item alone.
#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>

#include "gpu_test_util.h"
#include "kernels/cpu/qlinear.h"
#include "kernels/cuda/qlinear.cuh"
#include "kernels/cuda/qlinear_tuner.h"
#include "kernels/kernel_check.h"

using namespace llmctl;
using namespace llmctl::gpu_test;

namespace {

struct QCase {
  int bits, group;
  int64_t N, K;
  DType scale_dt;
  bool offsets;
};

std::string case_name(const QCase& c, int64_t T) {
  return "int" + std::to_string(c.bits) + " g" + std::to_string(c.group) + " N=" + std::to_string(c.N) +
         " K=" + std::to_string(c.K) + " T=" + std::to_string(T) + " scales " + dtype_name(c.scale_dt) +
         (c.offsets ? " +offsets" : "");
}

// Canonical weight (backend.h, upload_quantized): codes one per byte, scales and offsets rounded to
// their dtype. offsets_f holds the offsets as floats (zeros when the weight has none, for the CPU view).
struct QWeight {
  LinearWeight canonical;
  std::vector<float> offsets_f;
};

QWeight random_qweight(const QCase& c, std::mt19937& rng) {
  QWeight q;
  LinearWeight& w = q.canonical;
  w.format = c.bits == 4 ? WeightFormat::Int4Group : WeightFormat::Int8Group;
  w.n = c.N;
  w.k = c.K;
  w.group_size = c.group;
  w.data = Tensor::empty_host(DType::U8, {c.N, c.K});
  std::uniform_int_distribution<int> code(c.bits == 4 ? 0 : -128, c.bits == 4 ? 15 : 127);
  for (int64_t i = 0; i < c.N * c.K; ++i) w.data.ptr<uint8_t>()[i] = uint8_t(code(rng));
  const int64_t G = c.K / c.group;
  // Scales sized so that outputs stay O(1): |code| up to 15 (4 bits) or 128 (8 bits).
  const float smax = c.bits == 4 ? 0.02f : 0.003f;
  w.scales = random_host(c.scale_dt, {c.N, G}, rng, smax / 4, smax).t;
  HostData off = random_host(c.scale_dt, {c.N, G}, rng, -0.1f, 0.1f);
  if (c.offsets) {
    w.zeros = off.t;
    q.offsets_f = off.f;
  } else {
    q.offsets_f.assign(size_t(c.N * G), 0.f);
  }
  return q;
}

// out[T, N] f32 by the CPU kernel (+ bias).
std::vector<double> cpu_reference(const QWeight& q, const std::vector<float>& x, int64_t T, const float* bias) {
  const LinearWeight& w = q.canonical;
  const int bits = w.format == WeightFormat::Int4Group ? 4 : 8;
  std::vector<uint8_t> packed(size_t(w.n * kernels::qweight_row_bytes(bits, w.k)));
  kernels::qweight_pack(bits, w.n, w.k, w.data.ptr<uint8_t>(), packed.data());
  // The CPU view takes both scale and offset in one dtype: give it f32 copies.
  Tensor scales = convert_host(w.scales, DType::F32);
  kernels::QWeightView v;
  v.bits = bits;
  v.n = w.n;
  v.k = w.k;
  v.group = w.group_size;
  v.packed = packed.data();
  v.scale_type = kernels::ScaleType::F32;
  v.scale = scales.data;
  v.offset = q.offsets_f.data();
  std::vector<float> out(size_t(T * w.n));
  kernels::qlinear_rows_f32(x.data(), T, v, bias, 0, w.n, out.data(), w.n);
  return std::vector<double>(out.begin(), out.end());
}

bool group_fits(int group, int64_t K) { return K % group == 0; }

// One case through the backend with activations `dt` (bias on alternate cases).
void run_backend_case(const QCase& c, int64_t T, DType dt, bool with_bias, std::mt19937& rng) {
  CudaBackend& be = backend(dt);
  const QWeight q = random_qweight(c, rng);
  const LinearWeight lw = be.upload_quantized(q.canonical);
  HostData x = random_host(dt, {T, c.K}, rng);
  HostData b = random_host(dt, {c.N}, rng);
  Tensor dx = be.upload(x.t, dt), db = be.upload(b.t, dt);
  Tensor out = poisoned(be, dt, {T, c.N});
  be.linear(dx, lw, with_bias ? &db : nullptr, out);
  expect_close("qlinear " + case_name(c, T) + (with_bias ? " +bias" : ""), dt, to_vec(be, out),
               cpu_reference(q, x.f, T, with_bias ? b.f.data() : nullptr));
}

// An act-order weight: packed column j is input perm[j]. The reference multiplies x[:, perm].
void run_act_order_case(const QCase& c, int64_t T, DType dt, std::mt19937& rng) {
  CudaBackend& be = backend(dt);
  QWeight q = random_qweight(c, rng);
  std::vector<int32_t> perm(size_t(c.K));
  for (int64_t i = 0; i < c.K; ++i) perm[size_t(i)] = int32_t(i);
  std::shuffle(perm.begin(), perm.end(), rng);
  q.canonical.input_perm = Tensor::empty_host(DType::I32, {c.K});
  std::memcpy(q.canonical.input_perm.data, perm.data(), perm.size() * sizeof(int32_t));
  const LinearWeight lw = be.upload_quantized(q.canonical);
  HostData x = random_host(dt, {T, c.K}, rng);
  std::vector<float> gathered(x.f.size());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < c.K; ++j) gathered[size_t(t * c.K + j)] = x.f[size_t(t * c.K + perm[size_t(j)])];
  Tensor out = poisoned(be, dt, {T, c.N});
  be.linear(be.upload(x.t, dt), lw, nullptr, out);
  expect_close("act-order qlinear " + case_name(c, T), dt, to_vec(be, out), cpu_reference(q, gathered, T, nullptr));
}

}  // namespace

TEST_CASE("cuda: the backend runs int4 / int8 group weights, act-order ones too") {
  CudaBackend& be = backend(DType::BF16);
  CHECK(be.caps().supports(WeightFormat::Int4Group));
  CHECK(be.caps().supports(WeightFormat::Int8Group));
  CHECK(be.caps().supports(WeightFormat::DenseBF16));
  CHECK(be.caps().input_perm);
}

TEST_CASE("cuda: quantized linear with an act-order input permutation, decode and batch sizes") {
  std::mt19937 rng(1517);
  for (int64_t T : {1, 4, 17, 128})
    for (int bits : {4, 8})
      for (DType dt : kHalfTypes) run_act_order_case({bits, 128, 961, 1536, DType::F16, bits == 8}, T, dt, rng);
  run_act_order_case({4, 32, 33, 96, DType::F32, true}, 3, DType::BF16, rng);
}

TEST_CASE("cuda: quantized linear, every bits/group/scale/offset variant against the CPU kernel") {
  std::mt19937 rng(1515);
  struct Shape { int64_t N, K; };
  const Shape shapes[] = {{257, 576}, {961, 1536}, {33, 96}, {300, 4096}};
  const int64_t Ts[] = {1, 2, 3, 4, 5, 17, 128};
  int idx = 0;
  for (int bits : {4, 8})
    for (int group : {16, 32, 64, 128})
      for (DType sdt : {DType::F16, DType::F32})
        for (bool offsets : {true, false})
          for (DType dt : kHalfTypes) {
            Shape s = shapes[idx % 4];
            for (int j = 1; !group_fits(group, s.K); ++j) s = shapes[(idx + j) % 4];
            run_backend_case({bits, group, s.N, s.K, sdt, offsets}, Ts[idx % 7], dt, idx % 2 == 1, rng);
            ++idx;
          }
}

TEST_CASE("cuda: quantized linear, every T and every shape") {
  std::mt19937 rng(1516);
  // 12: the tensor cores' 16-row tile (9..16 tokens) without --deterministic
  for (int64_t T : {1, 2, 3, 4, 5, 12, 17, 128})
    for (int bits : {4, 8}) run_backend_case({bits, 128, 961, 1536, DType::F16, true}, T, DType::BF16, T == 5, rng);
  for (auto [N, K] : {std::pair<int64_t, int64_t>{257, 576}, {961, 1536}, {33, 96}, {1, 32}, {4099, 4096}})
    for (int bits : {4, 8}) run_backend_case({bits, 32, N, K, DType::F32, true}, 5, DType::F16, false, rng);
}

TEST_CASE("cuda: quantized linear with f32 activations (kernel direct)") {
  std::mt19937 rng(1517);
  CudaBackend& be = backend(DType::BF16);
  for (int bits : {4, 8})
    for (int group : {16, 64}) {
      const QCase c{bits, group, 257, 576, DType::F32, true};
      for (int64_t T : {1, 4, 17}) {
        const QWeight q = random_qweight(c, rng);
        const LinearWeight lw = be.upload_quantized(q.canonical);
        HostData x = random_host(DType::F32, {T, c.K}, rng);
        Tensor dx = be.upload(x.t, DType::F32);
        Tensor out = poisoned(be, DType::F32, {T, c.N});
        cuda::QLinearParams p;
        p.x = dx.data;
        p.x_dtype = DType::F32;
        p.packed = static_cast<const uint8_t*>(lw.data.data);
        p.bits = bits;
        p.group = group;
        p.scale = lw.scales.data;
        p.offset = lw.zeros.data;
        p.scale_dtype = lw.scales.dtype;
        p.out = out.data;
        p.out_dtype = DType::F32;
        p.T = T;
        p.N = c.N;
        p.K = c.K;
        cuda::qlinear(p, be.stream());
        expect_close("qlinear f32 " + case_name(c, T), DType::F32, to_vec(be, out), cpu_reference(q, x.f, T, nullptr),
                     5.0);
      }
    }
}

// The tuner (qlinear_tuner.h): past decode sizes its output is, bit for bit, that of the kernel it
// reports for the shape, measured once per key (a second call of the same bucket measures nothing);
// up to kQLinearSmallT tokens it is the CUDA-core kernel's, without measuring.
TEST_CASE("cuda: the quantized-linear tuner runs the kernel it chose") {
  std::mt19937 rng(1519);
  CudaBackend& be = backend(DType::BF16);
  cuda::QLinearTuner tuner;
  const QCase c{4, 64, 961, 1536, DType::F16, true};
  const QWeight q = random_qweight(c, rng);
  const LinearWeight lw = be.upload_quantized(q.canonical);
  std::set<int64_t> buckets;  // T rounded up to a power of two, past decode sizes: one measurement each
  for (int64_t T : {1, 8, 9, 16, 64, 128, 100}) {
    HostData x = random_host(DType::BF16, {T, c.K}, rng);
    Tensor dx = be.upload(x.t, DType::BF16);
    Tensor got = poisoned(be, DType::BF16, {T, c.N}), want = poisoned(be, DType::BF16, {T, c.N});
    cuda::QLinearParams p;
    p.x = dx.data;
    p.x_dtype = DType::BF16;
    p.packed = static_cast<const uint8_t*>(lw.data.data);
    p.bits = c.bits;
    p.group = c.group;
    p.scale = lw.scales.data;
    p.offset = lw.zeros.data;
    p.scale_dtype = lw.scales.dtype;
    p.out_dtype = DType::BF16;
    p.T = T;
    p.N = c.N;
    p.K = c.K;
    p.out = got.data;
    tuner.run(p, be.stream());
    const cuda::QLinearTuner::Kernel k = tuner.choice(p);
    p.out = want.data;
    if (k == cuda::QLinearTuner::Kernel::TensorCores)
      cuda::qlinear_mma(p, be.stream());
    else
      cuda::qlinear(p, be.stream());
    const std::vector<float> a = to_vec(be, got), b = to_vec(be, want);
    // T = 16 shares the bucket of 9, and T = 100 that of 128: measured already.
    if (T > cuda::kQLinearSmallT) buckets.insert(std::bit_ceil(uint64_t(T)));
    INFO("T=" << T << " kernel " << (k == cuda::QLinearTuner::Kernel::TensorCores ? "tensor cores" : "CUDA cores"));
    std::printf("  qlinear tuner %-40s T=%-4lld %s\n", case_name(c, T).c_str(), (long long)T,
                k == cuda::QLinearTuner::Kernel::TensorCores ? "tensor cores" : "CUDA cores");
    if (T <= cuda::kQLinearSmallT) CHECK(k == cuda::QLinearTuner::Kernel::CudaCores);
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
    CHECK(tuner.measured() == int(buckets.size()));
    expect_close("qlinear tuner " + case_name(c, T), DType::BF16, a, cpu_reference(q, x.f, T, nullptr));
  }
}

// Row t of a T-token call equals the same row alone (T = 1) and inside a batch of 3, bitwise.
void check_batch_invariant(CudaBackend& be, DType dt, const QCase& c, int64_t T, std::mt19937& rng) {
  const QWeight q = random_qweight(c, rng);
  const LinearWeight lw = be.upload_quantized(q.canonical);
  HostData x = random_host(dt, {T, c.K}, rng);
  Tensor full = poisoned(be, dt, {T, c.N});
  be.linear(be.upload(x.t, dt), lw, nullptr, full);
  const std::vector<float> all = to_vec(be, full);
  auto rows = [&](int64_t t0, int64_t n) {
    Tensor xs = Tensor::empty_host(dt, {n, c.K});
    std::memcpy(xs.data, static_cast<const char*>(x.t.data) + t0 * c.K * dtype_size(dt),
                size_t(n * c.K) * dtype_size(dt));
    Tensor o = poisoned(be, dt, {n, c.N});
    be.linear(be.upload(xs, dt), lw, nullptr, o);
    return to_vec(be, o);
  };
  int64_t mismatched = 0;
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<float> one = rows(t, 1);
    mismatched += std::memcmp(one.data(), all.data() + t * c.N, size_t(c.N) * sizeof(float)) != 0;
  }
  const std::vector<float> three = rows(2, 3);
  mismatched += std::memcmp(three.data(), all.data() + 2 * c.N, size_t(3 * c.N) * sizeof(float)) != 0;
  INFO(case_name(c, T) << " " << dtype_name(dt) << (be.options().deterministic ? " deterministic" : ""));
  CHECK(mismatched == 0);
}

TEST_CASE("cuda: quantized linear is batch invariant (a row's bits alone = in any batch)") {
  std::mt19937 rng(1518);
  const QCase cases[] = {QCase{4, 32, 961, 1536, DType::F16, true}, QCase{8, 16, 257, 576, DType::F32, false}};
  for (DType dt : kHalfTypes) {
    // Default options: up to kQLinearSmallT tokens stay on the CUDA-core kernel (1, 4 or 8 a block).
    for (const QCase& c : cases) check_batch_invariant(backend(dt), dt, c, cuda::kQLinearSmallT, rng);
    // --deterministic: the tensor-core kernel for every T (64-token tiles for 17, 16-token alone).
    CudaOptions o;
    o.deterministic = true;
    CudaBackend det(dt, 0, o);
    for (const QCase& c : cases) check_batch_invariant(det, dt, c, 17, rng);
  }
}

// A mixture of experts' routed experts as one linear_group (CudaBackend::run_linear_group): the
// quantized items of decode-sized T go to one qlinear_grouped launch, each item's output bit for bit
// what linear() gives it alone; an act-order item, one past kQLinearSmallT tokens and one of other
// bits run as linear() runs them, in the same call. Every output near the CPU reference.
TEST_CASE("cuda: grouped quantized linears equal each item's own linear, bit for bit") {
  std::mt19937 rng(1519);
  for (DType dt : kHalfTypes) {
    CudaBackend& be = backend(dt);
    struct Item {
      QCase c;
      int64_t T;
      bool act_order = false;
    };
    const std::vector<Item> plan = {
        {{4, 32, 96, 576, DType::F16, true}, 1},    {{4, 16, 257, 576, DType::F32, false}, 3},
        {{4, 128, 64, 1536, DType::F16, true}, 8},  {{4, 32, 33, 576, DType::F32, true}, 0},
        {{4, 64, 200, 1536, DType::F16, false}, 5}, {{4, 32, 48, 576, DType::F16, true}, 2, true},
        {{4, 32, 80, 576, DType::F16, true}, 12},   {{8, 32, 72, 576, DType::F16, true}, 2},
        {{4, 32, 1000, 576, DType::F32, true}, 1},
    };
    std::vector<QWeight> qs;
    std::vector<LinearWeight> ws;
    std::vector<HostData> xs;
    for (const Item& it : plan) {
      QWeight q = random_qweight(it.c, rng);
      if (it.act_order) {
        std::vector<int32_t> perm(size_t(it.c.K));
        for (int64_t i = 0; i < it.c.K; ++i) perm[size_t(i)] = int32_t(i);
        std::shuffle(perm.begin(), perm.end(), rng);
        q.canonical.input_perm = Tensor::empty_host(DType::I32, {it.c.K});
        std::memcpy(q.canonical.input_perm.data, perm.data(), perm.size() * sizeof(int32_t));
      }
      ws.push_back(be.upload_quantized(q.canonical));
      qs.push_back(std::move(q));
      xs.push_back(random_host(dt, {it.T, it.c.K}, rng));
    }
    std::vector<Backend::GroupedLinear> group;
    std::vector<Tensor> alone;
    for (size_t i = 0; i < plan.size(); ++i) {
      const Tensor x = be.upload(xs[i].t, dt);
      group.push_back({x, &ws[i], poisoned(be, dt, {plan[i].T, plan[i].c.N})});
      alone.push_back(poisoned(be, dt, {plan[i].T, plan[i].c.N}));
      be.linear(x, ws[i], nullptr, alone.back());
    }
    be.linear_group(group);
    for (size_t i = 0; i < plan.size(); ++i) {
      const Item& it = plan[i];
      INFO(dtype_name(dt) << " item " << i << ": " << case_name(it.c, it.T) << (it.act_order ? " act-order" : ""));
      if (it.T == 0) continue;
      const std::vector<float> got = to_vec(be, group[i].out), want = to_vec(be, alone[i]);
      CHECK(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
      std::vector<float> xin = xs[i].f;
      if (it.act_order) {
        const int32_t* perm = qs[i].canonical.input_perm.ptr<int32_t>();
        for (int64_t t = 0; t < it.T; ++t)
          for (int64_t j = 0; j < it.c.K; ++j) xin[size_t(t * it.c.K + j)] = xs[i].f[size_t(t * it.c.K + perm[j])];
      }
      expect_close("grouped qlinear " + case_name(it.c, it.T), dt, got, cpu_reference(qs[i], xin, it.T, nullptr));
    }
  }
}

TEST_CASE("cuda: qlinear_grouped refuses items past decode sizes, of mixed bits, or without a device copy") {
  CudaBackend& be = backend(DType::BF16);
  cuda::QLinearParams p;
  void* fake = reinterpret_cast<void*>(uintptr_t(256));  // never read: refused before any launch
  p.x = fake, p.out = fake, p.scale = fake;
  p.packed = reinterpret_cast<const uint8_t*>(uintptr_t(256));
  p.T = 1, p.N = 16, p.K = 64;
  cuda::QLinearParams items[2] = {p, p};
  const auto* dev = reinterpret_cast<const cuda::QLinearParams*>(uintptr_t(256));
  items[1].T = cuda::kQLinearSmallT + 1;
  CHECK_THROWS_AS(cuda::qlinear_grouped(items, 2, dev, be.stream()), KernelError);
  items[1] = p, items[1].bits = 8;
  CHECK_THROWS_AS(cuda::qlinear_grouped(items, 2, dev, be.stream()), KernelError);
  items[1] = p;
  CHECK_THROWS_AS(cuda::qlinear_grouped(items, 2, nullptr, be.stream()), KernelError);
}
