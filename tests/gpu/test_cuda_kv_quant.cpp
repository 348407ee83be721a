// int8 and fp8 KV caches on CUDA (kernels/cuda/kv_quant.cu through CudaBackend's write_kv,
// attention and copy_blocks) against the CPU backend (kernels/cpu/kv_quant.h, the reference): the
// same random starting cache (codes and scales) on both, the same step's qkv (the GPU's rounded
// values as f32 on the CPU), then: codes and scales after write_kv equal the CPU's exactly, and the
// attention outputs agree to the activation dtype's tolerance (decode, split decode, prefill, mixed).
// The attention kernels read the codes in place (kernels/cuda/kv_codes.cuh): their output also
// equals, bit for bit, the dense kernels' over a copy of the cache dequantized on the host with the
// same arithmetic and rounded to the activation dtype.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <tuple>

#include "gpu_test_util.h"
#include "kernels/fp8_e4m3.h"

using namespace llmctl;
using namespace llmctl::gpu_test;

namespace {

struct Seq {
  int before, fresh;
};

BatchPlan plan_of(const std::vector<Seq>& seqs, int B, std::mt19937& rng, int* num_blocks) {
  BatchPlan p;
  int total = 0, widest = 0;
  for (Seq s : seqs) {
    const int nb = (s.before + s.fresh + B - 1) / B;
    total += nb;
    widest = std::max(widest, nb);
  }
  *num_blocks = total + 3;
  std::vector<int32_t> pool(static_cast<size_t>(*num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  p.max_blocks_per_seq = widest + 1;
  size_t next = 0;
  for (Seq s : seqs) {
    const int ctx = s.before + s.fresh;
    std::vector<int32_t> row(size_t(p.max_blocks_per_seq), -1);
    for (int i = 0; i < (ctx + B - 1) / B; ++i) row[size_t(i)] = pool[next++];
    for (int pos = s.before; pos < ctx; ++pos) {
      p.token_ids.push_back(1);
      p.positions.push_back(pos);
      p.slot_mapping.push_back(row[size_t(pos / B)] * B + pos % B);
    }
    p.block_table.insert(p.block_table.end(), row.begin(), row.end());
    p.context_len.push_back(ctx);
    p.query_start.push_back(p.query_start.back() + s.fresh);
    p.logits_rows.push_back(p.query_start.back() - 1);
  }
  p.validate(B, *num_blocks);
  return p;
}

std::vector<uint8_t> device_bytes(CudaBackend& be, const Tensor& t) {
  std::vector<uint8_t> h(t.nbytes());
  be.synchronize();
  CUDA_CHECK(cudaMemcpy(h.data(), t.data, h.size(), cudaMemcpyDeviceToHost));
  return h;
}
Tensor device_from(CudaBackend& be, const Tensor& host) {
  return be.upload(host, host.dtype);  // as stored (codes, f32 scales)
}

// A random starting cache: codes and scales, host tensors shared by both backends.
KvLayer random_cache(KvCacheDtype kind, int NB, int B, int Hkv, int D, std::mt19937& rng) {
  KvLayer c;
  c.quant = kind;
  const bool int8 = kind == KvCacheDtype::Int8;
  const std::vector<int64_t> shape = {NB, B, Hkv, D};
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (Tensor* t : {&c.k, &c.v}) {
    *t = Tensor::empty_host(int8 ? DType::I8 : DType::U8, shape);
    for (int64_t i = 0; i < t->numel(); ++i)
      static_cast<uint8_t*>(t->data)[i] = int8 ? uint8_t(int(std::lround(u(rng) * 127.f))) : f32_to_fp8_e4m3(2.f * u(rng));
  }
  for (Tensor* t : {&c.k_scale, &c.v_scale}) {
    *t = int8 ? Tensor::empty_host(DType::F32, {NB, B, Hkv, 2}) : Tensor::empty_host(DType::F32, {Hkv});
    float* f = t->ptr<float>();
    if (int8)
      for (int64_t i = 0; i < t->numel(); i += 2) f[i] = 0.004f + 0.004f * std::fabs(u(rng)), f[i + 1] = -0.5f + 0.1f * u(rng);
    else
      for (int64_t i = 0; i < t->numel(); ++i) f[i] = 0.5f + 0.25f * (u(rng) + 1.f);
  }
  return c;
}

// The GPU cache `q` dequantized on the host as kv_codes.cuh does (int8: fma((c + 128), s, z); fp8:
// e4m3(c) * s), rounded to dt, uploaded as a dense cache.
KvLayer dequantized_copy(CudaBackend& be, const KvLayer& q, DType dt) {
  const int64_t D = q.k.dim(3), Hkv = q.k.dim(2), rows = q.k.numel() / D;
  KvLayer d;
  for (auto [codes_t, scale_t, out] : {std::tuple{&q.k, &q.k_scale, &d.k}, {&q.v, &q.v_scale, &d.v}}) {
    const std::vector<uint8_t> codes = device_bytes(be, *codes_t), sb = device_bytes(be, *scale_t);
    std::vector<float> sc(sb.size() / sizeof(float));
    std::memcpy(sc.data(), sb.data(), sb.size());
    Tensor f = Tensor::empty_host(DType::F32, q.k.shape);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t e = 0; e < D; ++e) {
        const uint8_t c = codes[size_t(r * D + e)];
        f.ptr<float>()[r * D + e] =
            q.quant == KvCacheDtype::Int8
                ? std::fma(float(int(int8_t(c)) + 128), sc[size_t(2 * r)], sc[size_t(2 * r + 1)])
                : fp8_e4m3_to_f32(c) * sc[size_t(r % Hkv)];
      }
    *out = be.upload(convert_host(f, dt), dt);
  }
  return d;
}

// A host cache's own copy (the CPU backend writes in place).
KvLayer host_copy(const KvLayer& h) {
  KvLayer c = h;
  for (Tensor* t : {&c.k, &c.v, &c.k_scale, &c.v_scale}) {
    Tensor copy = Tensor::empty_host(t->dtype, t->shape);
    std::memcpy(copy.data, t->data, t->nbytes());
    *t = copy;
  }
  return c;
}

// One step on the CPU backend: write_kv of qkv (f32 [T, (Hq + 2 Hkv) D]) into `cache`, then the
// attention output [T, Hq D] in double.
std::vector<double> cpu_step(Backend& cpu, KvLayer& cache, const BatchPlan& plan, const std::vector<float>& qkv,
                             int Hq, int Hkv, int D, float scale) {
  const int T = plan.num_tokens();
  Tensor cqkv = Tensor::empty_host(DType::F32, {T, int64_t(Hq + 2 * Hkv) * D});
  std::memcpy(cqkv.data, qkv.data(), qkv.size() * sizeof(float));
  DeviceBatch cb = cpu.prepare_batch(plan);
  cpu.write_kv(cqkv, cb, Hq, Hkv, cache);
  Tensor cout = Tensor::empty_host(DType::F32, {T, int64_t(Hq) * D});
  cpu.attention(cqkv, cache, cb, Hq, Hkv, scale, cout);
  return std::vector<double>(cout.ptr<float>(), cout.ptr<float>() + cout.numel());
}

KvLayer to_device(CudaBackend& be, const KvLayer& h) {
  KvLayer d;
  d.quant = h.quant;
  d.k = device_from(be, h.k);
  d.v = device_from(be, h.v);
  d.k_scale = device_from(be, h.k_scale);
  d.v_scale = device_from(be, h.v_scale);
  return d;
}

void run_kv_case(KvCacheDtype kind, DType dt, int D, int Hkv, int G, int B, const std::vector<Seq>& seqs,
                 const char* what, uint32_t seed) {
  std::mt19937 rng(seed);
  CudaBackend& be = backend(dt);
  std::unique_ptr<Backend> cpu = make_cpu_backend(2);
  REQUIRE(be.caps().supports_kv_cache(kind));
  const int Hq = Hkv * G, W = (Hq + 2 * Hkv) * D;
  int NB = 0;
  const BatchPlan plan = plan_of(seqs, B, rng, &NB);
  const int T = plan.num_tokens();
  const float scale = 1.f / std::sqrt(float(D));
  KvLayer host_cache = random_cache(kind, NB, B, Hkv, D, rng);
  HostData qkv = random_host(dt, {T, W}, rng, -2.f, 2.f);

  KvLayer gcache = to_device(be, host_cache);
  Tensor dqkv = be.upload(qkv.t, dt);
  DeviceBatch gb = be.prepare_batch(plan);
  be.write_kv(dqkv, gb, Hq, Hkv, gcache);
  Tensor gout = poisoned(be, dt, {T, Hq * D});
  be.attention(dqkv, gcache, gb, Hq, Hkv, scale, gout);
  const std::vector<float> got = to_vec(be, gout);
  {  // in place == the dense kernels over the dequantized copy, bit for bit
    const KvLayer dense = dequantized_copy(be, gcache, dt);
    Tensor dout = poisoned(be, dt, {T, Hq * D});
    be.attention(dqkv, dense, gb, Hq, Hkv, scale, dout);
    const std::vector<float> want = to_vec(be, dout);
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += std::memcmp(&got[i], &want[i], sizeof(float)) != 0;
    INFO(kv_cache_dtype_name(kind) << " " << what << " " << dtype_name(dt) << " D=" << D << ": " << differ << " of "
                                   << got.size() << " outputs differ from the dense kernels on the dequantized copy");
    CHECK(differ == 0);
  }

  KvLayer ccache = host_copy(host_cache);
  const std::vector<double> ref = cpu_step(*cpu, ccache, plan, qkv.f, Hq, Hkv, D, scale);

  INFO(kv_cache_dtype_name(kind) << " " << what << " " << dtype_name(dt) << " D=" << D << " Hkv=" << Hkv << " G=" << G
                                 << " B=" << B);
  // The written rows: codes and scales as the CPU writes them, exactly.
  CHECK(device_bytes(be, gcache.k) == std::vector<uint8_t>(static_cast<uint8_t*>(ccache.k.data),
                                                           static_cast<uint8_t*>(ccache.k.data) + ccache.k.nbytes()));
  CHECK(device_bytes(be, gcache.v) == std::vector<uint8_t>(static_cast<uint8_t*>(ccache.v.data),
                                                           static_cast<uint8_t*>(ccache.v.data) + ccache.v.nbytes()));
  if (kind == KvCacheDtype::Int8)
    CHECK(device_bytes(be, gcache.k_scale) ==
          std::vector<uint8_t>(static_cast<uint8_t*>(ccache.k_scale.data),
                               static_cast<uint8_t*>(ccache.k_scale.data) + ccache.k_scale.nbytes()));
  char name[160];
  std::snprintf(name, sizeof name, "kv %-4s attention %-8s D=%-3d Hkv=%d G=%d B=%-2d T=%d", kv_cache_dtype_name(kind),
                what, D, Hkv, G, B, T);
  // The GPU attends over the context dequantized to the activation dtype (one more rounding).
  expect_close(name, dt, got, ref, 2.0);
}

// fp8 with exact open-block rows (engine/backend/kv_exact_rows.h) on both backends, two steps:
//   1. A prefills [0, 21), B prefills [0, 40) (slots 0, 1);
//   2. slot 1 forked into slot 2; A decodes at 21 (its own block's rows 16..20 from the slot),
//      B takes [40, 47) (rows 32..39 from the slot, 40.. from the step), C, B's fork, decodes at 40
//      (rows 32..39 from the copied slot; its block 2 is its own, with codes nobody wrote).
// Each step's attention output within the dtype's tolerance of the CPU's; in f16 also closer to it
// than the CPU's own output without exact rows is (so reading the codes there would fail).
struct ExactSeq {
  int before, fresh;
  std::vector<int32_t> blocks;
  int slot;
};
BatchPlan exact_plan(const std::vector<ExactSeq>& seqs, int B, int NB) {
  BatchPlan p;
  p.max_blocks_per_seq = 3;
  for (const ExactSeq& s : seqs) {
    std::vector<int32_t> row(3, -1);
    std::copy(s.blocks.begin(), s.blocks.end(), row.begin());
    for (int pos = s.before; pos < s.before + s.fresh; ++pos) {
      p.token_ids.push_back(1);
      p.positions.push_back(pos);
      p.slot_mapping.push_back(row[size_t(pos / B)] * B + pos % B);
    }
    p.block_table.insert(p.block_table.end(), row.begin(), row.end());
    p.context_len.push_back(s.before + s.fresh);
    p.query_start.push_back(p.query_start.back() + s.fresh);
    p.logits_rows.push_back(p.query_start.back() - 1);
    p.exact_slot.push_back(s.slot);
  }
  p.validate(B, NB);
  return p;
}

void run_exact_case(DType dt, int D, uint32_t seed) {
  std::mt19937 rng(seed);
  CudaBackend& be = backend(dt);
  std::unique_ptr<Backend> cpu = make_cpu_backend(2);
  REQUIRE(be.caps().supports_kv_exact_rows(KvCacheDtype::Fp8));
  const int Hkv = 2, G = 4, Hq = Hkv * G, W = (Hq + 2 * Hkv) * D, B = 16, NB = 7;
  const float scale = 1.f / std::sqrt(float(D));
  const KvLayer host_cache = random_cache(KvCacheDtype::Fp8, NB, B, Hkv, D, rng);
  auto with_exact = [&](KvLayer l) {
    l.exact = std::make_shared<KvExactStore>();
    l.exact->ring_blocks = 1;
    l.exact->block_size = B;
    l.exact->kv_heads = Hkv;
    l.exact->head_dim = D;
    return l;
  };
  std::vector<KvLayer> gpu_layers = {with_exact(to_device(be, host_cache))};
  std::vector<KvLayer> cpu_layers = {with_exact(host_copy(host_cache))}, plain_layers = {host_copy(host_cache)};
  be.reserve_exact_slots(gpu_layers, 3);
  CHECK(gpu_layers[0].exact->device_slots() >= 3);

  const std::vector<BatchPlan> steps = {
      exact_plan({{0, 21, {0, 1}, 0}, {0, 40, {2, 3, 4}, 1}}, B, NB),
      exact_plan({{21, 1, {0, 1}, 0}, {40, 7, {2, 3, 4}, 1}, {40, 1, {2, 3, 5}, 2}}, B, NB)};
  for (size_t i = 0; i < steps.size(); ++i) {
    const BatchPlan& plan = steps[i];
    if (i == 1) {
      be.copy_exact_rows(gpu_layers, {1, 2});
      cpu->copy_exact_rows(cpu_layers, {1, 2});
    }
    const int T = plan.num_tokens();
    HostData qkv = random_host(dt, {T, W}, rng, -2.f, 2.f);
    Tensor dqkv = be.upload(qkv.t, dt);
    DeviceBatch gb = be.prepare_batch(plan);
    be.write_kv(dqkv, gb, Hq, Hkv, gpu_layers[0]);
    Tensor gout = poisoned(be, dt, {T, Hq * D});
    be.attention(dqkv, gpu_layers[0], gb, Hq, Hkv, scale, gout);
    const std::vector<float> got = to_vec(be, gout);

    const std::vector<double> ref = cpu_step(*cpu, cpu_layers[0], plan, qkv.f, Hq, Hkv, D, scale);
    BatchPlan plain_plan = plan;
    plain_plan.exact_slot.clear();
    const std::vector<double> plain = cpu_step(*cpu, plain_layers[0], plain_plan, qkv.f, Hq, Hkv, D, scale);
    char name[160];
    std::snprintf(name, sizeof name, "kv fp8 exact open block, step %zu D=%-3d T=%d", i + 1, D, T);
    expect_close(name, dt, got, ref, 2.0);
    if (dt == DType::F16) {
      const std::vector<float> plain_f(plain.begin(), plain.end());
      const double err = compare(got, ref).rel, plain_err = compare(plain_f, ref).rel;
      INFO(name << ": rel " << err << " against the CPU with exact rows; the CPU without them " << plain_err);
      CHECK(err < 0.5 * plain_err);
    }
  }
}

}  // namespace

TEST_CASE("cuda: fp8 KV cache with exact open-block rows against the CPU backend") {
  uint32_t seed = 900;
  for (DType dt : kHalfTypes)
    for (int D : {64, 128}) run_exact_case(dt, D, seed++);
}

TEST_CASE("cuda: int8 and fp8 KV cache write + attention against the CPU backend") {
  const std::vector<Seq> decode = {{0, 1}, {16, 1}, {99, 1}, {1500, 1}};
  const std::vector<Seq> prefill = {{0, 40}, {33, 17}, {0, 2}};
  const std::vector<Seq> mixed = {{0, 17}, {60, 1}, {900, 30}, {5, 1}};
  uint32_t seed = 300;
  for (KvCacheDtype kind : {KvCacheDtype::Int8, KvCacheDtype::Fp8})
    for (DType dt : kHalfTypes)
      for (int D : {64, 128}) {
        run_kv_case(kind, dt, D, 2, 4, 16, decode, "decode", seed++);
        run_kv_case(kind, dt, D, 2, 4, 16, prefill, "prefill", seed++);
        run_kv_case(kind, dt, D, 2, 1, 32, mixed, "mixed", seed++);
      }
}

TEST_CASE("cuda: int8 KV copy_blocks moves codes and scales") {
  std::mt19937 rng(77);
  CudaBackend& be = backend(DType::BF16);
  const KvLayer h = random_cache(KvCacheDtype::Int8, 6, 16, 2, 64, rng);
  std::vector<KvLayer> layers = {to_device(be, h)};
  be.copy_blocks(layers, {{1, 4}, {3, 0}});
  for (auto [t, ht] : {std::pair{&layers[0].k, &h.k}, {&layers[0].v, &h.v}, {&layers[0].k_scale, &h.k_scale},
                       {&layers[0].v_scale, &h.v_scale}}) {
    const std::vector<uint8_t> got = device_bytes(be, *t);
    const size_t bb = ht->nbytes() / size_t(ht->dim(0));
    const uint8_t* src = static_cast<const uint8_t*>(ht->data);
    CHECK(std::memcmp(got.data() + 4 * bb, src + 1 * bb, bb) == 0);
    CHECK(std::memcmp(got.data() + 0 * bb, src + 3 * bb, bb) == 0);
    CHECK(std::memcmp(got.data() + 2 * bb, src + 2 * bb, bb) == 0);  // untouched
  }
}

TEST_CASE("cuda: the backend has int8 and fp8 KV caches") {
  CudaBackend& be = backend(DType::BF16);
  CHECK(be.caps().supports_kv_cache(KvCacheDtype::Auto));
  CHECK(be.caps().supports_kv_cache(KvCacheDtype::Int8));
  CHECK(be.caps().supports_kv_cache(KvCacheDtype::Fp8));
  CHECK(be.caps().supports_kv_exact_rows(KvCacheDtype::Fp8));
}
