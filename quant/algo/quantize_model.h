// llmctl quantize: a dense checkpoint (HF directory or GGUF) in, a quantized HF directory out, in a
// layout vLLM / transformers load (compressed-tensors pack-quantized, AutoAWQ GEMM, GPTQ).
//
// Layer by layer (peak memory: one layer's f32 weights + the calibration batch's activations):
//   rtn   each linear rounded to nearest on its own;
//   gptq  true-sequential: each linear's Hessian from the activations of the already-quantized
//         linears before it (q/k/v, then o, then gate/up, then down), the next layer's input from
//         the quantized layer; the layer is the family's own forward (family_calibration.h), so
//         every family the registry runs calibrates;
//   awq   (the Llama layer: Llama, Mistral, Qwen2, Phi-3) scales searched and folded (awq.h), the next layer's input from the scaled layer
//         unquantized and unclipped (as AutoAWQ and llm-compressor propagate), then with
//         --awq-clip AutoAWQ's clipping search, then round to nearest.
// --kv-cache fp8 also calibrates per-kv-head k_scale / v_scale (amax / 448) on the same batch.
// Everything is written to OUT.part and renamed to OUT at the end: an interrupted run leaves no OUT.
#pragma once
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "quant/algo/calibration_data.h"
#include "quant/format/checkpoint_layout.h"
#include "quant/format/quantized_linear.h"

namespace llmctl::quant {

struct QuantizeOptions {
  std::string input, output;
  std::string method = "rtn";  // rtn | gptq | awq
  QuantScheme scheme;
  // A GGUF whose linears are already in quantized blocks (Q4_1, Q4_K, ...) is refused unless this is
  // set (llama-quantize's --allow-requantize): its blocks are dequantized and rounded a second time.
  bool allow_requantize = false;
  // Set (from a signal handler) to stop between layers: quantize_model then throws InputError and
  // OUT.part is removed. May be null.
  const std::atomic<bool>* stop = nullptr;
  bool act_order = false;      // gptq: columns by descending Hessian diagonal, static groups
  std::string format = "compressed-tensors";  // compressed-tensors | awq | gptq
  CalibrationOptions calib;
  std::string kv_cache;        // "", "fp8" (calibrated scales) or "int8" (dynamic: recorded only)
  std::vector<std::string> ignore{"lm_head"};  // module names or "re:" patterns left dense
  int threads = 0;
  double dampening = 0.01;     // gptq: fraction of the mean Hessian diagonal added to it
  int awq_search_samples = 16; // awq: calibration samples the scale search runs on (all: 0)
  bool awq_clip = false;        // awq: AutoAWQ's weight-clipping search after the scales (llm-compressor has none)
  std::string calib_dump;      // when set, the drawn samples are written there as JSONL token ids
};

struct QuantizeReport {
  int layers = 0, linears_quantized = 0, linears_dense = 0;
  // gptq on a mixture of experts: the experts calibrated on the tokens routed to them, and those no
  // calibration token reached (rounded to nearest instead), summed over the layers
  int experts_calibrated = 0, experts_rtn_fallback = 0;
  double seconds = 0;
  uint64_t bytes_written = 0;
};

// log receives one line per event worth showing (a progress line per layer, warnings). Throws
// InputError for bad options or input (a quantized input, a group size that does not divide a
// linear's width, missing calibration files, ...).
QuantizeReport quantize_model(const QuantizeOptions& o, const std::function<void(const std::string&)>& log);

}  // namespace llmctl::quant
