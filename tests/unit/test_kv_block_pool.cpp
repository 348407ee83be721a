// BlockPool: ref counts, free list, prefix map with exact compare, LRU eviction of cached blocks.
#include <doctest/doctest.h>

#include <vector>

#include "engine/core/error.h"
#include "engine/kv/block_pool.h"
#include "token_runs.h"

using namespace llmctl;

namespace {
using test::toks;
// Registers an in-use block under the chained hash of (root, tokens).
uint64_t reg(BlockPool& p, int id, const std::vector<int32_t>& t) {
  const uint64_t h = BlockPool::hash_block(BlockPool::kRootHash, t);
  CHECK(p.register_full(id, h, BlockPool::kRootHash, t));
  return h;
}
}  // namespace

TEST_CASE("pool: allocate until empty, release returns blocks, misuse throws") {
  BlockPool p(3);
  CHECK(p.allocate() == 0);  // lowest id first
  CHECK(p.allocate() == 1);
  CHECK(p.allocate() == 2);
  CHECK(p.allocate() == -1);
  CHECK(p.stats().failed_allocations == 1);
  CHECK(p.num_in_use() == 3);
  p.retain(1);
  CHECK(p.ref_count(1) == 2);
  p.release(1);
  p.release(1);
  CHECK(p.num_free() == 1);
  CHECK_THROWS_AS(p.release(1), Error);
  CHECK_THROWS_AS(p.retain(1), Error);  // free, not cached
  CHECK(p.allocate() == 1);
  p.check_invariants();
}

TEST_CASE("pool: hashes are chained, order-sensitive and length-sensitive") {
  auto a = toks(1, 4), b = toks(1, 4);
  b[3] = 5;
  CHECK(BlockPool::hash_block(0, a) != BlockPool::hash_block(0, b));
  CHECK(BlockPool::hash_block(0, a) != BlockPool::hash_block(1, a));
  CHECK(BlockPool::hash_block(0, a) == BlockPool::hash_block(0, toks(1, 4)));
  std::vector<int32_t> ab = {1, 2}, ba = {2, 1}, abz = {1, 2, 0};
  CHECK(BlockPool::hash_block(0, ab) != BlockPool::hash_block(0, ba));
  CHECK(BlockPool::hash_block(0, ab) != BlockPool::hash_block(0, abz));
}

TEST_CASE("pool: a hashed block stays findable after its last release, and comes back on retain") {
  BlockPool p(2);
  int id = p.allocate();
  auto t = toks(10, 4);
  uint64_t h = reg(p, id, t);
  CHECK(p.find(h, BlockPool::kRootHash, t) == id);
  p.release(id);
  CHECK(p.num_cached() == 1);
  CHECK(p.is_cached(id));
  CHECK(p.find(h, BlockPool::kRootHash, t) == id);
  p.retain(id);  // cached -> in use
  CHECK(p.ref_count(id) == 1);
  CHECK(p.num_cached() == 0);
  CHECK(p.stats().cache_revivals == 1);
  // a second block with the same content is not registered (one block per hash)
  int dup = p.allocate();
  CHECK_FALSE(p.register_full(dup, h, BlockPool::kRootHash, t));
  CHECK_FALSE(p.is_hashed(dup));
  p.release(dup);
  CHECK(p.num_free() == 1);  // unhashed: plain free
  p.check_invariants();
}

TEST_CASE("pool: lookups compare parent and tokens, so a hash collision is never a hit") {
  BlockPool p(2);
  int id = p.allocate();
  auto t = toks(0, 4);
  const uint64_t fake = 42;  // pretend another content hashes to 42 too
  CHECK(p.register_full(id, BlockPool::hash_block(7, t), 7, t));
  CHECK(p.find(BlockPool::hash_block(7, t), 7, t) == id);
  CHECK(p.find(BlockPool::hash_block(7, t), 8, t) == -1);                 // other parent
  CHECK(p.find(BlockPool::hash_block(7, t), 7, toks(1, 4)) == -1);         // other tokens
  CHECK(p.find(fake, 7, t) == -1);
}

TEST_CASE("pool: cached blocks are evicted LRU, only when no plain free block is left") {
  BlockPool p(4);
  int a = p.allocate(), b = p.allocate(), c = p.allocate();
  uint64_t ha = reg(p, a, toks(0, 4)), hb = reg(p, b, toks(4, 4)), hc = reg(p, c, toks(8, 4));
  p.release(a);  // released order: a, c, b
  p.release(c);
  p.release(b);
  CHECK(p.num_cached() == 3);
  CHECK(p.num_free() == 1);
  CHECK(p.num_available() == 4);
  CHECK(p.allocate() == 3);  // the plain free block first
  CHECK(p.stats().evictions == 0);
  CHECK(p.allocate() == a);  // then the least recently released
  CHECK(p.find(ha, BlockPool::kRootHash, toks(0, 4)) == -1);
  CHECK(p.find(hb, BlockPool::kRootHash, toks(4, 4)) == b);
  // touching b (a hit) moves it out of the LRU; releasing it makes it the most recent
  p.retain(b);
  p.release(b);
  CHECK(p.allocate() == c);
  CHECK(p.find(hc, BlockPool::kRootHash, toks(8, 4)) == -1);
  CHECK(p.allocate() == b);
  CHECK(p.allocate() == -1);
  CHECK(p.stats().evictions == 3);
  CHECK(p.num_in_use() == 4);
  p.check_invariants();
}
