// Weight loading in stages, each its own function so that a new format or a new split adds one:
//   1. name map   (llama_weight_map.h)  HF tensor names -> logical weights (WeightSource), fusions
//   2. shard      gather_shard           this rank's slice of the fused logical weight (ShardSpec)
//   3. pack       pack_linear            host slice -> LinearWeight in a format (dense now;
//                                        quantized formats repack their blocks here)
//   4. upload     upload_linear          to the backend, refused first when it lacks the format
// load_linear / load_tensor run 2-4 for one weight. A model's loader walks its name map:
//   for (const WeightSource& s : llama_weight_sources(c))
//     ShardSpec spec = megatron_shard(s.role, c, rank, world);
//     is_linear_role(s.role) ? load_linear(ck, s, spec, wdt, be) : load_tensor(ck, s, spec, dtype, be)
// (a tied lm_head may instead wrap the uploaded embedding with dense_linear; norms and biases load
// as f32, the embedding in the weight dtype).
#pragma once
#include "engine/backend/backend.h"
#include "engine/backend/linear_weight.h"
#include "engine/model/checkpoint.h"
#include "engine/model/weights/weight_source.h"

namespace llmctl {

// Stage 2: rank spec.rank's slice of src's parts (read from ck, fused along dim 0), a host tensor
// in the stored dtype. Only the slice is copied; a Replicated single-part weight is the
// checkpoint's own tensor (no copy). Throws InputError naming a missing tensor.
Tensor gather_shard(const Checkpoint& ck, const WeightSource& src, const ShardSpec& spec);

// Stage 3: a host slice [N, K] as a LinearWeight in `format`. Dense: the format of the weight dtype
// is recorded and the data kept as stored; upload converts it (Backend::upload: on the device
// for CUDA, so the bits are those the loader has always produced). Quantized formats: refused by
// name (not implemented yet).
LinearWeight pack_linear(const Tensor& host_slice, const ShardSpec& spec, WeightFormat format);

// Stage 4: the packed weight on the backend. Refuses a format the backend does not support, by
// name, before copying anything.
LinearWeight upload_linear(const LinearWeight& packed, Backend& backend);

// Stages 2-4 for a linear layer's weight; weight_dtype picks the dense format.
LinearWeight load_linear(const Checkpoint& ck, const WeightSource& src, const ShardSpec& spec, DType weight_dtype,
                         Backend& backend);

// Stages 2 and 4 for a table, norm or bias: the slice uploaded in `dtype`.
Tensor load_tensor(const Checkpoint& ck, const WeightSource& src, const ShardSpec& spec, DType dtype,
                   Backend& backend);

// A dense weight already on the backend ([N, K], f32/f16/bf16) as a LinearWeight, e.g. the
// embedding reused as a tied lm_head.
LinearWeight dense_linear(const Tensor& w, const ShardSpec& spec = {});

}  // namespace llmctl
