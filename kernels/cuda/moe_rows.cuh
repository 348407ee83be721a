// The row ops of a mixture-of-experts block on the device (engine/model/layers/moe_block.h): an
// expert's tokens' rows gathered (launch_gather_rows in elementwise.cuh), its output rows added back
// into their tokens' rows with their routing weights. Row-major, contiguous; rows and weights are
// device arrays.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/scalar_types.h"

namespace llmctl::cuda {

// out[rows[i], :] += weights[i] * y[i, :] for i = 0..n-1, in that order for each output row
//   y [n, C], out [T, C] (the same float dtype), rows in [0, T)
// distinct_rows: no row appears twice (an expert's tokens), so the n additions run in parallel;
// otherwise each column adds its n terms in order, one thread per column.
struct ScatterAddRowsParams {
  const void* y;
  const int32_t* rows;
  const float* weights;
  void* out;
  DType dtype;
  int64_t n, cols;
  bool distinct_rows;
};
void launch_scatter_add_rows(const ScatterAddRowsParams& p, cudaStream_t stream);

}  // namespace llmctl::cuda
