// GGUF checkpoints whose linears stay quantized (LoadOptions::keep_quantized) end to end: a random
// tiny Llama written as GGUF Q4_0 / Q8_0 / Q2_K / Q3_K / Q4_K / Q6_K / IQ4_NL / IQ4_XS (and a Q4_K_M-like mix with an untied Q8_0
// lm_head) loads every linear as an Int4Group / Int8Group LinearWeight in canonical form, and the
// model built from them gives the logits of the same file dequantized to dense f32 at load, bit
// for bit (CanonicalRecordingBackend stands in for quantized kernels: it runs the canonical weights
// dequantized by its own reading; the GGUF conversions are exact). The q/k row permutation of
// llama.cpp is undone on quantized rows (a wrong order would change the logits). A backend without
// the formats loads the same checkpoint dense, with the same logits.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <random>
#include <string>

#include "engine/model/checkpoint.h"
#include "engine/model/registry.h"
#include "engine/model/llama/llama_weight_map.h"
#include "engine/model/weights/load_weights.h"
#include "engine/model/weights/megatron_split.h"
#include "quant/format/group_affine.h"
#include "quant_gguf_model.h"
#include "quant_load_util.h"
#include "skip.h"

using namespace llmctl;
using namespace llmctl::test;
using namespace llmctl::test::qgguf;


TEST_CASE("quantized GGUF: linears load as canonical Int4Group / Int8Group and give the dense logits") {
  Layout mixed{"Q4_K_M-like mix", {}, kQ8_0};
  mixed.types = {{"attn_q", kQ4_K}, {"attn_k", kQ4_K}, {"attn_v", kQ6_K}, {"attn_output", kQ5_K},
                 {"ffn_gate", kQ4_1}, {"ffn_up", kQ5_0}, {"ffn_down", kQ5_1}};
  const Layout layouts[] = {uniform("Q4_0", kQ4_0),     uniform("Q8_0", kQ8_0),     uniform("Q4_K", kQ4_K),
                            uniform("Q6_K", kQ6_K),     uniform("IQ4_NL", kIQ4_NL), uniform("IQ4_XS", kIQ4_XS),
                            uniform("Q2_K", kQ2_K),     uniform("Q3_K", kQ3_K),     mixed};
  ScratchDir dir("qload_gguf");
  uint32_t seed = 40;
  for (const Layout& layout : layouts) {
    INFO(layout.label);
    const std::string path = dir.file("m.gguf");
    write_bytes(path, build_gguf(layout, ++seed));

    const Checkpoint dense = load_checkpoint(path);  // dequantized at load, as before
    CHECK(dense.quantized.empty());
    const Checkpoint q = load_checkpoint(path, keep());
    CHECK(q.quantized.size() == size_t(7 * L + (layout.output ? 1 : 0)));
    for (const auto& [name, t] : q.tensors) CHECK_MESSAGE(name.find("_proj.weight") == std::string::npos, name);
    CHECK(q.tensors.count("model.embed_tokens.weight") == 1);  // a table: dense

    CanonicalRecordingBackend rec;
    auto qmodel = make_model(q, rec);
    REQUIRE(rec.uploaded.size() == size_t(4 * L + (layout.output ? 1 : 0)));  // qkv, o, gate_up, down (+ lm_head)
    for (const LinearWeight& w : rec.uploaded) {
      const bool four = layout.label == "Q4_0" || layout.label == "Q4_K" || layout.label == "Q2_K";
      const bool sixteen = layout.label == "Q6_K" || layout.label == "Q2_K" || layout.label == "Q3_K";
      if (layout.label != mixed.label) CHECK(w.format == (four ? WeightFormat::Int4Group : WeightFormat::Int8Group));
      if (layout.label != mixed.label) CHECK(w.group_size == (sixteen ? 16 : 32));
      // Q4_0 / Q8_0: d and -8 d are f16 values; K-quant scales d * sc generally are not.
      if (layout.label == "Q4_0" || layout.label == "Q8_0") CHECK(w.scales.dtype == DType::F16);
      if (layout.label == "Q4_K" || layout.label == "Q6_K") CHECK(w.scales.dtype == DType::F32);
    }
    if (layout.label == mixed.label) {
      // Load order: lm_head (Q8_0), then per layer qkv, o, gate_up, down. qkv fuses Q4_K q/k with a
      // Q6_K v: widened to 8 bits, groups of 16; gate_up Q4_1 + Q5_0: 8 bits, groups of 32.
      CHECK(rec.uploaded[0].n == V);
      CHECK(rec.uploaded[1].format == WeightFormat::Int8Group);
      CHECK(rec.uploaded[1].group_size == 16);
      CHECK(rec.uploaded[1].n == (NH + 2 * NKV) * HD);
      CHECK(rec.uploaded[3].format == WeightFormat::Int8Group);
      CHECK(rec.uploaded[3].group_size == 32);
    }

    auto cpu = make_cpu_backend(1);
    auto dmodel = make_model(dense, *cpu);
    const std::vector<int32_t> tokens = prompt(seed);
    const std::vector<float> want = prefill_logits(*dmodel, tokens), got = prefill_logits(*qmodel, tokens);
    CHECK(relative_max_diff(got, want) == 0.0);  // exact conversions, the same dense kernel
    bool finite = true;
    for (float x : want) finite &= std::isfinite(x);
    CHECK(finite);

    // A backend without the quantized formats: the same checkpoint loads dense (one note on stderr).
    if (!cpu->caps().supports(WeightFormat::Int4Group) && !cpu->caps().supports(WeightFormat::Int8Group)) {
      auto fallback = make_model(q, *cpu);
      CHECK(relative_max_diff(prefill_logits(*fallback, tokens), want) == 0.0);
    }
  }
}

TEST_CASE("quantized GGUF: the default model's Q4_1 file keeps its linears Int4Group, values and logits as dense") {
  const char* home = std::getenv("LLMCTL_HOME");
  const std::string base = home ? home : std::string(std::getenv("HOME") ? std::getenv("HOME") : "") + "/.cache/llmctl";
  const std::string path = base + "/models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf";
  if (!std::filesystem::exists(path)) LLMCTL_SKIP(path << " is absent (scripts/fetch-model.sh fetches the default model)");
  std::vector<int32_t> tokens = {1, 504, 3458, 282, 4649, 314, 253, 1345};
  std::vector<float> want;
  {
    const Checkpoint dense = load_checkpoint(path);
    const Checkpoint q = load_checkpoint(path, keep());
    // every linear, and the tied lm_head as a quantized copy of the Q8_0 embedding table
    CHECK(q.quantized.size() == 7 * 30 + 1);
    for (const auto& [name, e] : q.quantized) {  // real blocks, q/k rows unpermuted: the dense values
      INFO(name);
      CHECK(e.is_deferred());  // decoded when first read, not at load
      const quant::GroupAffineWeight& w = e.weight();
      const Tensor& d = dense.get(name == "lm_head.weight" ? "model.embed_tokens.weight" : name);
      REQUIRE(d.shape == std::vector<int64_t>{w.n, w.k});
      const std::vector<float> v = quant::dequantize(w);
      CHECK(std::memcmp(v.data(), d.data, d.nbytes()) == 0);
    }
    auto cpu = make_cpu_backend(2);
    want = prefill_logits(*make_model(dense, *cpu), tokens);
    CanonicalRecordingBackend rec;
    const std::vector<float> got = prefill_logits(*make_model(q, rec), tokens);
    REQUIRE(rec.uploaded.size() == 4 * 30 + 1);
    int int4 = 0, int8 = 0;
    for (const LinearWeight& w : rec.uploaded) {
      (w.format == WeightFormat::Int4Group ? int4 : int8) += 1;
      CHECK(w.group_size == 32);
      CHECK(w.scales.dtype == DType::F16);  // Q4_1's d and m, Q8_0's d: f16 values
    }
    CHECK(int4 == 4 * 30);  // the layers' Q4_1 linears
    CHECK(int8 == 1);       // the lm_head over the Q8_0 embedding
    CHECK(relative_max_diff(got, want) == 0.0);
  }
}

TEST_CASE("quantized GGUF: a tensor-parallel rank decodes only its rows, the rows of the whole tensor") {
  Layout mixed{"Q4_K_M-like mix, Q8_0 lm_head", {}, kQ8_0};
  mixed.types = {{"attn_q", kQ4_K}, {"attn_k", kQ4_K}, {"attn_v", kQ6_K}, {"attn_output", kQ5_K},
                 {"ffn_gate", kQ4_1}, {"ffn_up", kQ5_0}, {"ffn_down", kQ5_1}};
  Layout tied = uniform("Q4_0, tied Q8_0 table", kQ4_0);
  tied.embed = kQ8_0;
  ScratchDir dir("qload_gguf_rows");
  uint32_t seed = 70;
  for (const Layout& layout : {mixed, tied}) {
    INFO(layout.label);
    const std::string path = dir.file("m.gguf");
    write_bytes(path, build_gguf(layout, ++seed));
    const Checkpoint whole = load_checkpoint(path, keep());  // each entry decoded whole below
    for (const auto& [name, e] : whole.quantized) {
      INFO(name);
      const Checkpoint fresh = load_checkpoint(path, keep());
      const QuantizedEntry& d = fresh.quantized.at(name);
      REQUIRE(d.is_deferred());
      const std::vector<quant::IndexRange> ranges = {{e.n() / 2, e.n() / 4}, {1, 3}, {e.n() - 1, 1}};
      const quant::GroupAffineWeight got = d.rows(ranges);
      CHECK(d.is_deferred());  // only those rows were decoded
      const quant::GroupAffineWeight want = quant::select_rows(e.weight(), ranges);
      CHECK(got.n == want.n);
      CHECK(got.bits == want.bits);
      CHECK(got.group == want.group);
      CHECK(got.codes == want.codes);
      CHECK(got.scale == want.scale);
      CHECK(got.offset == want.offset);
      // A row-parallel rank's input columns, ranges cutting blocks: the blocks holding them alone
      // (q and k, whose rows are permuted at load, decode whole), those columns of the whole.
      const Checkpoint again = load_checkpoint(path, keep());
      const QuantizedEntry& dc = again.quantized.at(name);
      const std::vector<quant::IndexRange> cols = {{e.k() / 2 + 8, e.k() / 4}, {1, 40}, {e.k() - 3, 3}};
      const quant::GroupAffineWeight gotc = dc.columns(cols);
      const bool permuted = name.find("q_proj") != std::string::npos || name.find("k_proj") != std::string::npos;
      CHECK(dc.is_deferred() == !permuted);
      const quant::GroupAffineWeight wantc = quant::select_columns(e.weight(), cols);
      CHECK(gotc.k == wantc.k);
      CHECK(gotc.group == wantc.group);
      CHECK(gotc.codes == wantc.codes);
      CHECK(gotc.scale == wantc.scale);
      CHECK(gotc.offset == wantc.offset);
    }
    // Every rank's slice of every linear, from deferred entries, equals the slice of the decoded ones.
    const auto all = llama_weight_sources(whole.config);
    for (int rank = 0; rank < 2; ++rank)
      for (const WeightSource& src : all) {
        if (src.role == WeightRole::Norm || src.role == WeightRole::QkvBias || !whole.quantized.count(src.parts[0])) continue;
        INFO(src.name << " rank " << rank);
        const ShardSpec spec = megatron_shard(src.role, whole.config, rank, 2);
        const Checkpoint fresh = load_checkpoint(path, keep());
        std::string why_a, why_b;
        const auto a = gather_quantized_shard(fresh, src, spec, &why_a);
        const auto b = gather_quantized_shard(whole, src, spec, &why_b);
        REQUIRE_MESSAGE(a.has_value(), why_a);
        REQUIRE_MESSAGE(b.has_value(), why_b);
        CHECK(a->codes == b->codes);
        CHECK(a->scale == b->scale);
        CHECK(a->offset == b->offset);
      }
  }
}
