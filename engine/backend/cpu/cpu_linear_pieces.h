// How a quantized linear's work goes to the threads (CpuBackend::linear_quantized): output rows in
// chunks of 16 (a row block of the kernels' layout), a prompt's tokens in ranges where the chunks are
// too few for the threads, and one piece a thread of about equal cost. Each output row's result does
// not depend on the pieces (kernels/cpu/qlinear.h): these choices change no bits, only which thread
// waits for which.
#pragma once
#include <cstdint>
#include <vector>

#include "engine/backend/cpu/cpu_quantized_weight.h"

namespace llmctl::cpu {

// A prompt's tokens in `count` ranges of `tokens` (a multiple of the prefill tiles' height: 8, 16 on
// AMX) where a linear's chunks of 16 rows fall unevenly on the threads: each thread's piece is then a
// block of rows for a range of tokens. A weight's rows are read once per range. At 16 threads the default
// model's 576-row linears have 36 chunks, 2.25 a thread: the slowest thread does 3, the step waits
// for it a quarter of the time; in 3 ranges, 6.75 a thread, 7 the most.
struct TokenSplit {
  int64_t count, tokens;
};
TokenSplit token_split(int64_t T, int64_t chunks, int threads);

// The pieces' bounds over the work units of (token range s, chunk c), numbered s * chunks + c: one
// piece a thread (a unit a piece where units are fewer), ascending values from 0 to split.count *
// chunks, piece p = [bounds[p], bounds[p + 1]). The units are shared by count (units * p / pieces),
// except in a step of at most kReadBoundTokens tokens through a weight of fused parts packed in
// different forms (GGUF Q4_K_M's q and k in Q4_K beside v in Q6_K in half the layers) where such a
// step is bound by reading the weight (kernels::qlinear_read_bound): a chunk then costs its bytes (a
// row block's, in its part's form) and each piece gets about an even share of them. Shared by count,
// the thread with v's rows reads about a third more bytes than the others, and they wait for it
// (rdtsc per piece, 2 threads, AVX-512: that linear's slower thread 8.5-9.5% above the mean, 1.5%
// with bytes). A prompt's pieces compute more than they read, at a cost per form the bytes do not
// give (Q6_K's chunk 1.15x Q4_K's time on AVX-512, 1.44x its bytes; Q8_0's 1.8x Q5_0's on AVX2,
// 1.3x): they stay shared by count.
inline constexpr int64_t kReadBoundTokens = 4;
// (bounds: the caller's, its capacity kept: a decode step asks this of every linear)
void linear_piece_bounds(const std::vector<CpuQSegment>& segs, int64_t N, int64_t T, const TokenSplit& split,
                         int threads, std::vector<int64_t>& bounds);

}  // namespace llmctl::cpu
