// llmctl quantize IN OUT: RTN / GPTQ / AWQ weights (and fp8 KV scales) into an HF directory in the
// compressed-tensors, AutoAWQ or GPTQ layout. The work is quant/algo/quantize_model.h.
#include <atomic>
#include <csignal>
#include <iostream>

#include "cli/commands.h"
#include "cli/engine_flags.h"
#include "engine/core/error.h"
#include "quant/algo/quantize_model.h"

namespace llmctl::cli {

namespace {
std::atomic<bool> g_stop{false};

extern "C" void on_quantize_sigint(int) {
  g_stop.store(true);
  std::signal(SIGINT, SIG_DFL);
}
}  // namespace

Runner add_quantize(CLI::App& app) {
  auto o = std::make_shared<quant::QuantizeOptions>();
  auto device = std::make_shared<std::string>("cpu");
  auto asym = std::make_shared<bool>(false);
  auto* s = app.add_subcommand("quantize", "quantize weights (RTN, GPTQ, AWQ; int4/int8) and calibrate fp8 KV scales, "
                                           "writing an HF directory vLLM and transformers load");
  s->add_option("input", o->input, "dense HF directory or .gguf file")->required();
  s->add_option("output", o->output, "output directory (written as OUT.part, renamed when complete)")->required();
  s->add_option("--method", o->method, "rtn, gptq or awq")->capture_default_str();
  s->add_option("--bits", o->scheme.bits, "4 or 8")->capture_default_str();
  s->add_option("--group-size", o->scheme.group_size, "inputs per scale: 128, 64, 32, or -1 for per channel")
      ->capture_default_str();
  s->add_flag("--sym", [o](int64_t) { o->scheme.symmetric = true; }, "symmetric (default)");
  s->add_flag("--asym", *asym, "asymmetric: a zero point per group");
  s->add_flag("--allow-requantize", o->allow_requantize,
              "accept a GGUF whose weights are already quantized (Q4_1, Q4_K, ...): dequantized, then rounded again");
  s->add_flag("--act-order", o->act_order, "gptq: quantize columns by descending Hessian diagonal (static groups)");
  s->add_option("--format", o->format, "compressed-tensors, awq (AutoAWQ GEMM) or gptq")->capture_default_str();
  s->add_option("--calib", o->calib.files, "calibration text or JSONL (\"text\" field) files, for gptq, awq and fp8 KV");
  s->add_option("--calib-samples", o->calib.samples, "calibration samples")->capture_default_str();
  s->add_option("--calib-seq-len", o->calib.seq_len, "tokens per calibration sample")->capture_default_str();
  s->add_option("--seed", o->calib.seed, "seed of the calibration draw")->capture_default_str();
  s->add_option("--calib-dump", o->calib_dump, "write the drawn calibration samples there (JSONL of token ids)");
  s->add_option("--kv-cache", o->kv_cache, "fp8: calibrate per-head k_scale/v_scale; int8: record dynamic int8 KV");
  s->add_option("--ignore", o->ignore, "modules left dense: names or re:PATTERN (default: lm_head)")->capture_default_str();
  s->add_option("--dampening", o->dampening, "gptq: fraction of the mean Hessian diagonal added")->capture_default_str();
  s->add_flag("--awq-clip,!--no-awq-clip", o->awq_clip,
              "awq: search a clipping range per weight group after the scales, as AutoAWQ does (llm-compressor 0.14 "
              "does not; off by default: it raised the default model's perplexity, docs/PERFORMANCE.md)")
      ->capture_default_str();
  s->add_option("--awq-search-samples", o->awq_search_samples,
                "awq: calibration samples the scale search runs on (0: all)")->capture_default_str();
  s->add_option("--device", *device, "cpu (cuda: not implemented for quantize yet)")->capture_default_str();
  s->add_option("-t,--threads", o->threads, "CPU threads (0: one per physical core this process may use)")
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxThreads));
  return [o, device, asym]() -> int {
    // Ctrl-C stops between layers and removes OUT.part; a second Ctrl-C kills as usual.
    g_stop.store(false);
    std::signal(SIGINT, on_quantize_sigint);
    o->stop = &g_stop;
    if (*asym) o->scheme.symmetric = false;
    if (*device != "cpu") {
      std::cerr << "llmctl: error: --device " << *device << ": quantize runs on the CPU in this build\n";
      return 1;
    }
    quant::QuantizeReport r;
    try {
      r = quant::quantize_model(*o, [](const std::string& m) { std::cerr << "llmctl: " << m << "\n"; });
    } catch (const InputError& e) {
      if (!g_stop.load()) throw;
      std::cerr << "llmctl: " << e.what() << "\n";
      return 130;
    }
    std::cerr << "llmctl: quantized " << r.linears_quantized << " linears (" << r.linears_dense << " left dense) in "
              << r.layers << " layers, " << r.bytes_written / 1e6 << " MB, in " << r.seconds << " s, to " << o->output
              << "\n";
    if (r.experts_calibrated + r.experts_rtn_fallback > 0)
      std::cerr << "llmctl: experts: " << r.experts_calibrated << " calibrated on their routed tokens, "
                << r.experts_rtn_fallback << " rounded to nearest (no calibration token reached them)\n";
    return 0;
  };
}

}  // namespace llmctl::cli
