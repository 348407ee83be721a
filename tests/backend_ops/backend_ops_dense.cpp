// Parity table rows for the row-wise ops: embed, rms_norm, head_rms_norm, linear, rope, silu_mul, gelu_tanh_mul,
// scale, soft_cap, gather_rows, and
// the byte copies pipeline stages hand their activations over with.
#include <cmath>
#include <cstdio>
#include <string>

#include "backend_ops_util.h"
#include "engine/core/batch_plan.h"
#include "engine/model/model.h"

namespace llmctl::backend_ops {

namespace {

std::string str(const char* fmt, auto... args) {
  char buf[200];
  std::snprintf(buf, sizeof buf, fmt, args...);
  return buf;
}

// A plan with token ids, positions and logits rows only (no attention).
BatchPlan row_plan(std::vector<int32_t> ids, std::vector<int32_t> positions = {}, std::vector<int32_t> rows = {}) {
  BatchPlan p;
  const int T = int(ids.size());
  p.token_ids = std::move(ids);
  p.positions = positions.empty() ? std::vector<int32_t>(size_t(T), 0) : std::move(positions);
  for (int t = 0; t < T; ++t) p.slot_mapping.push_back(t);
  p.query_start = {0, T};
  p.context_len = {T};
  p.logits_rows = std::move(rows);
  return p;
}

// vocab_begin > 0: the table is a vocab-parallel shard of ids [vocab_begin, vocab_begin + V); ids
// below and above it (other ranks' shards) give zero rows.
void embed_case(Ctx& c, DType table_dt, int V, int H, int T, int vocab_begin = 0) {
  Rand table = random_tensor(c, table_dt, {V, H});
  std::vector<int32_t> ids(static_cast<size_t>(T));
  std::uniform_int_distribution<int> u(0, vocab_begin > 0 ? 2 * vocab_begin + V - 1 : V - 1);
  for (auto& i : ids) i = u(c.rng);
  ids[0] = vocab_begin, ids[size_t(T) - 1] = vocab_begin + V - 1;  // both ends of the table
  if (vocab_begin > 0) ids[1] = vocab_begin - 1, ids[2] = vocab_begin + V;  // just outside it
  BatchPlan plan = row_plan(ids);
  DeviceBatch b = c.be.prepare_batch(plan);
  Tensor out = poisoned(c, c.act(), {T, H});
  c.be.embed(table.dev, b, out, vocab_begin);
  std::vector<float> ref;
  for (int t = 0; t < T; ++t) {
    const int id = ids[size_t(t)] - vocab_begin;
    for (int h = 0; h < H; ++h) ref.push_back(id >= 0 && id < V ? round_to(c.act(), table.f[size_t(id) * H + h]) : 0.f);
  }
  c.exact(str("table %s [%d, %d] T=%d vocab_begin %d", dtype_name(table_dt), V, H, T, vocab_begin), to_vec(c, out), ref);
}

// Qwen3's q_norm / k_norm on a fused qkv [T, (hq + 2 hkv) D]: q and k heads normalized in place with
// their own weights, v heads left as they were (bit for bit).
void head_rms_norm_case(Ctx& c, int T, int D, int hq, int hkv) {
  const float eps = 1e-6f;
  const int W = (hq + 2 * hkv) * D;
  Rand qkv = random_tensor(c, c.act(), {T, W});
  Rand qw = random_tensor(c, DType::F32, {D}, 0.5f, 1.5f), kw = random_tensor(c, DType::F32, {D}, 0.5f, 1.5f);
  c.be.head_rms_norm(qkv.dev, qw.dev, kw.dev, eps, hq, hkv);
  std::vector<double> ref(qkv.f.begin(), qkv.f.end());
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < hq + hkv; ++h) {
      const size_t at = size_t(t) * W + size_t(h) * D;
      double ss = 0;
      for (int i = 0; i < D; ++i) ss += double(qkv.f[at + i]) * qkv.f[at + i];
      const double r = 1.0 / std::sqrt(ss / D + eps);
      for (int i = 0; i < D; ++i) ref[at + i] = qkv.f[at + i] * r * (h < hq ? qw : kw).f[size_t(i)];
    }
  const std::vector<float> got = to_vec(c, qkv.dev);
  c.close(str("T=%d D=%d heads %d + %d", T, D, hq, hkv), got, ref);
  bool v_same = true;
  for (int t = 0; t < T; ++t)
    for (int i = (hq + hkv) * D; i < W; ++i) v_same = v_same && got[size_t(t) * W + i] == qkv.f[size_t(t) * W + i];
  c.expect(str("v heads untouched (D=%d)", D), v_same);
}

void rms_norm_case(Ctx& c, int T, int H, bool with_residual) {
  const float eps = 1e-5f;
  Rand x = random_tensor(c, c.act(), {T, H}), w = random_tensor(c, DType::F32, {H}, 0.5f, 1.5f);
  Rand res = random_tensor(c, DType::F32, {T, H});  // the residual stream is f32 on every backend
  Tensor out = poisoned(c, c.act(), {T, H});
  c.be.rms_norm(x.dev, w.dev, eps, out, with_residual ? &res.dev : nullptr);
  std::vector<double> ref(size_t(T) * H), ref_res(size_t(T) * H);
  for (int t = 0; t < T; ++t) {
    double ss = 0;
    for (int i = 0; i < H; ++i) {
      const size_t k = size_t(t) * H + i;
      ref_res[k] = with_residual ? double(x.f[k]) + res.f[k] : x.f[k];
      ss += ref_res[k] * ref_res[k];
    }
    const double r = 1.0 / std::sqrt(ss / H + eps);
    for (int i = 0; i < H; ++i) ref[size_t(t) * H + i] = ref_res[size_t(t) * H + i] * r * w.f[size_t(i)];
  }
  const std::string tag = str("T=%d H=%d%s", T, H, with_residual ? " +residual" : "");
  c.close(tag, to_vec(c, out), ref);
  if (with_residual) {
    // residual += x, kept in f32: only f32 rounding of one sum per element
    std::vector<float> got = to_vec(c, res.dev);
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) num += (got[i] - ref_res[i]) * (got[i] - ref_res[i]), den += ref_res[i] * ref_res[i];
    c.expect(tag + " residual sum", std::isfinite(num) && std::sqrt(num / den) < 1e-6,
             str("rel %.3e", std::sqrt(num / den)));
  }
}

void linear_case(Ctx& c, DType wdt, int T, int K, int N, bool with_bias) {
  Rand x = random_tensor(c, c.act(), {T, K}), w = random_tensor(c, wdt, {N, K}), bias = random_tensor(c, DType::F32, {N});
  Tensor out = poisoned(c, c.act(), {T, N});
  c.be.linear(x.dev, w.dev, with_bias ? &bias.dev : nullptr, out);
  std::vector<double> ref(size_t(T) * N);
  for (int t = 0; t < T; ++t)
    for (int n = 0; n < N; ++n) {
      double acc = with_bias ? bias.f[size_t(n)] : 0.0;
      for (int k = 0; k < K; ++k) acc += double(x.f[size_t(t) * K + k]) * w.f[size_t(n) * K + k];
      ref[size_t(t) * N + n] = acc;
    }
  c.close(str("w %s T=%d K=%d N=%d%s", dtype_name(wdt), T, K, N, with_bias ? " +bias" : ""), to_vec(c, out), ref);
}

void rope_case(Ctx& c, RopeKind kind, const char* kind_name, int D, int Hq, int Hkv, int T) {
  const RopeParams p = rope_params(kind, D, kind == RopeKind::None ? 10000.0 : 500000.0);
  Rand qkv = random_tensor(c, c.act(), {T, (Hq + 2 * Hkv) * D});
  std::vector<int32_t> pos(static_cast<size_t>(T));
  std::uniform_int_distribution<int> u(0, 8191);
  for (auto& x : pos) x = u(c.rng);
  pos[0] = 0;
  BatchPlan plan = row_plan(std::vector<int32_t>(size_t(T), 1), pos);
  DeviceBatch b = c.be.prepare_batch(plan);
  c.be.rope(qkv.dev, b, p, Hq, Hkv);
  c.close(str("%s D=%d Hq=%d Hkv=%d T=%d", kind_name, D, Hq, Hkv, T), to_vec(c, qkv.dev),
          rope_reference(qkv.f, pos, p, Hq, Hkv));
}

void silu_mul_case(Ctx& c, int T, int I) {
  Rand gu = random_tensor(c, c.act(), {T, 2 * I}, -4.f, 4.f);
  Tensor out = poisoned(c, c.act(), {T, I});
  c.be.silu_mul(gu.dev, out);
  std::vector<double> ref(size_t(T) * I);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < I; ++i) {
      const double g = gu.f[size_t(t) * 2 * I + i], up = gu.f[size_t(t) * 2 * I + I + i];
      ref[size_t(t) * I + i] = g / (1.0 + std::exp(-g)) * up;
    }
  c.close(str("T=%d I=%d", T, I), to_vec(c, out), ref);
}

void gelu_tanh_mul_case(Ctx& c, int T, int I) {
  Rand gu = random_tensor(c, c.act(), {T, 2 * I}, -4.f, 4.f);
  Tensor out = poisoned(c, c.act(), {T, I});
  c.be.gelu_tanh_mul(gu.dev, out);
  std::vector<double> ref(size_t(T) * I);
  const double beta = std::sqrt(2.0 / M_PI);
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < I; ++i) {
      const double g = gu.f[size_t(t) * 2 * I + i], up = gu.f[size_t(t) * 2 * I + I + i];
      ref[size_t(t) * I + i] = 0.5 * g * (1.0 + std::tanh(beta * (g + 0.044715 * g * g * g))) * up;
    }
  c.close(str("T=%d I=%d", T, I), to_vec(c, out), ref);
}

void scale_case(Ctx& c, int T, int H, float s) {
  Rand x = random_tensor(c, c.act(), {T, H});
  c.be.scale(x.dev, s);
  std::vector<double> ref(x.f.begin(), x.f.end());
  for (double& v : ref) v *= s;
  c.close(str("[%d, %d] * %g", T, H, s), to_vec(c, x.dev), ref);
}

// Logits soft-capped in place: values from -4 cap to 4 cap, so tanh runs from nearly linear to saturated.
void soft_cap_case(Ctx& c, int T, int C, float cap) {
  Rand x = random_tensor(c, c.act(), {T, C}, -4 * cap, 4 * cap);
  c.be.soft_cap(x.dev, cap);
  std::vector<double> ref(x.f.begin(), x.f.end());
  for (double& v : ref) v = cap * std::tanh(v / cap);
  c.close(str("[%d, %d] cap %g", T, C, cap), to_vec(c, x.dev), ref);
}

void gather_rows_case(Ctx& c, int T, int C, DType out_dt) {
  Rand x = random_tensor(c, c.act(), {T, C});
  BatchPlan plan = row_plan(std::vector<int32_t>(size_t(T), 1), {}, {T - 1, 0, 3, 3, T / 2});  // repeats, any order
  DeviceBatch b = c.be.prepare_batch(plan);
  Tensor out = poisoned(c, out_dt, {int64_t(plan.logits_rows.size()), C});
  c.be.gather_rows(x.dev, b, out);
  std::vector<float> ref;
  for (int r : plan.logits_rows) ref.insert(ref.end(), x.f.begin() + size_t(r) * C, x.f.begin() + size_t(r + 1) * C);
  c.exact(str("x [%d, %d] -> out %s", T, C, dtype_name(out_dt)), to_vec(c, out), ref);
}

// copy_to_host gives x's bytes as stored; copy_from_host writes them into rows [2, 2 + T) of a
// larger buffer (a micro-batch's slice) and nothing else.
void copy_bytes_case(Ctx& c, int T, int C, DType dt) {
  Rand x = random_tensor(c, dt, {T, C});
  std::vector<uint8_t> bytes(x.dev.nbytes());
  c.be.copy_to_host(x.dev, bytes.data());
  Tensor back = convert_host(Tensor::view(bytes.data(), dt, {T, C}), DType::F32);
  c.exact(str("to host [%d, %d] %s", T, C, dtype_name(dt)), std::vector<float>(back.ptr<float>(), back.ptr<float>() + back.numel()), x.f);
  Tensor big = poisoned(c, dt, {T + 4, C});
  Tensor rows = row_slice(big, 2, T);
  c.be.copy_from_host(bytes.data(), rows);
  const std::vector<float> got = to_vec(c, big);
  c.exact(str("from host into rows [2, %d) of [%d, %d] %s", T + 2, T + 4, C, dtype_name(dt)),
          std::vector<float>(got.begin() + 2 * C, got.begin() + (T + 2) * C), x.f);
  bool untouched = true;
  for (int64_t i = 0; i < int64_t(got.size()); ++i)
    if (i < 2 * C || i >= (T + 2) * int64_t(C)) untouched = untouched && std::isnan(got[size_t(i)]);
  c.expect(str("rows outside the slice untouched (%s)", dtype_name(dt)), untouched);
}

}  // namespace

void add_dense_cases(std::vector<OpCase>& t) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    t.push_back({"embed", std::string("table ") + dtype_name(dt), [dt](Ctx& c) {
                   if (!contains(c.target.weight_dtypes, dt)) return;
                   embed_case(c, dt, 317, 72, 19);
                   embed_case(c, dt, 1000, 136, 1);
                   embed_case(c, dt, 250, 72, 23, 250);  // rank 1 of a vocab split 4 ways
                 }});
  for (int H : {64, 577, 2048})
    for (bool res : {false, true})
      t.push_back({"rms_norm", "H=" + std::to_string(H), [H, res](Ctx& c) {
                     rms_norm_case(c, 7, H, res);
                     rms_norm_case(c, 1, H, res);
                   }});
  t.push_back({"head_rms_norm", "q/k heads", [](Ctx& c) {
                 head_rms_norm_case(c, 5, 128, 4, 2);
                 head_rms_norm_case(c, 1, 64, 3, 1);
                 head_rms_norm_case(c, 9, 80, 2, 2);
               }});
  struct Shape { int T, K, N; };
  for (DType wdt : {DType::F32, DType::BF16, DType::F16})
    for (Shape s : {Shape{1, 64, 96}, Shape{7, 127, 33}, Shape{33, 300, 65}, Shape{3, 17, 9}, Shape{64, 576, 200}})
      for (bool bias : {false, true})
        t.push_back({"linear", std::string("w ") + dtype_name(wdt), [=](Ctx& c) {
                       if (!contains(c.target.weight_dtypes, wdt)) return;
                       linear_case(c, wdt, s.T, s.K, s.N, bias);
                     }});
  const std::pair<RopeKind, const char*> kinds[] = {
      {RopeKind::None, "plain"},
      {RopeKind::Linear, "linear x4"},
      {RopeKind::Llama3, "llama3 x8"},
      {RopeKind::LongRope, "longrope, long from 4096"},
      {RopeKind::Partial, "partial, D/4 turn"}};
  for (auto [kind, name] : kinds)
    t.push_back({"rope", name, [kind, name](Ctx& c) {
                   rope_case(c, kind, name, 64, 9, 3, 23);
                   rope_case(c, kind, name, 128, 8, 1, 5);
                   rope_case(c, kind, name, 128, 4, 4, 1);
                 }});
  t.push_back({"silu_mul", "odd and even I", [](Ctx& c) {
                 silu_mul_case(c, 9, 37);
                 silu_mul_case(c, 11, 344);
                 silu_mul_case(c, 1, 1536);
               }});
  t.push_back({"gelu_tanh_mul", "odd and even I", [](Ctx& c) {
                 gelu_tanh_mul_case(c, 9, 37);
                 gelu_tanh_mul_case(c, 11, 344);
                 gelu_tanh_mul_case(c, 1, 1536);
               }});
  t.push_back({"scale", "sqrt(hidden), an embedding scale", [](Ctx& c) {
                 scale_case(c, 7, 576, std::sqrt(576.f));
                 scale_case(c, 1, 33, 0.125f);
               }});
  t.push_back({"soft_cap", "Gemma 2's final logit soft-capping", [](Ctx& c) {
                 soft_cap_case(c, 3, 1000, 30.f);
                 soft_cap_case(c, 1, 33, 0.5f);
               }});
  t.push_back({"copy_bytes", "activations to and from the host", [](Ctx& c) {
                 copy_bytes_case(c, 13, 77, c.act());
                 copy_bytes_case(c, 5, 576, DType::F32);  // the f32 residual stream
               }});
  t.push_back({"gather_rows", "logits rows", [](Ctx& c) {
                 gather_rows_case(c, 11, 97, c.act());
                 if (c.act() != DType::F32) gather_rows_case(c, 11, 97, DType::F32);  // logits in f32
               }});
}

}  // namespace llmctl::backend_ops
