#include "engine/backend/linear_weight.h"

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

}  // namespace llmctl
