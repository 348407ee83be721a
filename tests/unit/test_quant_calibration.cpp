// Calibration samples (quant/algo/calibration_data.h) and the calibration forward
// (quant/algo/calibration_forward.h): seeded windows of the given files; clear errors for missing,
// empty or malformed files; the layer-by-layer forward equals the engine's model forward.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "byte_tokenizer.h"
#include "engine/backend/backend.h"
#include "engine/core/error.h"
#include "engine/model/layers/moe_block.h"
#include "engine/model/random_checkpoint.h"
#include "quant/algo/calibration_data.h"
#include "quant/algo/family_calibration.h"
#include "tiny_config.h"

using namespace llmctl;

namespace {

std::string write_tmp(const std::string& name, const std::string& text) {
  const std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/llmctl-calib-" + name;
  std::ofstream(path) << text;
  return path;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no InputError)";
}

}  // namespace

TEST_CASE("calibration samples: seeded windows of the files, the same for the same seed") {
  test::ByteTokenizer tok;
  std::string text;
  for (int i = 0; i < 400; ++i) text += char('a' + (i * 7) % 26);
  const std::string f = write_tmp("a.txt", text);
  quant::CalibrationOptions o;
  o.files = {f};
  o.samples = 12;
  o.seq_len = 32;
  o.seed = 5;
  auto a = quant::draw_calibration_samples(o, tok), b = quant::draw_calibration_samples(o, tok);
  REQUIRE(a.size() == 12);
  CHECK(a == b);
  const std::vector<int> all = tok.encode(text, false);
  int distinct_starts = 0;
  std::vector<int> seen;
  for (const auto& s : a) {
    REQUIRE(s.size() == 32);
    // every sample is a contiguous window of the stream
    bool found = false;
    for (size_t st = 0; st + 32 <= all.size() && !found; ++st)
      if (std::equal(s.begin(), s.end(), all.begin() + long(st))) {
        found = true;
        if (std::find(seen.begin(), seen.end(), int(st)) == seen.end()) seen.push_back(int(st)), ++distinct_starts;
      }
    CHECK(found);
  }
  CHECK(distinct_starts >= 6);  // drawn, not one window repeated
  o.seed = 6;
  CHECK(quant::draw_calibration_samples(o, tok) != a);
}

TEST_CASE("calibration samples: JSONL text fields; bad input is a clear error") {
  test::ByteTokenizer tok;
  const std::string j = write_tmp("b.jsonl", "{\"text\": \"" + std::string(100, 'x') + "\"}\n\n{\"text\": \"yy\"}\n");
  quant::CalibrationOptions o;
  o.files = {j};
  o.samples = 3;
  o.seq_len = 50;
  auto s = quant::draw_calibration_samples(o, tok);
  REQUIRE(s.size() == 3);
  CHECK(s[0][0] == tok.encode("x", false)[0]);

  quant::CalibrationOptions none = o;
  none.files.clear();
  CHECK(error_of([&] { quant::draw_calibration_samples(none, tok); }).find("--calib") != std::string::npos);
  quant::CalibrationOptions missing = o;
  missing.files = {"/nonexistent/calib.txt"};
  CHECK(error_of([&] { quant::draw_calibration_samples(missing, tok); }).find("cannot read") != std::string::npos);
  quant::CalibrationOptions bad = o;
  bad.files = {write_tmp("c.jsonl", "{\"text\": 3}\n")};
  CHECK(error_of([&] { quant::draw_calibration_samples(bad, tok); }).find("line 1") != std::string::npos);
  quant::CalibrationOptions shortf = o;
  shortf.files = {write_tmp("d.txt", "short")};
  CHECK(error_of([&] { quant::draw_calibration_samples(shortf, tok); }).find("--calib-seq-len") != std::string::npos);
  quant::CalibrationOptions zero = o;
  zero.samples = 0;
  CHECK(error_of([&] { quant::draw_calibration_samples(zero, tok); }).find("--calib-samples") != std::string::npos);
}

// The family calibration of a Llama against a decoder written out here in double: each layer shows
// each linear its input once, equal to the reference's; the fp8 KV maxima too; each layer once, in order.
TEST_CASE("family calibration: layer by layer, each linear's input equals the reference decoder written out here") {
  ModelConfig c = test::tiny_llama_config(60, 2, 8);
  Checkpoint ck = random_checkpoint(c, 11, 0.3f);
  std::vector<std::vector<int32_t>> samples = {{1, 5, 9, 13, 2, 40, 7, 3, 8, 21, 33, 4, 6, 50, 11, 12, 17, 19},
                                               {3, 3, 3, 59, 0, 1, 2, 8, 9, 10, 30, 31, 32, 44, 45, 46, 47, 48}};
  quant::FamilyCalibration f(ck, samples);
  const int64_t T = f.tokens(), H = c.hidden_size, D = c.head_dim, Hq = c.num_heads, Hkv = c.num_kv_heads;
  const int64_t seq_len = int64_t(samples[0].size());
  REQUIRE(T == 36);
  Tensor x = Tensor::empty_host(DType::F32, {T, H});  // the first layer's input: the embedding rows
  for (int64_t t = 0; t < T; ++t)
    std::memcpy(x.ptr<float>() + t * H,
                ck.get("model.embed_tokens.weight").ptr<float>() + int64_t(samples[size_t(t / seq_len)][size_t(t % seq_len)]) * H,
                size_t(H) * sizeof(float));
  quant::KvAbsMax amax;
  std::vector<double> want_k_amax, want_v_amax;  // from the reference's rotated keys and values
  for (int l = 0; l < c.num_layers; ++l) {
    quant::DenseLayer L = quant::DenseLayer::from_checkpoint(ck, l);
    // reference: plain loops in double
    std::vector<double> ref(size_t(T * H)), xn(size_t(T * H)), att, hn(size_t(T * H)), act;
    {
      auto rms = [&](const float* v, const float* w, std::vector<double>& out) {
        for (int64_t t = 0; t < T; ++t) {
          double ss = 0;
          for (int64_t h = 0; h < H; ++h) ss += double(v[t * H + h]) * v[t * H + h];
          const double r = 1.0 / std::sqrt(ss / H + c.rms_norm_eps);
          for (int64_t h = 0; h < H; ++h) out[size_t(t * H + h)] = v[t * H + h] * r * w[h];
        }
      };
      auto mat = [&](const std::vector<double>& in, int64_t K, const Tensor& w, std::vector<double>& out) {
        const int64_t N = w.dim(0);
        out.assign(size_t(T * N), 0.0);
        for (int64_t t = 0; t < T; ++t)
          for (int64_t n = 0; n < N; ++n) {
            double a = 0;
            for (int64_t k = 0; k < K; ++k) a += in[size_t(t * K + k)] * w.ptr<float>()[n * K + k];
            out[size_t(t * N + n)] = a;
          }
      };
      std::vector<double> q, k, v;
      rms(x.ptr<float>(), L.input_norm.ptr<float>(), xn);
      mat(xn, H, L.q, q);
      mat(xn, H, L.k, k);
      mat(xn, H, L.v, v);
      auto rope = [&](std::vector<double>& m, int64_t heads) {
        for (int64_t t = 0; t < T; ++t) {
          const double pos = double(t % seq_len);
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t i = 0; i < D / 2; ++i) {
              const double th = pos * std::pow(double(c.rope_theta), -2.0 * double(i) / double(D));
              double& a = m[size_t(t * heads * D + h * D + i)];
              double& b = m[size_t(t * heads * D + h * D + i + D / 2)];
              const double a0 = a, b0 = b;
              a = a0 * std::cos(th) - b0 * std::sin(th);
              b = b0 * std::cos(th) + a0 * std::sin(th);
            }
        }
      };
      rope(q, Hq);
      rope(k, Hkv);
      want_k_amax.assign(size_t(Hkv), 0.0);
      want_v_amax.assign(size_t(Hkv), 0.0);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t i = 0; i < Hkv * D; ++i) {
          want_k_amax[size_t(i / D)] = std::max(want_k_amax[size_t(i / D)], std::fabs(k[size_t(t * Hkv * D + i)]));
          want_v_amax[size_t(i / D)] = std::max(want_v_amax[size_t(i / D)], std::fabs(v[size_t(t * Hkv * D + i)]));
        }
      att.assign(size_t(T * Hq * D), 0.0);
      const int64_t L_ = seq_len;
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < Hq; ++h) {
          const int64_t kh = h / (Hq / Hkv), s0 = (t / L_) * L_;
          std::vector<double> sc;
          double mx = -1e300;
          for (int64_t u = s0; u <= t; ++u) {
            double d = 0;
            for (int64_t i = 0; i < D; ++i) d += q[size_t(t * Hq * D + h * D + i)] * k[size_t(u * Hkv * D + kh * D + i)];
            sc.push_back(d / std::sqrt(double(D)));
            mx = std::max(mx, sc.back());
          }
          double z = 0;
          for (double& e : sc) z += (e = std::exp(e - mx));
          for (int64_t u = s0; u <= t; ++u)
            for (int64_t i = 0; i < D; ++i)
              att[size_t(t * Hq * D + h * D + i)] += sc[size_t(u - s0)] / z * v[size_t(u * Hkv * D + kh * D + i)];
        }
      std::vector<double> o, hs(size_t(T * H)), g, up, dn;
      mat(att, Hq * D, L.o, o);
      std::vector<float> hf(size_t(T * H));
      for (int64_t i = 0; i < T * H; ++i) hs[size_t(i)] = x.ptr<float>()[i] + o[size_t(i)], hf[size_t(i)] = float(hs[size_t(i)]);
      rms(hf.data(), L.mlp_norm.ptr<float>(), hn);
      mat(hn, H, L.gate, g);
      mat(hn, H, L.up, up);
      const int64_t I = c.intermediate_size;
      act.resize(size_t(T * I));
      for (int64_t i = 0; i < T * I; ++i) act[size_t(i)] = g[size_t(i)] / (1 + std::exp(-g[size_t(i)])) * up[size_t(i)];
      mat(act, I, L.down, dn);
      for (int64_t i = 0; i < T * H; ++i) ref[size_t(i)] = hs[size_t(i)] + dn[size_t(i)];
    }
    // the family's layer: each linear's input against the reference's
    const std::vector<double>* want[] = {&xn, &att, &hn, &act};
    std::vector<int> seen(4, 0);
    f.run_layer(
        l,
        [&](quant::LinearSite site, const Tensor& in, const Tensor&) {
          const quant::LinearGroup g = site.group;
          const std::vector<double>& w = *want[int(g)];
          ++seen[size_t(g)];
          REQUIRE(size_t(in.numel()) == w.size());
          double worst = 0;
          for (size_t i = 0; i < w.size(); ++i)
            worst = std::max(worst, std::fabs(in.ptr<float>()[i] - w[i]) / (1 + std::fabs(w[i])));
          CHECK(worst < 2e-5);
          return Tensor{};
        },
        &amax);
    CHECK(seen == std::vector<int>{1, 1, 1, 1});
    for (int64_t i = 0; i < T * H; ++i) x.ptr<float>()[i] = float(ref[size_t(i)]);  // the next layer's input
    // What fp8 KV scales are calibrated from: the maxima of the cached keys (after rope) and values.
    REQUIRE(amax.k.size() == size_t(Hkv));
    REQUIRE(amax.v.size() == size_t(Hkv));
    for (int64_t h = 0; h < Hkv; ++h) {
      CHECK(std::fabs(amax.k[size_t(h)] - want_k_amax[size_t(h)]) <= 1e-5 * (1 + want_k_amax[size_t(h)]));
      CHECK(std::fabs(amax.v[size_t(h)] - want_v_amax[size_t(h)]) <= 1e-5 * (1 + want_v_amax[size_t(h)]));
    }
  }
}

TEST_CASE("family calibration: a weight swapped in runs in place of the loaded one (true-sequential)") {
  ModelConfig c = test::tiny_llama_config(60, 2, 8);
  Checkpoint ck = random_checkpoint(c, 13, 0.3f);
  const std::vector<std::vector<int32_t>> samples = {{1, 5, 9, 13, 2, 40, 7, 3, 8, 21, 33, 4}};
  quant::FamilyCalibration fam(ck, samples);
  bool o_zero = false, later_seen = false;
  // q/k/v all zero: the values are zero, so o's input (the attention output) is zero
  fam.run_layer(0, [&](quant::LinearSite site, const Tensor& in, const Tensor& w) {
          const quant::LinearGroup g = site.group;
    if (g == quant::LinearGroup::Qkv) {
      Tensor z = Tensor::empty_host(DType::F32, w.shape);
      std::fill(z.ptr<float>(), z.ptr<float>() + z.numel(), 0.0f);
      return z;
    }
    if (g == quant::LinearGroup::O) {
      o_zero = true;
      for (int64_t i = 0; i < in.numel(); ++i) o_zero = o_zero && in.ptr<float>()[i] == 0.0f;
    }
    return Tensor{};
  });
  CHECK(o_zero);
  fam.run_layer(1, [&](quant::LinearSite, const Tensor&, const Tensor&) {
    later_seen = true;
    return Tensor{};
  });
  CHECK(later_seen);
}

TEST_CASE("family calibration: a probe runs the layer again on the same input, handing nothing on") {
  ModelConfig c = test::tiny_llama_config(60, 2, 8);
  Checkpoint ck = random_checkpoint(c, 14, 0.3f);
  const std::vector<std::vector<int32_t>> samples = {{1, 5, 9, 13, 2, 40, 7, 3, 8, 21, 33, 4}, {7, 7, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11}};
  auto keep = [](quant::LinearSite, const Tensor&, const Tensor&) { return Tensor{}; };
  // Layer 1's input with and without probes of layer 0 (one of them with trial weights) and of layer 1.
  auto layer1_input = [&](bool probes) {
    quant::FamilyCalibration f(ck, samples);
    f.begin_layer(0);
    std::vector<Tensor> o_inputs;
    if (probes) {
      for (int i = 0; i < 2; ++i)
        f.probe(
            [&](quant::LinearSite site, const Tensor& x, const Tensor&) {
          const quant::LinearGroup g = site.group;
              if (g == quant::LinearGroup::O) o_inputs.push_back(Tensor::empty_host(DType::F32, x.shape)),
                                                std::memcpy(o_inputs.back().data, x.data, x.nbytes());
              return Tensor{};
            },
            quant::LinearGroup::O);
      REQUIRE(o_inputs.size() == 2);
      CHECK(std::memcmp(o_inputs[0].data, o_inputs[1].data, o_inputs[0].nbytes()) == 0);  // the same input
      f.probe(
          [&](quant::LinearSite site, const Tensor&, const Tensor& w) {
            const quant::LinearGroup g = site.group;
            if (g != quant::LinearGroup::Qkv) return Tensor{};
            Tensor z = Tensor::empty_host(DType::F32, w.shape);
            std::fill(z.ptr<float>(), z.ptr<float>() + z.numel(), 0.0f);
            return z;
          },
          quant::LinearGroup::Down);
    }
    f.advance(keep);
    f.begin_layer(1);
    Tensor got;
    auto grab = [&](quant::LinearSite site, const Tensor& x, const Tensor&) {
          const quant::LinearGroup g = site.group;
      if (g == quant::LinearGroup::Qkv) got = Tensor::empty_host(DType::F32, x.shape), std::memcpy(got.data, x.data, x.nbytes());
      return Tensor{};
    };
    if (probes) f.probe(grab, quant::LinearGroup::Qkv);
    f.advance(grab);
    CHECK_THROWS(f.begin_layer(1));  // each layer once, in order
    return got;
  };
  const Tensor plain = layer1_input(false), probed = layer1_input(true);
  REQUIRE(plain.numel() == probed.numel());
  CHECK(std::memcmp(plain.data, probed.data, plain.nbytes()) == 0);
}

TEST_CASE("family calibration: a routed expert sees the rows of the tokens routed to it, and none runs unreached") {
  ModelConfig c = test::tiny_llama_config(60, 1, 8);
  c.architecture = "Qwen3MoeForCausalLM";
  c.qk_norm = true;
  c.num_experts = 8;
  c.experts_per_token = 2;
  c.moe_intermediate_size = 16;
  c.moe_renormalize = true;
  Checkpoint ck = random_checkpoint(c, 21, 0.5f);
  const Tensor router = ck.get("model.layers.0.mlp.gate.weight");  // [E, H]
  REQUIRE(router.dtype == DType::F32);
  const int64_t H = c.hidden_size, E = c.num_experts;
  for (const auto& samples : {std::vector<std::vector<int32_t>>{{1, 5, 9, 13, 2, 40, 7, 3, 8, 21, 33, 4}},
                              std::vector<std::vector<int32_t>>{{3}}}) {  // one token: 6 experts unreached
    quant::FamilyCalibration fam(ck, samples);
    const int64_t T = fam.tokens();
    std::vector<int64_t> gate_up_rows(static_cast<size_t>(E), -1), down_rows(static_cast<size_t>(E), -1);
    int64_t routed_rows = 0, wrong_expert = 0;
    fam.run_layer(0, [&](quant::LinearSite site, const Tensor& x, const Tensor&) {
      if (site.expert == quant::kNoExpert) return Tensor{};
      REQUIRE(site.expert >= 0);
      REQUIRE(site.expert < E);
      auto& rows = site.group == quant::LinearGroup::GateUp ? gate_up_rows : down_rows;
      CHECK(rows[size_t(site.expert)] == -1);  // once
      rows[size_t(site.expert)] = x.dim(0);
      if (site.group != quant::LinearGroup::GateUp) return Tensor{};
      // each row is an MLP input whose router logits put this expert in its top k
      for (int64_t r = 0; r < x.dim(0); ++r) {
        std::vector<float> logits(static_cast<size_t>(E));
        for (int64_t e = 0; e < E; ++e) {
          double d = 0;
          for (int64_t h = 0; h < H; ++h) d += double(x.ptr<float>()[r * H + h]) * router.ptr<float>()[e * H + h];
          logits[size_t(e)] = float(d);
        }
        const MoeRouting one = route_tokens(logits.data(), 1, int(E), c.experts_per_token, true);
        wrong_expert += one.tokens[size_t(site.expert)].empty();
        ++routed_rows;
      }
      return Tensor{};
    });
    CHECK(wrong_expert == 0);
    CHECK(routed_rows == T * c.experts_per_token);  // every token reached its k experts
    CHECK(gate_up_rows == down_rows);
    const int64_t unreached = std::count(gate_up_rows.begin(), gate_up_rows.end(), -1);
    CHECK(unreached == (T == 1 ? E - c.experts_per_token : unreached));
  }
}
