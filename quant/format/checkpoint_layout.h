// The three checkpoint layouts of an integer-quantized linear weight that llmctl writes and reads,
// as their reference projects define them, and the config.json "quantization_config" of each.
//
// Shapes (N = out features, K = in features, G = groups along K; int32 words, little-endian):
//   compressed-tensors pack-quantized (compressed_tensors 0.19 pack_to_int32):
//     weight_packed      I32 [N, ceil(K*bits/32)]  code c (unsigned, = signed value + 2^(bits-1)) of
//                        (n, k) at bits [bits*(k%(32/bits)), ...) of word k/(32/bits)
//     weight_scale       F16/BF16/F32 [N, G] (the model dtype)
//     weight_zero_point  I32 [ceil(N*bits/32), G], asymmetric only: zero points packed the same
//                        way along N (dim 0); symmetric checkpoints carry none (zero 2^(bits-1)).
//                        Read also: I8 [N, G] unpacked signed zero points (older compressed-tensors)
//     weight_shape       I64 [2] = {N, K}
//     weight_g_idx       I32 [K], optional: only older llm-compressor (actorder "group") wrote it
//   AutoAWQ GEMM (4 bits only; always has zero points; scales F16):
//     qweight I32 [K, N/8]: word (k, j) holds columns n = 8j + AWQ_ORDER[i] at bits 4i,
//                           AWQ_ORDER = {0, 2, 4, 6, 1, 3, 5, 7}
//     qzeros  I32 [G, N/8]  same packing;  scales F16 [G, N]
//   GPTQ v1 (AutoGPTQ / GPTQModel checkpoint_format "gptq"; 4 or 8 bits; scales F16):
//     qweight I32 [K*bits/32, N]: word (r, n) holds rows k = r*(32/bits) + i at bits bits*i
//     qzeros  I32 [G, N*bits/32]: zero - 1 (v1), packed along N at bits bits*i (mod 2^bits)
//     scales  F16 [G, N];  g_idx I32 [K] (the group of each input row; k / group_size without act-order)
// group_size -1 (per channel): compressed-tensors stores G = 1 with strategy "channel"; AWQ and GPTQ
// store one group of K rows (G = 1).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "quant/format/group_affine.h"
#include "quant/format/packed_tensor.h"
#include "quant/format/quantized_linear.h"

namespace llmctl::quant {

enum class QuantLayout { CompressedTensors, AutoAwqGemm, Gptq };

const char* quant_layout_name(QuantLayout);         // "compressed-tensors", "awq", "gptq"
QuantLayout parse_quant_layout(const std::string&);  // throws std::invalid_argument listing the three

struct QuantConfigInfo {  // what config.json's quantization_config says
  QuantLayout layout = QuantLayout::CompressedTensors;
  QuantScheme scheme;
  bool act_order = false;
  std::vector<std::string> ignore;  // module names / "re:" patterns left dense (lm_head)
  nlohmann::json kv_cache_scheme;   // null, or compressed-tensors' kv_cache_scheme object

  // "compressed-tensors int4 g32 sym", for messages.
  std::string label() const;
  // True when module (e.g. "lm_head", "model.layers.0.mlp.down_proj") is named by `ignore`, exactly
  // or by a "re:" pattern (std::regex ECMAScript, anchored at the start as Python's re.match is).
  // parse_quantization_config refuses patterns that do not compile; a bad one here throws
  // std::invalid_argument.
  bool ignores(const std::string& module) const;
};

// config.json "quantization_config" for a checkpoint written in info.layout, with the keys the
// reference tools write (llm-compressor 0.14 / compressed-tensors 0.19, AutoAWQ 0.2.9, GPTQModel).
// GPTQ: desc_act and static_groups both follow act_order (llmctl's act-order keeps static groups);
// lm_head is true unless "lm_head" is in ignore. Throws std::invalid_argument for what the layout
// cannot express (AWQ 8 bits, ...).
nlohmann::json make_quantization_config(const QuantConfigInfo& info);

// The reverse, for reading. Throws std::invalid_argument naming what it does not support (another
// quant_method such as fp8/bitsandbytes, a format other than pack-quantized, activation
// quantization, bits other than 4/8, ...). Bounded: it is untrusted input.
QuantConfigInfo parse_quantization_config(const nlohmann::json& qc);

// The tensors of one quantized linear, named by suffix after the module prefix:
//   compressed-tensors: "weight_packed", "weight_scale", ["weight_zero_point"], "weight_shape",
//                       ["weight_g_idx"]
//   AWQ:  "qweight", "qzeros", "scales";   GPTQ: "qweight", "qzeros", "scales", "g_idx"
// scale_dtype: "F16", "BF16" or "F32" -- used by compressed-tensors only (its scales are in the
// model dtype); AWQ and GPTQ always store F16 scales (their kernels read F16), whatever is asked.
// Throws std::invalid_argument when w is invalid or the layout cannot hold it (AWQ: bits 8 or N not
// a multiple of 8; GPTQ: N*bits or K*bits not a multiple of 32; compressed-tensors: a g_idx).
std::vector<std::pair<std::string, PackedTensor>> pack_linear_weight(QuantLayout, const QuantizedLinear&,
                                                                    const std::string& scale_dtype);

// The reverse. n, k from the model config (shapes are checked against them; weight_shape too).
// Throws std::invalid_argument naming the tensor and the problem (missing, wrong dtype/shape,
// codes or zero points out of range, bad g_idx, scales not finite).
QuantizedLinear unpack_linear_weight(QuantLayout, const QuantConfigInfo&, int64_t n, int64_t k,
                                     const std::map<std::string, PackedTensorView>& by_suffix);

// The tensors of one module (n output rows, k inputs) cut to the output rows `ranges`, in order, as
// unpack_linear_weight reads them for a module of that many rows: views into `storage` (which must
// outlive them) or into `by`. nullopt where the layout packs rows into int32s and a range does not
// start (or end, short of n) on one, or a tensor is not what the layout names: unpack it whole.
std::optional<std::map<std::string, PackedTensorView>> slice_linear_rows(
    QuantLayout, const QuantConfigInfo&, int64_t n, int64_t k, const std::map<std::string, PackedTensorView>& by,
    const std::vector<IndexRange>& ranges, std::vector<std::vector<uint8_t>>& storage);

// The columns a module's tensors can be cut at, for slice_linear_columns: its quantization group
// (which must hold whole packed int32s of codes: 0 otherwise, and nothing can be cut), or the codes a
// K element packs when per channel.
int64_t linear_column_unit(QuantLayout, const QuantConfigInfo&);
// The tensors of one module cut to the input columns `ranges`, in order, each starting at a
// multiple of linear_column_unit and ending at one or at k (cover_columns in group_affine.h widens
// ranges to that), as unpack_linear_weight reads them for a module of that many columns; a plain
// g_idx is dropped (that order is implied), per-channel scales and zero points stay whole. nullopt
// for ranges off those boundaries, a g_idx that is not plain (act-order), or a tensor the layout
// does not name: unpack the whole module.
std::optional<std::map<std::string, PackedTensorView>> slice_linear_columns(
    QuantLayout, const QuantConfigInfo&, int64_t n, int64_t k, const std::map<std::string, PackedTensorView>& by,
    const std::vector<IndexRange>& ranges, std::vector<std::vector<uint8_t>>& storage);

// True for a g_idx tensor [k] of I32 in the plain order (column / group_size, 0 per channel: GPTQ
// writes one without act-order). A column cut drops it; unpacking assumes that order again.
bool plain_g_idx(const PackedTensorView&, int64_t k, int group_size);

// The suffix whose presence marks a module as quantized in a layout ("weight_packed" / "qweight").
const char* quantized_marker_suffix(QuantLayout);
// Every tensor suffix a layout may store for one module (the names pack/unpack use, optional ones
// included), so a reader can gather a module's tensors and know which of its tensors are packed.
const std::vector<std::string>& layout_tensor_suffixes(QuantLayout);

}  // namespace llmctl::quant
