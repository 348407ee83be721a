// Parity table rows for the paged KV cache: write_kv, rope_write_kv, attention, copy_blocks.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

#include "backend_ops_paged.h"
#include "backend_ops_util.h"

namespace llmctl::backend_ops {

BatchPlan paged_plan(const std::vector<Seq>& seqs, int B, std::mt19937& rng, int* num_blocks) {
  int total = 0, widest = 0;
  for (Seq s : seqs) {
    const int nb = (s.before + s.fresh + B - 1) / B;
    total += nb;
    widest = std::max(widest, nb);
  }
  *num_blocks = 2 * total + 3;
  std::vector<int32_t> pool(static_cast<size_t>(*num_blocks));
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  BatchPlan p;
  p.max_blocks_per_seq = widest + 1;
  size_t next = 0;
  for (Seq s : seqs) {
    const int ctx = s.before + s.fresh, nb = (ctx + B - 1) / B;
    std::vector<int32_t> row(size_t(p.max_blocks_per_seq), -1);
    for (int i = 0; i < nb; ++i) row[size_t(i)] = pool[next], next += 2;  // every other id stays unused
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

BatchPlan release_before_window(const BatchPlan& plan, int window, int B, int* released) {
  BatchPlan run = plan;
  *released = 0;
  for (int q = 0; q < plan.num_seqs(); ++q) {
    if (plan.query_start[size_t(q)] == plan.query_start[size_t(q) + 1]) continue;
    const int gone = std::max(0, plan.positions[size_t(plan.query_start[size_t(q)])] - window + 1) / B;
    for (int j = 0; j < gone; ++j) run.block_table[size_t(q) * run.max_blocks_per_seq + size_t(j)] = -1;
    *released += gone;
  }
  return run;
}

std::string seqs_str(const std::vector<Seq>& seqs) {
  std::string s;
  for (Seq q : seqs) s += (s.empty() ? "" : ",") + std::to_string(q.before) + "+" + std::to_string(q.fresh);
  return s;
}

namespace {

// The cache rows [NB*B, Hkv, D] after writing the k and v parts of qkv at the plan's slots.
void write_reference(const BatchPlan& plan, const std::vector<float>& qkv, int Hq, int Hkv, int D,
                     std::vector<float>& k, std::vector<float>& v) {
  const size_t W = size_t(Hq + 2 * Hkv) * D, row = size_t(Hkv) * D;
  for (int t = 0; t < plan.num_tokens(); ++t) {
    const size_t dst = size_t(plan.slot_mapping[size_t(t)]) * row, src = size_t(t) * W + size_t(Hq) * D;
    std::copy_n(qkv.begin() + long(src), row, k.begin() + long(dst));
    std::copy_n(qkv.begin() + long(src + row), row, v.begin() + long(dst));
  }
}

void write_kv_case(Ctx& c, bool fused, int D, int Hq, int Hkv, int B, const std::vector<Seq>& seqs,
                   RopeKind kind = RopeKind::Llama3) {
  int NB = 0;
  BatchPlan plan = paged_plan(seqs, B, c.rng, &NB);
  const int T = plan.num_tokens(), W = (Hq + 2 * Hkv) * D;
  Rand qkv = random_tensor(c, c.act(), {T, W});
  KvLayer cache{poisoned(c, c.act(), {NB, B, Hkv, D}), poisoned(c, c.act(), {NB, B, Hkv, D})};
  DeviceBatch b = c.be.prepare_batch(plan);
  const RopeParams p = rope_params(kind, D, 500000.0);
  if (fused) c.be.rope_write_kv(qkv.dev, b, p, Hq, Hkv, cache);
  else c.be.write_kv(qkv.dev, b, Hq, Hkv, cache);
  const std::vector<float> rotated = to_vec(c, qkv.dev);  // fused: the qkv the op rotated
  // Every unwritten slot stays NaN; the written ones hold the (rotated) k and v rows.
  std::vector<float> k(size_t(NB) * B * Hkv * D, NAN), v = k;
  write_reference(plan, fused ? rotated : qkv.f, Hq, Hkv, D, k, v);
  const std::string tag = std::string(kind == RopeKind::Partial ? "partial rotary " : "") + "D=" + std::to_string(D) +
                          " Hq=" + std::to_string(Hq) +
                          " Hkv=" + std::to_string(Hkv) + " B=" + std::to_string(B) + " seqs " + seqs_str(seqs);
  c.exact(tag + " k", to_vec(c, cache.k), k);
  c.exact(tag + " v", to_vec(c, cache.v), v);
  if (fused) c.close(tag + " rotated qkv", rotated, rope_reference(qkv.f, plan.positions, p, Hq, Hkv));
}

// Attention alone: a random cache in which the step's own k/v rows equal those of qkv (so the
// result does not depend on whether a backend reads them from qkv or from the cache). window > 0:
// sliding-window attention, a token at p reading keys (p - window, p]. softcap > 0: scores s become
// softcap * tanh(s / softcap) (Gemma 2). released (with a window): the backend's block table has -1
// for each sequence's blocks wholly before its first token's window, as a sliding pool has released
// them (engine/kv/kv_cache_manager.h), so reading one would not give the reference.
void attention_case(Ctx& c, const char* kind, int D, int Hq, int Hkv, int B, const std::vector<Seq>& seqs,
                    int window = 0, float softcap = 0.f, bool released = false) {
  int NB = 0;
  BatchPlan plan = paged_plan(seqs, B, c.rng, &NB);
  const int T = plan.num_tokens(), W = (Hq + 2 * Hkv) * D, G = Hq / Hkv;
  const float scale = 1.f / std::sqrt(float(D));
  Rand qkv = random_tensor(c, c.act(), {T, W});
  std::vector<float> k, v;
  {
    Rand kr = random_tensor(c, c.act(), {NB, B, Hkv, D}), vr = random_tensor(c, c.act(), {NB, B, Hkv, D});
    k = kr.f, v = vr.f;
  }
  write_reference(plan, qkv.f, Hq, Hkv, D, k, v);
  auto upload = [&](const std::vector<float>& f) {
    Tensor h = Tensor::empty_host(DType::F32, {NB, B, Hkv, D});
    std::copy(f.begin(), f.end(), h.ptr<float>());
    return c.be.upload(h, c.act());
  };
  KvLayer cache{upload(k), upload(v)};
  int released_blocks = 0;
  const BatchPlan run = released ? release_before_window(plan, window, B, &released_blocks) : plan;  // what the backend reads
  run.validate(B, NB, window);
  DeviceBatch b = c.be.prepare_batch(run);
  Tensor out = poisoned(c, c.act(), {T, Hq * D});
  c.be.attention(qkv.dev, cache, b, Hq, Hkv, scale, out, window, softcap);

  std::vector<double> ref(size_t(T) * Hq * D), s, acc(static_cast<size_t>(D));
  for (int q = 0; q < plan.num_seqs(); ++q) {
    const int32_t* table = &plan.block_table[size_t(q) * plan.max_blocks_per_seq];
    for (int t = plan.query_start[size_t(q)]; t < plan.query_start[size_t(q) + 1]; ++t) {
      const int n = plan.positions[size_t(t)] + 1;  // causal: keys at positions <= its own
      const int first = window > 0 ? std::max(0, n - window) : 0;
      s.assign(size_t(n), 0);
      for (int h = 0; h < Hq; ++h) {
        const size_t kvh = size_t(h / G);
        auto row = [&](const std::vector<float>& cache_rows, int j) {
          return &cache_rows[((size_t(table[j / B]) * B + j % B) * Hkv + kvh) * D];
        };
        double m = -INFINITY, l = 0;
        for (int j = first; j < n; ++j) {
          double dot = 0;
          for (int d = 0; d < D; ++d) dot += double(qkv.f[size_t(t) * W + size_t(h) * D + d]) * row(k, j)[d];
          s[size_t(j)] = dot * scale;
          if (softcap > 0) s[size_t(j)] = softcap * std::tanh(s[size_t(j)] / softcap);
          m = std::max(m, s[size_t(j)]);
        }
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int j = first; j < n; ++j) {
          const double pj = std::exp(s[size_t(j)] - m);
          l += pj;
          for (int d = 0; d < D; ++d) acc[size_t(d)] += pj * row(v, j)[d];
        }
        for (int d = 0; d < D; ++d) ref[(size_t(t) * Hq + h) * D + d] = acc[size_t(d)] / l;
      }
    }
  }
  char tag[224];
  std::snprintf(tag, sizeof tag, "%-7s D=%d Hq=%d Hkv=%d (G=%d) B=%d window %d softcap %g seqs %s%s", kind, D, Hq,
                Hkv, G, B, window, double(softcap), seqs_str(seqs).c_str(),
                released ? (" (" + std::to_string(released_blocks) + " blocks released)").c_str() : "");
  c.close(tag, to_vec(c, out), ref);
}

void copy_blocks_case(Ctx& c, int layers, int NB, int B, int Hkv, int D) {
  std::vector<KvLayer> cache;
  std::vector<std::vector<float>> ref;
  for (int l = 0; l < layers; ++l) {
    Rand k = random_tensor(c, c.act(), {NB, B, Hkv, D}), v = random_tensor(c, c.act(), {NB, B, Hkv, D});
    cache.push_back({k.dev, v.dev});
    ref.push_back(k.f);
    ref.push_back(v.f);
  }
  const std::vector<std::pair<int, int>> pairs = {{1, 4}, {NB - 1, 2}, {1, NB - 2}, {0, 3}};
  c.be.copy_blocks(cache, pairs);
  const size_t block = size_t(B) * Hkv * D;
  for (auto& r : ref)
    for (auto [src, dst] : pairs) std::copy_n(r.begin() + long(src * block), block, r.begin() + long(dst * block));
  for (int l = 0; l < layers; ++l) {
    const std::string tag = "layer " + std::to_string(l) + " NB=" + std::to_string(NB) + " B=" + std::to_string(B) +
                            " Hkv=" + std::to_string(Hkv) + " D=" + std::to_string(D);
    c.exact(tag + " k", to_vec(c, cache[size_t(l)].k), ref[size_t(2 * l)]);
    c.exact(tag + " v", to_vec(c, cache[size_t(l)].v), ref[size_t(2 * l + 1)]);
  }
}

// Batches: prefill of several sequences (varlen), decode, and both in one step; contexts that are
// not multiples of the block size.
const std::vector<Seq> kPrefill = {{0, 17}, {0, 5}, {0, 33}};
const std::vector<Seq> kDecode = {{0, 1}, {16, 1}, {40, 1}, {99, 1}};
const std::vector<Seq> kMixed = {{0, 17}, {31, 1}, {60, 23}, {15, 1}};
const std::vector<Seq> kChunks = {{40, 17}, {70, 9}, {21, 30}};  // prefill chunks after a computed context
// Decode tokens with long contexts (the CPU spreads their attention over keys and columns from 256
// keys on AVX-512, 1024 on AVX2) beside short ones and a prefill in the same step.
const std::vector<Seq> kLongDecode = {{300, 1}, {40, 1}, {0, 9}, {1100, 1}, {255, 1}};

}  // namespace

void add_kv_cases(std::vector<OpCase>& t) {
  t.push_back({"write_kv", "slots in scattered blocks", [](Ctx& c) {
                 write_kv_case(c, false, 64, 9, 3, 16, kMixed);
                 write_kv_case(c, false, 128, 8, 1, 32, kPrefill);
               }});
  t.push_back({"rope_write_kv", "fused rope + write_kv", [](Ctx& c) {
                 write_kv_case(c, true, 64, 9, 3, 16, kMixed);
                 write_kv_case(c, true, 128, 4, 4, 16, kDecode);
                 write_kv_case(c, true, 64, 9, 3, 16, kMixed, RopeKind::Partial);
               }});
  struct Heads { int D, Hq, Hkv; };
  for (Heads h : {Heads{64, 4, 4}, Heads{64, 6, 2}, Heads{128, 16, 2}})  // GQA ratios 1, 3, 8
    for (int B : {16, 32})
      t.push_back({"attention", "G=" + std::to_string(h.Hq / h.Hkv) + " B=" + std::to_string(B), [h, B](Ctx& c) {
                     attention_case(c, "prefill", h.D, h.Hq, h.Hkv, B, kPrefill);
                     attention_case(c, "decode", h.D, h.Hq, h.Hkv, B, kDecode);
                     attention_case(c, "mixed", h.D, h.Hq, h.Hkv, B, kMixed);
                     attention_case(c, "long decode", h.D, h.Hq, h.Hkv, B, kLongDecode);
                   }});
  // Sliding windows: shorter than a block, between blocks, and longer than some contexts; a window
  // past the decode kernels' 32-key tiles and partitions (40, 99 keys).
  for (int window : {5, 20, 40})
    t.push_back({"attention", "sliding window " + std::to_string(window), [window](Ctx& c) {
                   attention_case(c, "prefill", 64, 6, 2, 16, kPrefill, window);
                   attention_case(c, "decode", 64, 6, 2, 16, kDecode, window);
                   attention_case(c, "mixed", 128, 16, 2, 32, kMixed, window);
                 }});
  // The same over tables whose blocks before each sequence's window are released (-1), as a
  // sliding layer's own pool holds them: the attention must not read them.
  for (int window : {5, 20, 40})
    t.push_back({"attention", "sliding window " + std::to_string(window) + ", blocks before it released",
                 [window](Ctx& c) {
                   attention_case(c, "chunks", 64, 6, 2, 16, kChunks, window, 0.f, true);
                   attention_case(c, "decode", 64, 6, 2, 16, kDecode, window, 0.f, true);
                   attention_case(c, "mixed", 128, 16, 2, 32, kMixed, window, 0.f, true);
                   attention_case(c, "decode", 64, 6, 2, 16, kDecode, window, 0.3f, true);
                   // blocks of 8 slots: the CPU reads windows in place only over blocks of a multiple of
                   // 16 (where its keys' count starts, kernels/cpu/attention.h); these go through its
                   // copy, whose rows before the window's first block are zeros
                   if (c.be.device() == Device::CPU) {
                     attention_case(c, "chunks", 64, 6, 2, 8, kChunks, window, 0.f, true);
                     attention_case(c, "decode", 64, 6, 2, 8, kDecode, window, 0.f, true);
                   }
                 }});
  // Soft-capped scores (Gemma 2): a cap near the scores' spread (random q, k: |s| up to about 1), so
  // tanh bends them; with and without a window.
  for (int window : {0, 20})
    t.push_back({"attention", "soft-capped scores, window " + std::to_string(window), [window](Ctx& c) {
                   attention_case(c, "prefill", 64, 6, 2, 16, kPrefill, window, 0.3f);
                   attention_case(c, "decode", 64, 6, 2, 16, kDecode, window, 0.3f);
                   attention_case(c, "mixed", 128, 16, 2, 32, kMixed, window, 0.3f);
                 }});
  t.push_back({"copy_blocks", "copy-on-write of blocks", [](Ctx& c) {
                 copy_blocks_case(c, 2, 9, 16, 2, 64);
                 copy_blocks_case(c, 1, 6, 32, 1, 128);
               }});
}

}  // namespace llmctl::backend_ops
