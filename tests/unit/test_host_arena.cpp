// HostArena (engine/core/host_arena.h): small tensors carved in order from 2 MiB-aligned chunks,
// each holding its chunk; large ones from Tensor::empty_host; no two tensors share a byte.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/core/host_arena.h"

using namespace llmctl;

namespace {
uintptr_t addr(const Tensor& t) { return reinterpret_cast<uintptr_t>(t.data); }
}  // namespace

TEST_CASE("HostArena: small tensors in order from one 2 MiB-aligned chunk, a new chunk when one is full") {
  std::vector<Tensor> kept;
  size_t first_chunk = 0;
  {
    auto arena = std::make_unique<HostArena>();
    const Tensor a = arena->empty(DType::U8, {3, 100});  // 300 bytes: 320 carved
    const Tensor b = arena->empty(DType::F32, {7});
    CHECK(addr(a) % kHostHugePage == 0);  // the chunk's start
    CHECK(addr(b) == addr(a) + 320);
    CHECK(addr(b) % HostArena::kAlign == 0);
    CHECK(a.shape == std::vector<int64_t>{3, 100});
    CHECK(b.dtype == DType::F32);
    first_chunk = arena->chunk_bytes();
    CHECK(first_chunk == HostArena::kChunkBytes);
    // a huge page or more: its own allocation, no chunk bytes
    const Tensor big = arena->empty(DType::U8, {int64_t(kHostHugePage)});
    CHECK(arena->chunk_bytes() == first_chunk);
    CHECK((addr(big) < addr(a) || addr(big) >= addr(a) + HostArena::kChunkBytes));
    CHECK(addr(big) % kHostHugePage == 0);  // Tensor::empty_host starts it on a huge page
    // fill the chunk with 1 MiB tensors (each under a huge page): the one that does not fit opens a
    // second chunk
    const int64_t mib = int64_t(1) << 20;
    for (int i = 0; i < 33; ++i) kept.push_back(arena->empty(DType::U8, {mib}));
    CHECK(arena->chunk_bytes() == 2 * HostArena::kChunkBytes);
    kept.push_back(a), kept.push_back(b), kept.push_back(big);
  }  // the arena is gone: its tensors keep their chunks
  for (size_t i = 0; i < kept.size(); ++i) std::memset(kept[i].data, int(i + 1), kept[i].nbytes());
  for (size_t i = 0; i < kept.size(); ++i) {
    const auto* p = static_cast<const uint8_t*>(kept[i].data);
    bool same = true;
    for (size_t j = 0; j < kept[i].nbytes(); ++j) same = same && p[j] == uint8_t(i + 1);
    CHECK_MESSAGE(same, "tensor " << i << " overlaps another");
  }
  // no two tensors' byte ranges overlap
  for (size_t i = 0; i < kept.size(); ++i)
    for (size_t j = i + 1; j < kept.size(); ++j)
      CHECK((addr(kept[i]) + kept[i].nbytes() <= addr(kept[j]) || addr(kept[j]) + kept[j].nbytes() <= addr(kept[i])));
}

TEST_CASE("HostArena: empty tensors and bad shapes") {
  HostArena arena;
  const Tensor z = arena.empty(DType::F32, {0, 5});
  const Tensor n = arena.empty(DType::F32, {1});
  CHECK(z.numel() == 0);
  CHECK(addr(n) != addr(z));  // an empty tensor still takes its own 64 bytes
  CHECK_THROWS(arena.empty(DType::F32, {-1, 4}));
}
