// Parity table rows for quantized KV caches (--kv-cache-dtype int8 / fp8): write_kv and
// rope_write_kv quantizing into the cache, attention reading it, copy_blocks moving the scales.
// Ops "kv_int8" and "kv_fp8"; a backend without the KV dtype (Backend::supports_kv_cache) is
// reported and left out. The references are written here from the formats' definitions
// (engine/kv/kv_cache_spec.h), not from the kernels: int8 x ~= (q + 128) * scale + zero with
// zero = min, scale = (max - min) / 255 per token and head; fp8 x ~= e4m3(q) * scale per head.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "backend_ops_paged.h"
#include "backend_ops_util.h"

namespace llmctl::backend_ops {

namespace {

// e4m3 decoded from its fields (sign, 4-bit exponent with bias 7, 3-bit mantissa; S.1111.111 NaN).
double e4m3_value(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return NAN;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

// The distance from v to the e4m3 grid (saturated at +-448).
double e4m3_nearest_gap(double v) {
  v = std::clamp(v, -448.0, 448.0);
  double best = INFINITY;
  for (int c = 0; c < 256; ++c)
    if (!std::isnan(e4m3_value(c))) best = std::min(best, std::fabs(e4m3_value(c) - v));
  return best;
}

// A host tensor of raw codes uploaded as they are.
template <typename T>
Tensor upload_codes(Ctx& c, DType dt, const std::vector<T>& codes, std::vector<int64_t> shape) {
  Tensor h = Tensor::empty_host(dt, std::move(shape));
  std::copy(codes.begin(), codes.end(), static_cast<T*>(h.data));
  return c.be.upload(h, dt);  // as stored: f32 scales stay f32 (a plain float upload becomes the compute dtype on CUDA)
}
Tensor upload_f32(Ctx& c, const std::vector<float>& v, std::vector<int64_t> shape) {
  return upload_codes<float>(c, DType::F32, v, std::move(shape));
}

// A random quantized cache of NB blocks: codes, scales, and its dequantized rows [NB*B*Hkv, D].
struct QuantCache {
  KvLayer layer;
  std::vector<float> k, v;  // dequantized
};
QuantCache random_quant_cache(Ctx& c, KvCacheDtype kind, int NB, int B, int Hkv, int D) {
  const size_t rows = size_t(NB) * B * Hkv;
  QuantCache q;
  q.layer.quant = kind;
  std::uniform_int_distribution<int> code(0, 255);
  std::uniform_real_distribution<float> unit(0.f, 1.f);
  for (int which = 0; which < 2; ++which) {
    std::vector<float>& deq = which ? q.v : q.k;
    deq.resize(rows * D);
    std::vector<float> scales;
    if (kind == KvCacheDtype::Int8) {
      std::vector<int8_t> codes(rows * D);
      for (size_t r = 0; r < rows; ++r) {
        const float scale = 0.002f + 0.01f * unit(c.rng), zero = -1.f + 0.5f * unit(c.rng);
        scales.insert(scales.end(), {scale, zero});
        for (int d = 0; d < D; ++d) {
          codes[r * D + d] = int8_t(code(c.rng) - 128);
          deq[r * D + d] = float(double(codes[r * D + d] + 128) * scale + zero);
        }
      }
      (which ? q.layer.v : q.layer.k) = upload_codes(c, DType::I8, codes, {NB, B, Hkv, D});
      (which ? q.layer.v_scale : q.layer.k_scale) = upload_f32(c, scales, {NB, B, Hkv, 2});
    } else {
      for (int h = 0; h < Hkv; ++h) scales.push_back(0.002f + 0.01f * unit(c.rng));
      std::vector<uint8_t> codes(rows * D);
      for (size_t r = 0; r < rows; ++r)
        for (int d = 0; d < D; ++d) {
          int x = code(c.rng);
          if ((x & 0x7f) == 0x7f) x ^= 1;  // never the NaN code
          codes[r * D + d] = uint8_t(x);
          deq[r * D + d] = float(e4m3_value(x) * scales[r % size_t(Hkv)]);
        }
      (which ? q.layer.v : q.layer.k) = upload_codes(c, DType::U8, codes, {NB, B, Hkv, D});
      (which ? q.layer.v_scale : q.layer.k_scale) = upload_f32(c, scales, {Hkv});
    }
  }
  return q;
}

// Attention over a quantized cache: the step's own k/v parts of qkv equal the dequantized cache rows
// at their slots (the result must not depend on whether a backend reads them from qkv or from the
// cache); the reference is plain double attention over the dequantized rows.
void attention_case(Ctx& c, KvCacheDtype kind, const char* what, int D, int Hq, int Hkv, int B,
                    const std::vector<Seq>& seqs, int window = 0, bool released = false) {
  int NB = 0;
  BatchPlan plan = paged_plan(seqs, B, c.rng, &NB);
  const int T = plan.num_tokens(), W = (Hq + 2 * Hkv) * D, G = Hq / Hkv;
  const float scale = 1.f / std::sqrt(float(D));
  QuantCache q = random_quant_cache(c, kind, NB, B, Hkv, D);
  Rand qkv_r = random_tensor(c, DType::F32, {T, W});
  std::vector<float> qkv = qkv_r.f;
  for (int t = 0; t < T; ++t)
    for (size_t i = 0; i < size_t(Hkv) * D; ++i) {
      const size_t cache_at = size_t(plan.slot_mapping[size_t(t)]) * Hkv * D + i;
      qkv[size_t(t) * W + size_t(Hq) * D + i] = q.k[cache_at];
      qkv[size_t(t) * W + size_t(Hq + Hkv) * D + i] = q.v[cache_at];
    }
  for (float& x : qkv) x = round_to(c.act(), x);
  Tensor qkv_dev = upload_f32(c, qkv, {T, W});
  if (c.act() != DType::F32) qkv_dev = c.be.upload(c.be.to_host_f32(qkv_dev), c.act());
  // released: the blocks before each sequence's window are -1, as a sliding pool holds them
  int released_blocks = 0;
  const BatchPlan run = released ? release_before_window(plan, window, B, &released_blocks) : plan;
  DeviceBatch b = c.be.prepare_batch(run);
  Tensor out = poisoned(c, c.act(), {T, Hq * D});
  c.be.attention(qkv_dev, q.layer, b, Hq, Hkv, scale, out, window);

  std::vector<double> ref(size_t(T) * Hq * D), s, acc(static_cast<size_t>(D));
  for (int sq = 0; sq < plan.num_seqs(); ++sq) {
    const int32_t* table = &plan.block_table[size_t(sq) * plan.max_blocks_per_seq];
    for (int t = plan.query_start[size_t(sq)]; t < plan.query_start[size_t(sq) + 1]; ++t) {
      const int n = plan.positions[size_t(t)] + 1;
      const int first = window > 0 ? std::max(0, n - window) : 0;  // a sliding window's first key
      s.assign(size_t(n), 0);
      for (int h = 0; h < Hq; ++h) {
        auto row = [&](const std::vector<float>& rows, int j) {
          return &rows[((size_t(table[j / B]) * B + j % B) * Hkv + size_t(h / G)) * D];
        };
        double m = -INFINITY, l = 0;
        for (int j = first; j < n; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += double(qkv[size_t(t) * W + size_t(h) * D + d]) * row(q.k, j)[d];
          s[size_t(j)] = dot * scale;
          m = std::max(m, s[size_t(j)]);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int j = first; j < n; ++j) {
          const double pj = std::exp(s[size_t(j)] - m);
          l += pj;
          for (int d = 0; d < D; ++d) acc[size_t(d)] += pj * row(q.v, j)[d];
        }
        for (int d = 0; d < D; ++d) ref[(size_t(t) * Hq + h) * D + d] = acc[size_t(d)] / l;
      }
    }
  }
  char tag[160];
  std::snprintf(tag, sizeof tag, "attention %-7s D=%d Hq=%d Hkv=%d B=%d window %d seqs %s%s", what, D, Hq, Hkv, B,
                window, seqs_str(seqs).c_str(),
                released ? (" (" + std::to_string(released_blocks) + " blocks released)").c_str() : "");
  c.close(tag, to_vec(c, out), ref);
}

// write_kv (or rope_write_kv) into a quantized cache: every written (slot, head) row is the rounding
// of its k/v row onto the format's grid; unwritten rows keep their old codes.
void write_case(Ctx& c, KvCacheDtype kind, bool fused, int D, int Hq, int Hkv, int B, const std::vector<Seq>& seqs) {
  int NB = 0;
  BatchPlan plan = paged_plan(seqs, B, c.rng, &NB);
  const int T = plan.num_tokens(), W = (Hq + 2 * Hkv) * D;
  Rand qkv = random_tensor(c, c.act(), {T, W}, -2.f, 2.f);
  QuantCache q = random_quant_cache(c, kind, NB, B, Hkv, D);  // old contents, to see what is untouched
  const std::vector<float> old_k = to_vec(c, q.layer.k);
  const std::vector<float> fp8_scales[2] = {kind == KvCacheDtype::Fp8 ? to_vec(c, q.layer.k_scale) : std::vector<float>{},
                                            kind == KvCacheDtype::Fp8 ? to_vec(c, q.layer.v_scale) : std::vector<float>{}};
  DeviceBatch b = c.be.prepare_batch(plan);
  const RopeParams p = rope_params(RopeKind::Llama3, D, 500000.0);
  if (fused) c.be.rope_write_kv(qkv.dev, b, p, Hq, Hkv, q.layer);
  else c.be.write_kv(qkv.dev, b, Hq, Hkv, q.layer);
  const std::vector<float> src = fused ? to_vec(c, qkv.dev) : qkv.f;  // the (rotated) rows written
  const std::string tag = std::string(fused ? "rope_write_kv" : "write_kv") + " D=" + std::to_string(D) +
                          " Hq=" + std::to_string(Hq) + " Hkv=" + std::to_string(Hkv) + " B=" + std::to_string(B) +
                          " seqs " + seqs_str(seqs);
  std::vector<bool> written(size_t(NB) * B * Hkv, false);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < Hkv; ++h) written[size_t(plan.slot_mapping[size_t(t)]) * Hkv + h] = true;
  for (int which = 0; which < 2; ++which) {
    const std::vector<float> codes = to_vec(c, which ? q.layer.v : q.layer.k);
    const std::vector<float> scales = to_vec(c, which ? q.layer.v_scale : q.layer.k_scale);
    double worst = 0;  // the largest excess over the grid's rounding bound, in units of it
    int bad_scale = 0;
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < Hkv; ++h) {
        const size_t row = size_t(plan.slot_mapping[size_t(t)]) * Hkv + h;
        const float* x = &src[size_t(t) * W + size_t(Hq + which * Hkv + h) * D];
        if (kind == KvCacheDtype::Int8) {
          const double lo = *std::min_element(x, x + D), hi = *std::max_element(x, x + D);
          const double scale = scales[row * 2], zero = scales[row * 2 + 1], want = (hi - lo) / 255.0;
          bad_scale += zero != lo || std::fabs(scale - want) > 1e-6 * want;
          for (int d = 0; d < D; ++d) {
            const double deq = (codes[row * D + d] + 128.0) * scale + zero;
            worst = std::max(worst, std::fabs(deq - x[d]) / (0.5 * want * (1 + 1e-4) + 1e-7));
          }
        } else {
          const double s = fp8_scales[which][size_t(h)];
          bad_scale += scales[size_t(h)] != float(s);  // fixed: never rewritten
          for (int d = 0; d < D; ++d) {
            const double v = x[d] / s, got = e4m3_value(int(codes[row * D + d]));
            const double err = std::fabs(got - std::clamp(v, -448.0, 448.0)), best = e4m3_nearest_gap(v);
            worst = std::max(worst, err <= best + 1e-6 * std::fabs(v) ? 0.0 : 2.0);
          }
        }
      }
    const char* name = which ? " v" : " k";
    c.expect(tag + name + " on the grid, nearest code", worst <= 1.0, "worst " + std::to_string(worst));
    c.expect(tag + name + " scales", bad_scale == 0, std::to_string(bad_scale) + " wrong");
  }
  std::vector<float> untouched_got, untouched_want;
  const std::vector<float> new_k = to_vec(c, q.layer.k);
  for (size_t r = 0; r < written.size(); ++r)
    if (!written[r])
      for (int d = 0; d < D; ++d) untouched_got.push_back(new_k[r * D + d]), untouched_want.push_back(old_k[r * D + d]);
  c.exact(tag + " unwritten k rows", untouched_got, untouched_want);
  if (fused) c.close(tag + " rotated qkv", src, rope_reference(qkv.f, plan.positions, p, Hq, Hkv));
}

// copy_blocks: the codes and, for int8, the per-token scales of block src land in block dst.
void copy_case(Ctx& c, KvCacheDtype kind, int NB, int B, int Hkv, int D) {
  std::vector<KvLayer> cache;
  std::vector<std::vector<float>> want;  // per layer: k, v, k_scale, v_scale
  for (int l = 0; l < 2; ++l) {
    cache.push_back(random_quant_cache(c, kind, NB, B, Hkv, D).layer);
    for (const Tensor* t : {&cache.back().k, &cache.back().v, &cache.back().k_scale, &cache.back().v_scale})
      want.push_back(to_vec(c, *t));
  }
  const std::vector<std::pair<int, int>> pairs = {{1, 4}, {NB - 1, 2}, {0, 3}};
  c.be.copy_blocks(cache, pairs);
  for (int l = 0; l < 2; ++l)
    for (int i = 0; i < 4; ++i) {
      std::vector<float>& w = want[size_t(4 * l + i)];
      const bool per_block = i < 2 || kind == KvCacheDtype::Int8;
      if (per_block) {
        const size_t block = w.size() / size_t(NB);
        for (auto [src, dst] : pairs) std::copy_n(w.begin() + long(src * block), block, w.begin() + long(dst * block));
      }
      const KvLayer& L = cache[size_t(l)];
      const Tensor* got[] = {&L.k, &L.v, &L.k_scale, &L.v_scale};
      const char* names[] = {" k", " v", " k scales", " v scales"};
      c.exact("copy_blocks layer " + std::to_string(l) + names[i], to_vec(c, *got[i]), w);
    }
}

const std::vector<Seq> kPrefill = {{0, 17}, {0, 5}, {0, 33}};
const std::vector<Seq> kDecode = {{0, 1}, {16, 1}, {40, 1}, {99, 1}};
const std::vector<Seq> kMixed = {{0, 17}, {31, 1}, {60, 23}, {15, 1}};
const std::vector<Seq> kLongDecode = {{300, 1}, {40, 1}, {0, 9}, {1100, 1}};  // long contexts beside short

}  // namespace

void add_kv_quant_cases(std::vector<OpCase>& t) {
  for (KvCacheDtype kind : {KvCacheDtype::Int8, KvCacheDtype::Fp8}) {
    const std::string op = std::string("kv_") + kv_cache_dtype_name(kind);
    t.push_back({op, "write_kv, rope_write_kv", [kind](Ctx& c) {
                   write_case(c, kind, false, 64, 9, 3, 16, kMixed);
                   write_case(c, kind, false, 128, 8, 1, 32, kPrefill);
                   write_case(c, kind, true, 64, 6, 2, 16, kDecode);
                 }});
    struct Heads { int D, Hq, Hkv; };
    for (Heads h : {Heads{64, 4, 4}, Heads{64, 6, 2}, Heads{128, 16, 2}})  // GQA ratios 1, 3, 8
      t.push_back({op, "attention G=" + std::to_string(h.Hq / h.Hkv), [kind, h](Ctx& c) {
                     attention_case(c, kind, "prefill", h.D, h.Hq, h.Hkv, 16, kPrefill);
                     attention_case(c, kind, "decode", h.D, h.Hq, h.Hkv, 16, kDecode);
                     attention_case(c, kind, "mixed", h.D, h.Hq, h.Hkv, 32, kMixed);
                     attention_case(c, kind, "long decode", h.D, h.Hq, h.Hkv, 16, kLongDecode);
                   }});
    t.push_back({op, "attention, sliding window 20", [kind](Ctx& c) {
                   attention_case(c, kind, "prefill", 64, 6, 2, 16, kPrefill, 20);
                   attention_case(c, kind, "mixed", 128, 16, 2, 32, kMixed, 20);
                   attention_case(c, kind, "chunks", 64, 6, 2, 16, {{40, 17}, {70, 9}, {21, 30}}, 20, true);
                   attention_case(c, kind, "decode", 128, 16, 2, 32, {{0, 1}, {40, 1}, {99, 1}}, 20, true);
                 }});
    t.push_back({op, "copy_blocks with scales", [kind](Ctx& c) { copy_case(c, kind, 7, 16, 2, 64); }});
  }
}

}  // namespace llmctl::backend_ops
