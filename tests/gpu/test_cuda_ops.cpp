// CudaBackend ops (everything but attention) against naive references in double, bf16 and f16.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <numeric>

#include "gpu_test_util.h"

using namespace llmctl;
using namespace llmctl::gpu_test;

namespace {

float round_to(DType dt, float v) {
  if (dt == DType::BF16) return bf16_to_f32(f32_to_bf16(v));
  if (dt == DType::F16) return f16_to_f32(f32_to_f16(v));
  return v;
}

// A plan with only token ids / positions / logits rows filled (no attention).
BatchPlan simple_plan(const std::vector<int32_t>& ids, std::mt19937& rng, int max_pos = 5000) {
  BatchPlan p;
  p.token_ids = ids;
  std::uniform_int_distribution<int> pos(0, max_pos);
  for (size_t i = 0; i < ids.size(); ++i) {
    p.positions.push_back(pos(rng));
    p.slot_mapping.push_back(int32_t(i));
  }
  p.query_start = {0, int32_t(ids.size())};
  p.context_len = {int32_t(ids.size())};
  p.max_blocks_per_seq = 0;
  return p;
}

}  // namespace

TEST_CASE("cuda: embed") {
  std::mt19937 rng(1);
  for (DType dt : kHalfTypes) {
    CudaBackend& be = backend(dt);
    for (DType table_dt : {dt, DType::F32}) {
      const int V = 1000, H = 136, T = 37;
      HostData table = random_host(table_dt, {V, H}, rng);
      std::vector<int32_t> ids(T);
      std::uniform_int_distribution<int> u(0, V - 1);
      for (auto& i : ids) i = u(rng);
      BatchPlan plan = simple_plan(ids, rng);
      DeviceBatch b = be.prepare_batch(plan);
      Tensor dtab = be.upload(table.t, table_dt);
      Tensor out = poisoned(be, dt, {T, H});
      be.embed(dtab, b, out, 0);
      std::vector<double> ref(size_t(T) * H);
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < H; ++h) ref[size_t(t) * H + h] = round_to(dt, table.f[size_t(ids[t]) * H + h]);
      expect_close(std::string("embed table ") + dtype_name(table_dt), dt, to_vec(be, out), ref);
    }
  }
}

TEST_CASE("cuda: rms_norm with and without residual") {
  std::mt19937 rng(2);
  for (DType dt : kHalfTypes) {
    CudaBackend& be = backend(dt);
    for (int H : {64, 576, 4096}) {
      const int T = 9;
      const float eps = 1e-5f;
      HostData x = random_host(dt, {T, H}, rng), w = random_host(DType::F32, {H}, rng, 0.5f, 1.5f);
      Tensor dx = be.upload(x.t, dt), dw = be.upload(w.t, DType::F32);
      // without residual
      {
        Tensor out = poisoned(be, dt, {T, H});
        be.rms_norm(dx, dw, eps, out, nullptr);
        std::vector<double> ref(size_t(T) * H);
        for (int t = 0; t < T; ++t) {
          double ss = 0;
          for (int i = 0; i < H; ++i) ss += double(x.f[t * H + i]) * x.f[t * H + i];
          const double r = 1.0 / std::sqrt(ss / H + eps);
          for (int i = 0; i < H; ++i) ref[t * H + i] = x.f[t * H + i] * r * w.f[i];
        }
        expect_close("rms_norm H=" + std::to_string(H), dt, to_vec(be, out), ref);
      }
      // with residual, residual in the activation dtype and in f32
      for (DType rdt : {dt, DType::F32}) {
        HostData res = random_host(rdt, {T, H}, rng);
        Tensor dres = be.upload(res.t, rdt);
        Tensor out = poisoned(be, dt, {T, H});
        be.rms_norm(dx, dw, eps, out, &dres);
        std::vector<double> ref(size_t(T) * H), ref_res(size_t(T) * H);
        for (int t = 0; t < T; ++t) {
          double ss = 0;
          for (int i = 0; i < H; ++i) {
            const float r = round_to(rdt, res.f[t * H + i] + x.f[t * H + i]);
            ref_res[t * H + i] = r;
            ss += double(r) * r;
          }
          const double rs = 1.0 / std::sqrt(ss / H + eps);
          for (int i = 0; i < H; ++i) ref[t * H + i] = ref_res[t * H + i] * rs * w.f[i];
        }
        const std::string tag = "H=" + std::to_string(H) + " residual " + dtype_name(rdt);
        expect_close("rms_norm+residual " + tag, dt, to_vec(be, out), ref);
        expect_close("residual sum " + tag, dt, to_vec(be, dres), ref_res);
      }
    }
  }
}

TEST_CASE("cuda: linear (cuBLAS) with and without bias") {
  std::mt19937 rng(3);
  struct Shape { int T, K, N; };
  for (DType dt : kHalfTypes) {
    CudaBackend& be = backend(dt);
    for (Shape s : {Shape{1, 64, 96}, Shape{7, 320, 200}, Shape{64, 576, 1536}, Shape{130, 128, 40}}) {
      for (bool with_bias : {false, true}) {
        for (DType wdt : {dt, DType::F32}) {
          HostData x = random_host(dt, {s.T, s.K}, rng), w = random_host(wdt, {s.N, s.K}, rng);
          HostData bias = random_host(DType::F32, {s.N}, rng);
          Tensor dx = be.upload(x.t, dt), dw = be.upload(w.t, wdt), db = be.upload(bias.t, DType::F32);
          Tensor out = poisoned(be, dt, {s.T, s.N});
          be.linear(dx, dw, with_bias ? &db : nullptr, out);
          std::vector<double> ref(size_t(s.T) * s.N);
          for (int t = 0; t < s.T; ++t)
            for (int n = 0; n < s.N; ++n) {
              double acc = with_bias ? bias.f[n] : 0.0;
              // f32 weights are rounded to the compute dtype on the slow path
              for (int k = 0; k < s.K; ++k) acc += double(x.f[t * s.K + k]) * round_to(dt, w.f[size_t(n) * s.K + k]);
              ref[size_t(t) * s.N + n] = acc;
            }
          expect_close("linear T=" + std::to_string(s.T) + " K=" + std::to_string(s.K) + " N=" + std::to_string(s.N) +
                           (with_bias ? " +bias" : "") + " w " + dtype_name(wdt),
                       dt, to_vec(be, out), ref);
        }
      }
    }
  }
}

TEST_CASE("cuda: silu_mul and gather_rows") {
  std::mt19937 rng(4);
  for (DType dt : kHalfTypes) {
    CudaBackend& be = backend(dt);
    const int T = 11, I = 344;
    HostData gu = random_host(dt, {T, 2 * I}, rng, -4.f, 4.f);
    Tensor dgu = be.upload(gu.t, dt);
    Tensor out = poisoned(be, dt, {T, I});
    be.silu_mul(dgu, out);
    std::vector<double> ref(size_t(T) * I);
    for (int t = 0; t < T; ++t)
      for (int i = 0; i < I; ++i) {
        const double g = gu.f[t * 2 * I + i], u = gu.f[t * 2 * I + I + i];
        ref[t * I + i] = g / (1.0 + std::exp(-g)) * u;
      }
    expect_close("silu_mul", dt, to_vec(be, out), ref);

    std::vector<int32_t> ids(T, 0);
    BatchPlan plan = simple_plan(ids, rng);
    plan.logits_rows = {10, 0, 3, 3, 7};
    DeviceBatch b = be.prepare_batch(plan);
    for (DType odt : {dt, DType::F32}) {
      Tensor g = poisoned(be, odt, {int64_t(plan.logits_rows.size()), I});
      be.gather_rows(out, b, g);
      std::vector<float> got = to_vec(be, g), src = to_vec(be, out);
      std::vector<double> gref;
      for (int r : plan.logits_rows)
        for (int i = 0; i < I; ++i) gref.push_back(src[size_t(r) * I + i]);
      expect_close(std::string("gather_rows out ") + dtype_name(odt), dt, got, gref, 1e-3);
    }
  }
}

TEST_CASE("cuda: rope, write_kv and the fused rope_write_kv") {
  std::mt19937 rng(5);
  struct Shape { int D, Hq, Hkv, B; };
  for (DType dt : kHalfTypes) {
    CudaBackend& be = backend(dt);
    for (Shape s : {Shape{64, 9, 3, 16}, Shape{128, 32, 8, 32}, Shape{128, 4, 4, 16}}) {
      const int T = 23, W = (s.Hq + 2 * s.Hkv) * s.D, NB = 8;
      RopeParams rp;
      rp.head_dim = s.D;
      for (int i = 0; i < s.D / 2; ++i) rp.inv_freq.push_back(float(std::pow(500000.0, -2.0 * i / s.D)));
      HostData qkv = random_host(dt, {T, W}, rng);
      std::vector<int32_t> ids(T, 1);
      BatchPlan plan = simple_plan(ids, rng, 8191);
      // distinct random slots in an NB*B pool
      std::vector<int32_t> slots(NB * s.B);
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng);
      for (int t = 0; t < T; ++t) plan.slot_mapping[t] = slots[t];
      DeviceBatch b = be.prepare_batch(plan);

      // reference rotation
      std::vector<double> ref(qkv.f.begin(), qkv.f.end());
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < s.Hq + s.Hkv; ++h)
          for (int i = 0; i < s.D / 2; ++i) {
            const float ang = float(plan.positions[t]) * rp.inv_freq[i];
            const double c = std::cos(double(ang)), sn = std::sin(double(ang));
            const size_t a = size_t(t) * W + h * s.D + i, bb = a + s.D / 2;
            const double x1 = qkv.f[a], x2 = qkv.f[bb];
            ref[a] = x1 * c - x2 * sn;
            ref[bb] = x2 * c + x1 * sn;
          }
      const std::string tag = "D=" + std::to_string(s.D) + " Hq=" + std::to_string(s.Hq) + " Hkv=" +
                              std::to_string(s.Hkv) + " B=" + std::to_string(s.B);
      Tensor d = be.upload(qkv.t, dt);
      be.rope(d, b, rp, s.Hq, s.Hkv);
      std::vector<float> rotated = to_vec(be, d);
      expect_close("rope " + tag, dt, rotated, ref);

      // write_kv of the rotated qkv: exact copies into the slots
      KvLayer cache{poisoned(be, dt, {NB, s.B, s.Hkv, s.D}), poisoned(be, dt, {NB, s.B, s.Hkv, s.D})};
      be.write_kv(d, b, s.Hq, s.Hkv, cache);
      std::vector<float> kc = to_vec(be, cache.k), vc = to_vec(be, cache.v);
      std::vector<float> got;
      std::vector<double> want;
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < s.Hkv; ++h)
          for (int i = 0; i < s.D; ++i) {
            const size_t c = (size_t(plan.slot_mapping[t]) * s.Hkv + h) * s.D + i;
            got.push_back(kc[c]);
            want.push_back(rotated[size_t(t) * W + (s.Hq + h) * s.D + i]);
            got.push_back(vc[c]);
            want.push_back(rotated[size_t(t) * W + (s.Hq + s.Hkv + h) * s.D + i]);
          }
      expect_close("write_kv " + tag, dt, got, want, 1e-3);

      // fused: same qkv and same cache contents as rope then write_kv
      Tensor d2 = be.upload(qkv.t, dt);
      KvLayer cache2{poisoned(be, dt, {NB, s.B, s.Hkv, s.D}), poisoned(be, dt, {NB, s.B, s.Hkv, s.D})};
      be.rope_write_kv(d2, b, rp, s.Hq, s.Hkv, cache2);
      std::vector<float> kc2 = to_vec(be, cache2.k), vc2 = to_vec(be, cache2.v), rot2 = to_vec(be, d2);
      std::vector<double> rot_d(rotated.begin(), rotated.end());
      expect_close("rope_write_kv qkv " + tag, dt, rot2, rot_d, 1e-3);
      std::vector<float> got2;
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < s.Hkv; ++h)
          for (int i = 0; i < s.D; ++i) {
            const size_t c = (size_t(plan.slot_mapping[t]) * s.Hkv + h) * s.D + i;
            got2.push_back(kc2[c]);
            got2.push_back(vc2[c]);
          }
      expect_close("rope_write_kv cache " + tag, dt, got2, want, 1e-3);
    }
  }
}

TEST_CASE("cuda: GEMM autotuning measures once, caches the choice in a file, and computes the same") {
  std::mt19937 rng(31);
  const std::string dir = "/tmp/llmctl-gemm-tune-test-" + std::to_string(rng());
  REQUIRE(std::system(("mkdir -p " + dir).c_str()) == 0);
  CudaOptions opts;
  opts.autotune_dir = dir;
  const int N = 1000, K = 512;
  HostData w = random_host(DType::BF16, {N, K}, rng), x = random_host(DType::BF16, {300, K}, rng);
  std::vector<std::vector<float>> first;
  for (int round = 0; round < 2; ++round) {
    CudaBackend be(DType::BF16, 0, opts);  // round 1 reads what round 0 measured
    Tensor dw = be.upload(w.t, DType::BF16), dx = be.upload(x.t, DType::BF16);
    for (int T : {1, 7, 64, 300}) {
      Tensor xt = dx;
      xt.shape = {T, K};
      Tensor out = poisoned(be, DType::F32, {T, N});
      be.linear(xt, dw, nullptr, out);
      std::vector<float> got = to_vec(be, out);
      std::vector<double> ref(size_t(T) * N);
      for (int t = 0; t < T; ++t)
        for (int n = 0; n < N; ++n) {
          double acc = 0;
          for (int k = 0; k < K; ++k) acc += double(x.f[size_t(t) * K + k]) * w.f[size_t(n) * K + k];
          ref[size_t(t) * N + n] = acc;
        }
      expect_close("tuned gemm round " + std::to_string(round) + " T=" + std::to_string(T), DType::F32, got, ref, 1e2);
      if (round == 0) first.push_back(got);
      else CHECK(got == first[first.size() - 4 + (T == 1 ? 0 : T == 7 ? 1 : T == 64 ? 2 : 3)]);
    }
    const cuda::GemmTuner* tuner = be.gemm_tuner();
    REQUIRE(tuner);
    std::printf("  round %d: %d shapes measured, %d from %s\n", round, tuner->measured(), tuner->from_cache(),
                tuner->cache_path().c_str());
    if (round == 0) CHECK(tuner->measured() == 4);
    else CHECK(tuner->from_cache() == 4);
    if (round == 1) CHECK(tuner->measured() == 0);
  }
}
