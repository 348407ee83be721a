// Weight loading in stages, each its own function so that a new format or a new split adds one:
//   1. name map   (llama_weight_map.h)  HF tensor names -> logical weights (WeightSource), fusions
//   2. shard      gather_shard           this rank's slice of the fused logical weight (ShardSpec);
//                 gather_quantized_shard the same for parts kept quantized (Checkpoint::quantized)
//   3. pack       pack_linear            host slice -> dense LinearWeight in a format;
//                 pack_quantized_linear  group-affine slice -> the canonical quantized LinearWeight
//   4. upload     upload_linear          to the backend, refused first when it lacks the format
//                                        (quantized: Backend::upload_quantized packs its own layout)
// load_linear / load_tensor run 2-4 for one weight. A model's loader walks its name map:
//   for (const WeightSource& s : llama_weight_sources(c))
//     ShardSpec spec = megatron_shard(s.role, c, rank, world);
//     is_linear_role(s.role) ? load_linear(ck, s, spec, wdt, be) : load_tensor(ck, s, spec, dtype, be)
// (a tied lm_head may instead wrap the uploaded embedding with dense_linear; norms and biases load
// as f32, the embedding in the weight dtype).
// A quantized weight the backend does not run (format, group size), or whose parts do not fuse, is
// dequantized and loaded dense as a dense checkpoint's would be; load_linear says why to its caller,
// who writes one note per model.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/linear_weight.h"
#include "engine/model/checkpoint.h"
#include "engine/model/weights/weight_source.h"
#include "quant/format/group_affine.h"

namespace llmctl {

// Stage 2: rank spec.rank's slice of src's parts (read from ck, fused along dim 0), a host tensor
// in the stored dtype. Only the slice is copied; a Replicated single-part weight is the
// checkpoint's own tensor (no copy). Parts kept quantized (ck.quantized) are dequantized to f32
// (quant::dequantize), and then every part is taken in f32. Throws InputError naming a missing tensor.
Tensor gather_shard(const Checkpoint& ck, const WeightSource& src, const ShardSpec& spec);

// Stage 2 for quantized parts: when every part of src is in ck.quantized, rank spec.rank's slice
// of them fused along rows (quant::concat_rows: parts of different bits or groups are brought to
// one form exactly). A rank decodes only its rows (column- and vocab-parallel) or input columns
// (row-parallel: a cut group keeps its scale) where the entry can (QuantizedEntry::rows/columns).
// nullopt, with *why_not, when a part is dense, the parts do not fuse, or an act-order weight
// (perm) would be split by input columns over several ranks. A checkpoint consumed by one model
// (Checkpoint::release_after_upload) gives up a single part taken whole: the weight is moved out
// of its entry (QuantizedEntry::take), which is released, instead of copied.
std::optional<quant::GroupAffineWeight> gather_quantized_shard(const Checkpoint& ck, const WeightSource& src,
                                                               const ShardSpec& spec, std::string* why_not);

// Stage 3: a host slice [N, K] as a LinearWeight in `format`. Dense: the format of the weight dtype
// is recorded and the data kept as stored; upload converts it (Backend::upload: on the device
// for CUDA, so the bits are those the loader has always produced). Quantized formats: refused by
// name (they come from pack_quantized_linear).
LinearWeight pack_linear(const Tensor& host_slice, const ShardSpec& spec, WeightFormat format);

// Stage 3 for a quantized slice: the canonical LinearWeight Backend::upload_quantized takes (see
// there): Int4Group / Int8Group by w.bits, data the codes U8 [N, K], scales / zeros (= offsets)
// [N, K / group] in F16 when every scale and offset round-trips through f16 exactly, else F32;
// input_perm I32 [K] from w.perm (act-order), else empty.
LinearWeight pack_quantized_linear(const quant::GroupAffineWeight& w, const ShardSpec& spec);
// The same, taking w's codes into the LinearWeight without a copy.
LinearWeight pack_quantized_linear(quant::GroupAffineWeight&& w, const ShardSpec& spec);

// Whether the quantized kernels take groups of `group` inputs over k: 16 or a multiple of 32 that
// divides k (engine/backend/linear_weight.h), k itself a multiple of 32 (the packed layouts go by
// blocks of 32 inputs, kernels/cpu/qlinear.h).
bool quantized_group_supported(int group, int64_t k);

// Stage 4: the packed weight on the backend. Refuses a format the backend does not support, by
// name, before copying anything. Dense: Backend::upload in the format's dtype; quantized (the
// canonical form of pack_quantized_linear): Backend::upload_quantized.
LinearWeight upload_linear(const LinearWeight& packed, Backend& backend);

// Stages 2-4 for a linear layer's weight; weight_dtype picks the dense format. Parts kept quantized
// load quantized when they fuse and the backend runs their format and group size; otherwise dense,
// with "<src.name>: <why>" appended to *dense_fallbacks (when given) for the caller's note.
LinearWeight load_linear(const Checkpoint& ck, const WeightSource& src, const ShardSpec& spec, DType weight_dtype,
                         Backend& backend, std::vector<std::string>* dense_fallbacks = nullptr);

// Stages 2 and 4 for a table, norm or bias: the slice uploaded in `dtype`.
Tensor load_tensor(const Checkpoint& ck, const WeightSource& src, const ShardSpec& spec, DType dtype,
                   Backend& backend);

// A dense weight already on the backend ([N, K], f32/f16/bf16) as a LinearWeight, e.g. the
// embedding reused as a tied lm_head.
LinearWeight dense_linear(const Tensor& w, const ShardSpec& spec = {});

}  // namespace llmctl
