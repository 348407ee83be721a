#include "engine/backend/linear_weight.h"

#include <vector>

#include "engine/core/error.h"

namespace llmctl {

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::DenseF32: return "dense-f32";
    case WeightFormat::DenseF16: return "dense-f16";
    case WeightFormat::DenseBF16: return "dense-bf16";
    case WeightFormat::Int4Group: return "int4-group";
    case WeightFormat::Int8Group: return "int8-group";
  }
  return "unknown";
}

bool int_group_shape_ok(int64_t k, int group_size) {
  return group_size > 0 && k > 0 && k % 32 == 0 && k % group_size == 0 && (group_size == 16 || group_size % 32 == 0);
}

bool is_dense(WeightFormat f) {
  return f == WeightFormat::DenseF32 || f == WeightFormat::DenseF16 || f == WeightFormat::DenseBF16;
}

WeightFormat dense_format(DType t) {
  switch (t) {
    case DType::F32: return WeightFormat::DenseF32;
    case DType::F16: return WeightFormat::DenseF16;
    case DType::BF16: return WeightFormat::DenseBF16;
    default: LLM_THROW() << "no dense weight format holds dtype " << dtype_name(t) << " (f32, f16 or bf16)";
  }
  return WeightFormat::DenseF32;
}

DType dense_dtype(WeightFormat f) {
  switch (f) {
    case WeightFormat::DenseF32: return DType::F32;
    case WeightFormat::DenseF16: return DType::F16;
    case WeightFormat::DenseBF16: return DType::BF16;
    default: LLM_CHECK(false) << "weight format " << weight_format_name(f) << " is not dense";
  }
  return DType::F32;
}

const char* shard_kind_name(ShardKind k) {
  switch (k) {
    case ShardKind::Replicated: return "replicated";
    case ShardKind::Column: return "column";
    case ShardKind::Row: return "row";
    case ShardKind::Vocab: return "vocab";
  }
  return "unknown";
}

void check_input_perm(const LinearWeight& w) {
  if (w.input_perm.empty()) return;
  LLM_CHECK(!is_dense(w.format)) << "a dense weight has no input permutation";
  LLM_CHECK(w.input_perm.dtype == DType::I32 && w.input_perm.device == Device::CPU &&
            w.input_perm.shape == std::vector<int64_t>{w.k})
      << weight_format_name(w.format) << " [" << w.n << ", " << w.k << "]: input_perm must be host i32 [" << w.k
      << "], got " << dtype_name(w.input_perm.dtype) << " " << w.input_perm.shape_str();
  std::vector<bool> seen(size_t(w.k), false);
  const auto* p = w.input_perm.ptr<int32_t>();
  for (int64_t j = 0; j < w.k; ++j) {
    LLM_CHECK(p[j] >= 0 && p[j] < w.k && !seen[size_t(p[j])])
        << weight_format_name(w.format) << ": input_perm[" << j << "] = " << p[j] << " is not a permutation of 0.."
        << w.k - 1;
    seen[size_t(p[j])] = true;
  }
}

}  // namespace llmctl
