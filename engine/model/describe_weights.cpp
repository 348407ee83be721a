#include "engine/model/describe_weights.h"

#include <map>

#include "engine/model/gguf.h"
#include "quant/format/gguf_blocks.h"

namespace llmctl {

std::map<std::string, int> gguf_layer_weight_types(const GgufFile& g) {
  std::map<std::string, int> count;
  for (const GgufTensorInfo& t : g.tensors())
    if (t.name.starts_with("blk.") && t.ne.size() == 2) ++count[quant::ggml_type_label(uint32_t(t.type))];
  return count;
}

namespace {
// The block type most of a GGUF's 2-D "blk.*" weights are stored in (a Q4_K_M file mixes Q4_K and
// Q6_K: the majority names it, as llama.cpp's file type does), with the others after it.
std::string gguf_linear_types(const GgufFile& g) {
  const std::map<std::string, int> count = gguf_layer_weight_types(g);
  std::string main;
  int best = -1;
  for (const auto& [type, n] : count)
    if (n > best) main = type, best = n;
  std::string others;
  for (const auto& [type, n] : count)
    if (type != main) others += (others.empty() ? "" : ", ") + type;
  return others.empty() ? main : main + " (+" + others + ")";
}
}  // namespace

std::string describe_weights(const Checkpoint& ck, std::optional<DType> asked, const char* act_quant) {
  // Dense weights are in the dtype asked for, else as stored (a layer's linear tells).
  DType weight_dtype = DType::F32;
  for (const char* name : {"model.layers.0.mlp.down_proj.weight", "model.embed_tokens.weight"})
    if (ck.has(name)) {
      weight_dtype = ck.get(name).dtype;
      break;
    }
  if (asked) weight_dtype = *asked;
  std::string source;
  if (ck.source_format == "gguf" && ck.gguf)
    source = gguf_linear_types(*ck.gguf) + " GGUF";
  else if (ck.config.source_quantization)
    source = ck.config.source_quantization->label();
  if (source.empty() || source == "F32 GGUF" || source == "F16 GGUF" || source == "BF16 GGUF")
    return std::string(dtype_name(weight_dtype)) + (source.empty() ? "" : " (" + source + ")");
  if (ck.quantized.empty()) return source + ", dequantized to " + dtype_name(weight_dtype);
  return source + ", run quantized" + (act_quant ? std::string(" (") + act_quant + " activations)" : "");
}

}  // namespace llmctl
