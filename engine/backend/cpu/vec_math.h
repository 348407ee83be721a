// Row reductions for sampling over a vocabulary-sized row (~50k floats), written as independent
// lanes so the compiler vectorizes them without -ffast-math; the lane order is fixed, so results
// do not depend on anything but the row.
#pragma once
#include <cstdint>

namespace llmctl {

// exp(x) for x <= 0 in float, relative error below 2e-7; 0 below -87. Branch-free (vectorizes).
float exp_nonpositive(float x);

// Largest value of x[0, n) (n > 0); -inf when every value is -inf. NaNs are ignored.
float max_value(const float* x, int n);

// out[i] = exp((x[i] - shift) * scale) for x[i] <= shift; returns the sum in double.
// out may be null (sum only).
double exp_shifted(const float* x, int n, float shift, float scale, float* out);

}  // namespace llmctl
