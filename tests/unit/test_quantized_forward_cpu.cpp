// The CPU backend's quantized kernels end to end: the GGUF tiny Llamas of test_quantized_load.cpp,
// loaded with their linears quantized and run on the CPU backend itself, give the logits of the same
// files dequantized to dense f32 within f32 summation-order tolerance. Needs the CPU backend to run
// Int4Group / Int8Group (kernels/cpu/qlinear.h, Backend::upload_quantized on the CPU backend):
// SKIPPED until it does. The tolerance assumes the exact activation mode (ActQuant::None: f32
// activations); with int8 activations (ActQuant::Int8) the difference is a quantization error and
// this bound does not hold -- select ActQuant::None here if the CPU backend's default is Int8.
#include <doctest/doctest.h>

#include <string>

#include "engine/model/checkpoint.h"
#include "engine/model/registry.h"
#include "quant_gguf_model.h"
#include "quant_load_util.h"
#include "skip.h"

using namespace llmctl;
using namespace llmctl::test;
using namespace llmctl::test::qgguf;

TEST_CASE("quantized GGUF on the CPU backend's kernels: the dense logits within f32 summation tolerance") {
  auto cpu = make_cpu_backend(2, ActQuantMode::None);  // exact activations: the bound below
  if (!cpu->caps().supports(WeightFormat::Int4Group) || !cpu->caps().supports(WeightFormat::Int8Group))
    LLMCTL_SKIP("backend " << cpu->name() << " does not run int4-group / int8-group weights yet");
  Layout mixed{"Q4_K_M-like mix", {}, kQ8_0};
  mixed.types = {{"attn_q", kQ4_K}, {"attn_k", kQ4_K}, {"attn_v", kQ6_K}, {"attn_output", kQ5_K},
                 {"ffn_gate", kQ4_1}, {"ffn_up", kQ5_0}, {"ffn_down", kQ5_1}};
  // Tied tables in a block type: one packed copy serves the lm_head and the embedding lookup.
  Layout tied_q8 = uniform("Q4_0, tied Q8_0 table", kQ4_0), tied_q4k = uniform("Q6_K, tied Q4_K table", kQ6_K);
  Layout tied_iq4 = uniform("IQ4_XS, tied IQ4_NL table", kIQ4_XS);  // codebooks (AVX2): both ends
  tied_q8.embed = kQ8_0, tied_q4k.embed = kQ4_K, tied_iq4.embed = kIQ4_NL;
  // An untied table in a block type (as llama-quantize writes most models' token_embd): packed too.
  Layout untied_q6k = uniform("Q4_K, untied Q6_K table, Q8_0 output", kQ4_K);
  untied_q6k.embed = kQ6_K, untied_q6k.output = kQ8_0;
  // The IQ grid and ternary formats (8-bit codes: a codebook of at most 16 values, narrow 4-bit codes),
  // fused q / k / v and gate / up of different forms run part by part; a tied IQ2_XS table.
  Layout grids{"IQ grid and ternary mix", {}, kIQ2_S};
  grids.types = {{"attn_q", kIQ2_XXS}, {"attn_k", kIQ3_XXS}, {"attn_v", kIQ1_S},  {"attn_output", kIQ3_S},
                 {"ffn_gate", kIQ1_M},  {"ffn_up", kTQ1_0},   {"ffn_down", kTQ2_0}};
  Layout tied_iq2 = uniform("IQ2_XS, tied IQ2_XS table", kIQ2_XS);
  tied_iq2.embed = kIQ2_XS;
  const Layout layouts[] = {uniform("Q4_0", kQ4_0),     uniform("Q8_0", kQ8_0),     uniform("Q4_K", kQ4_K),
                            uniform("Q6_K", kQ6_K),     uniform("Q2_K", kQ2_K),     uniform("Q3_K", kQ3_K),
                            uniform("IQ4_NL", kIQ4_NL), mixed,                      tied_q8,
                            tied_q4k,                   tied_iq4,                   untied_q6k,
                            grids,                      tied_iq2};
  ScratchDir dir("qfwd_cpu");
  uint32_t seed = 70;
  for (const Layout& layout : layouts) {
    INFO(layout.label);
    const std::string path = dir.file("m.gguf");
    write_bytes(path, build_gguf(layout, ++seed));
    auto dmodel = make_model(load_checkpoint(path), *cpu);
    const Checkpoint qck = load_checkpoint(path, keep());
    auto qmodel = make_model(qck, *cpu);
    // A tied block-type table: the packed copy serves both ends, and the float table (dequantized
    // into its own buffer at load) is left to the checkpoint; the CPU backend would share it with
    // the model if the model embedded from it.
    const bool tied_packed = layout.embed != 0 && layout.output == 0;
    CHECK(qck.quantized.count("lm_head.weight") == size_t(tied_packed || layout.output));
    if (tied_packed) {
      CHECK(qck.get("model.embed_tokens.weight").owner.use_count() == 1);
      // Only a GGUF's tied copy is the table itself: from an HF checkpoint, a quantized lm_head
      // approximates its table, and the model embeds from the float table (shared with it here).
      Checkpoint hf = load_checkpoint(path, keep());
      hf.source_format = "hf";
      auto hmodel = make_model(hf, *cpu);
      CHECK(hf.get("model.embed_tokens.weight").owner.use_count() == 2);
    }
    // LoadOptions::quantized_embedding (what the runtime asks for such a backend): the float table
    // of a block type is never made (tied: the lm_head's copy; untied: its own packed table), and
    // the model is the same, bit for bit.
    LoadOptions packed_only = keep();
    packed_only.quantized_embedding = true;
    const Checkpoint pck = load_checkpoint(path, packed_only);
    CHECK(pck.has("model.embed_tokens.weight") == (layout.embed == 0));
    CHECK(pck.quantized.count("model.embed_tokens.weight") == size_t(layout.embed != 0 && !tied_packed));
    CHECK(pck.quantized.count("lm_head.weight") == qck.quantized.count("lm_head.weight"));
    CHECK(pck.notes == qck.notes);
    auto pmodel = make_model(pck, *cpu);
    // Checkpoint::release_after_upload (the runtime's): every quantized entry is freed once on the
    // backend, the model is the same, and a second model from the checkpoint is refused by name.
    Checkpoint rck = load_checkpoint(path, packed_only);
    rck.release_after_upload = true;
    auto rmodel = make_model(rck, *cpu);
    size_t left = 0;
    for (const auto& [name, e] : rck.quantized) left += !e.released();
    CHECK(!rck.quantized.empty());
    CHECK(left == 0);
    std::string second;
    try {
      (void)make_model(rck, *cpu);
    } catch (const std::exception& e) {
      second = e.what();
    }
    INFO("second load: " << second);
    CHECK(second.find("already loaded and released") != std::string::npos);
    const std::vector<int32_t> tokens = prompt(seed);
    const std::vector<float> want = prefill_logits(*dmodel, tokens), got = prefill_logits(*qmodel, tokens);
    CHECK(relative_max_diff(prefill_logits(*pmodel, tokens), got) == 0.0);
    CHECK(relative_max_diff(prefill_logits(*rmodel, tokens), got) == 0.0);
    const double diff = relative_max_diff(got, want);
    MESSAGE(layout.label << ": max |logit difference| / (1 + max |logit|) = " << diff);
    CHECK(diff < 1e-4);
  }
}
