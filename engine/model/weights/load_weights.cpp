#include "engine/model/weights/load_weights.h"

#include "engine/core/error.h"
#include "engine/model/weights/shard.h"

namespace llmctl {

Tensor gather_shard(const Checkpoint& ck, const WeightSource& src, const ShardSpec& spec) {
  LLM_CHECK(!src.parts.empty()) << "weight " << src.name << " names no checkpoint tensors";
  std::vector<Tensor> parts;
  parts.reserve(src.parts.size());
  for (const std::string& n : src.parts) parts.push_back(ck.get(n));
  return shard_slice(parts, spec);
}

LinearWeight pack_linear(const Tensor& host_slice, const ShardSpec& spec, WeightFormat format) {
  LLM_REQUIRE(is_dense(format)) << "packing weights into format " << weight_format_name(format)
                                << " is not implemented (dense f32/f16/bf16 only)";
  const DType t = host_slice.dtype;
  LLM_CHECK(t == DType::F32 || t == DType::F16 || t == DType::BF16)
      << "a dense weight must be stored as f32, f16 or bf16, not " << dtype_name(t);
  LinearWeight w = dense_linear(host_slice, spec);
  w.format = format;  // upload converts the stored dtype to it
  return w;
}

LinearWeight upload_linear(const LinearWeight& packed, Backend& backend) {
  backend.require_support(packed.format);
  LLM_CHECK(is_dense(packed.format)) << "upload of format " << weight_format_name(packed.format)
                                     << " is not implemented";
  LinearWeight w = packed;
  w.data = backend.upload(packed.data, dense_dtype(packed.format));
  return w;
}

LinearWeight load_linear(const Checkpoint& ck, const WeightSource& src, const ShardSpec& spec, DType weight_dtype,
                         Backend& backend) {
  return upload_linear(pack_linear(gather_shard(ck, src, spec), spec, dense_format(weight_dtype)), backend);
}

Tensor load_tensor(const Checkpoint& ck, const WeightSource& src, const ShardSpec& spec, DType dtype,
                   Backend& backend) {
  return backend.upload(gather_shard(ck, src, spec), dtype);
}

LinearWeight dense_linear(const Tensor& w, const ShardSpec& spec) {
  LLM_CHECK(w.rank() == 2) << "a linear weight is [N, K], not " << w.shape_str();
  LinearWeight lw;
  lw.format = dense_format(w.dtype);
  lw.n = w.dim(0);
  lw.k = w.dim(1);
  lw.data = w;
  lw.shard = spec;
  return lw;
}

}  // namespace llmctl
