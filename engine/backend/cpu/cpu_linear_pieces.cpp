#include "engine/backend/cpu/cpu_linear_pieces.h"

#include <algorithm>

#include "engine/core/error.h"

namespace llmctl::cpu {

namespace {

constexpr int64_t kChunk = 16;  // output rows a chunk: the row-lane layout's block

// Bytes of 16 rows of a part (its packed form's row block, or 16 packed rows and their scales).
int64_t chunk_bytes(const kernels::QWeightView& v) {
  if (v.layout == kernels::QLayout::RowLane16)
    return kernels::qweight_rowlane_block_bytes(v.bits, v.k, v.group, v.scale_type, v.implied_zero);
  const int64_t scale_bytes = v.scale_type == kernels::ScaleType::F16 ? 2 : 4;
  return kChunk * (kernels::qweight_row_bytes(v.bits, v.k) + (v.k / v.group) * scale_bytes * (v.offset ? 2 : 1));
}

}  // namespace

TokenSplit token_split(int64_t T, int64_t chunks, int threads) {
  // ranges of whole prefill tiles: 8 tokens, 16 where AMX runs (a range from a tile of 16 reads the
  // quantizer's tiles, QActivations::tile_q, where one from its middle would copy its own)
  const int64_t kTile = kernels::qlinear_amx() ? 16 : 8;
  if (T <= 0) return {1, kTile};  // no tokens: pieces with empty ranges
  auto evenness = [&](int64_t pieces) {  // mean pieces a thread / the most any thread gets
    return double(pieces) / double(threads) / double((pieces + threads - 1) / threads);
  };
  int64_t count = 1;
  const int64_t most = (T + kTile - 1) / kTile;
  while (count < most && evenness(chunks * count) < 0.95) ++count;
  const int64_t tokens = ((T + count - 1) / count + kTile - 1) / kTile * kTile;
  return {(T + tokens - 1) / tokens, tokens};
}

void linear_piece_bounds(const std::vector<CpuQSegment>& segs, int64_t N, int64_t T, const TokenSplit& split,
                         int threads, std::vector<int64_t>& bounds) {
  LLM_CHECK(threads >= 1 && !segs.empty() && split.count >= 1) << "linear pieces: " << threads << " threads, "
                                                               << segs.size() << " parts";
  const int64_t chunks = (N + kChunk - 1) / kChunk, units = chunks * split.count;
  const int pieces = int(std::max<int64_t>(1, std::min<int64_t>(threads, units)));
  bounds.resize(size_t(pieces) + 1);
  bool same_bytes = true;
  for (const CpuQSegment& s : segs) same_bytes = same_bytes && chunk_bytes(s.view) == chunk_bytes(segs[0].view);
  // (a step this short is one token range)
  if (T > kReadBoundTokens || same_bytes || split.count != 1 || !kernels::qlinear_read_bound()) {
    for (int p = 0; p <= pieces; ++p) bounds[size_t(p)] = units * p / pieces;
    return;
  }
  std::vector<int64_t> sum(static_cast<size_t>(units) + 1, 0);  // sum[c]: the bytes of the chunks before c
  for (const CpuQSegment& s : segs) {
    LLM_CHECK(s.row0 % kChunk == 0) << "a part at row " << s.row0 << " is not whole chunks of " << kChunk;
    const int64_t b = chunk_bytes(s.view);
    for (int64_t c = s.row0 / kChunk; c < std::min(chunks, (s.row0 + s.view.n + kChunk - 1) / kChunk); ++c)
      sum[size_t(c) + 1] = b;
  }
  for (int64_t c = 0; c < units; ++c) sum[size_t(c) + 1] += sum[size_t(c)];
  const double total = double(sum.back());
  bounds[0] = 0;
  for (int p = 1; p < pieces; ++p) {  // the unit boundary nearest p / pieces of the cost
    const double want = total * p / pieces;
    const auto at = std::lower_bound(sum.begin(), sum.end(), int64_t(want));
    int64_t u = at - sum.begin();
    if (u > 0 && want - double(sum[size_t(u) - 1]) < double(sum[size_t(u)]) - want) --u;
    bounds[size_t(p)] = std::max(bounds[size_t(p) - 1], u);
  }
  bounds[size_t(pieces)] = units;
}

}  // namespace llmctl::cpu
