// cpu_linear_pieces: a prompt's tokens in ranges where a linear's chunks fall unevenly on the
// threads, and a short step's pieces of a weight of parts in different forms shared by their bytes
// where the kernels are bound by reading it (a long one's, any weight of one form's, and those of
// kernels that compute as long as they read, by count). Run natively and as test_..._avx2.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "engine/backend/cpu/cpu_linear_pieces.h"

using namespace llmctl;
using namespace llmctl::cpu;

namespace {

// A part of `rows` rows from row0 in the row-lane layout (only its form matters here: no bytes).
CpuQSegment part(int64_t row0, int64_t rows, int bits, int group) {
  CpuQSegment s;
  s.row0 = row0;
  s.view.bits = bits;
  s.view.n = rows;
  s.view.k = 1024;
  s.view.group = group;
  s.view.layout = kernels::QLayout::RowLane16;
  s.view.scale_type = kernels::ScaleType::Factored;
  s.view.implied_zero = bits == 4 ? -1 : 0;
  return s;
}

int64_t chunk_bytes(const CpuQSegment& s) {
  return kernels::qweight_rowlane_block_bytes(s.view.bits, s.view.k, s.view.group, s.view.scale_type,
                                              s.view.implied_zero);
}

}  // namespace

TEST_CASE("linear pieces: a prompt's tokens in ranges only where the chunks fall unevenly") {
  CHECK(token_split(128, 36, 2).count == 1);  // 18 chunks a thread
  const TokenSplit at16 = token_split(128, 36, 16);  // 2.25 chunks a thread: 3 ranges, 6.75 a thread
  CHECK(at16.count == 3);
  CHECK(at16.tokens % (kernels::qlinear_amx() ? 16 : 8) == 0);  // whole tiles
  CHECK(at16.count * at16.tokens >= 128);
  CHECK(token_split(5, 36, 16).count == 1);  // one tile's tokens: nothing to split
  CHECK(token_split(0, 36, 16).count == 1);
}

TEST_CASE("linear pieces: one form, or a prompt, shared by count; a short step of mixed forms by bytes") {
  // Q4_K_M's q and k (4 bits, groups of 32) beside v (Q6_K: 6 bits, groups of 16), GQA 4:1.
  const std::vector<CpuQSegment> mixed = {part(0, 1024, 4, 32), part(1024, 256, 4, 32), part(1280, 256, 6, 16)};
  const std::vector<CpuQSegment> one = {part(0, 1536, 4, 32)};
  const int64_t N = 1536, chunks = N / 16;
  REQUIRE(chunk_bytes(mixed[2]) > chunk_bytes(mixed[0]));
  for (int threads : {1, 2, 3, 16, 200}) {
    CAPTURE(threads);
    const int pieces = std::min<int>(threads, int(chunks));
    for (int64_t T : {int64_t(1), kReadBoundTokens, kReadBoundTokens + 1, int64_t(64)}) {
      CAPTURE(T);
      const TokenSplit split = token_split(T, chunks, threads);
      const int64_t units = chunks * split.count;
      for (const auto* segs : {&mixed, &one}) {
        std::vector<int64_t> b = {7, 7, 7};  // what a caller's vector held before
        linear_piece_bounds(*segs, N, T, split, threads, b);
        REQUIRE(b.size() == size_t(std::min<int64_t>(threads, units)) + 1);
        CHECK(b.front() == 0);
        CHECK(b.back() == units);
        for (size_t p = 1; p < b.size(); ++p) CHECK(b[p - 1] <= b[p]);
        const bool by_bytes = segs == &mixed && T <= kReadBoundTokens && threads > 1 && kernels::qlinear_read_bound();
        if (!by_bytes) {
          for (size_t p = 0; p < b.size(); ++p) CHECK(b[p] == units * int64_t(p) / int64_t(b.size() - 1));
          continue;
        }
        // each piece's bytes within one chunk of an even share (the largest chunk: v's)
        std::vector<int64_t> bytes(static_cast<size_t>(chunks), 0);
        for (const CpuQSegment& s : *segs)
          for (int64_t c = s.row0 / 16; c < (s.row0 + s.view.n) / 16; ++c) bytes[size_t(c)] = chunk_bytes(s);
        int64_t total = 0;
        for (int64_t v : bytes) total += v;
        for (int p = 0; p < pieces; ++p) {
          int64_t have = 0;
          for (int64_t c = b[size_t(p)]; c < b[size_t(p) + 1]; ++c) have += bytes[size_t(c)];
          CHECK(std::abs(double(have) - double(total) / pieces) <= double(chunk_bytes(mixed[2])));
        }
        if (threads == 2) CHECK(b[1] > units / 2);  // the first piece (q's rows, fewer bytes) has more chunks
      }
    }
  }
}
