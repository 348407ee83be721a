#include "engine/kv/kv_cache_manager.h"

#include <algorithm>
#include <span>

#include "engine/core/error.h"

namespace llmctl {

KvCacheManager::KvCacheManager(int num_blocks, int block_size, bool enable_prefix_caching, bool exact_slots,
                               int window)
    : pool_(num_blocks),
      block_size_(block_size),
      prefix_caching_(enable_prefix_caching),
      exact_slots_(exact_slots),
      window_(window) {
  LLM_CHECK(block_size > 0) << "block size must be positive, got " << block_size;
  LLM_CHECK(window >= 0) << "sliding window of " << window << " tokens";
}

int KvCacheManager::first_needed_block(int computed) const {
  return window_ > 0 ? std::max(0, computed - window_ + 1) / block_size_ : 0;
}

int KvCacheManager::max_blocks_held(int tokens, int chunk) const {
  const int all = blocks_for(tokens);
  if (window_ <= 0) return all;
  // in 64 bits: a config's window may be as large as an int holds
  const int64_t held = (int64_t(window_) + chunk + block_size_ - 1) / block_size_ + 1;
  return int(std::min<int64_t>(all, held));
}

void KvCacheManager::drop_passed_blocks(Seq& s) {
  const int upto = std::min(first_needed_block(s.num_computed), int(s.table.size()));
  for (; s.dropped < upto; ++s.dropped) {  // head first: the oldest leaves the cache first
    drop(s.table[s.dropped]);
    s.table[s.dropped] = kDropped;
  }
}

const KvCacheManager::Seq& KvCacheManager::get(int64_t seq) const {
  auto it = seqs_.find(seq);
  LLM_CHECK(it != seqs_.end()) << "unknown sequence " << seq;
  return it->second;
}

KvCacheManager::Seq& KvCacheManager::get(int64_t seq) {
  auto it = seqs_.find(seq);
  LLM_CHECK(it != seqs_.end()) << "unknown sequence " << seq;
  return it->second;
}

void KvCacheManager::drop(int id) {
  pool_.release(id);
  if (pool_.ref_count(id) == 0)  // nobody will read a copy into a block that is gone
    std::erase_if(pending_copies_, [id](const std::pair<int, int>& c) { return c.second == id; });
}

int KvCacheManager::copy_on_write(Seq& s, int index) {
  const int src = s.table[index];
  LLM_CHECK(pool_.ref_count(src) > 1 || pool_.is_hashed(src)) << "copy-on-write of unshared, unhashed block " << src;
  const int dst = pool_.allocate();
  LLM_CHECK(dst >= 0) << "copy-on-write without a block (capacity was checked)";
  pending_copies_.emplace_back(src, dst);
  s.table[index] = dst;
  drop(src);
  ++cow_copies_;
  return dst;
}

void KvCacheManager::match_prefix(const std::vector<int32_t>& tokens, int max_blocks, std::vector<int>& hits,
                                  std::vector<uint64_t>& hashes) const {
  hits.clear();
  hashes.clear();
  if (!prefix_caching_) return;
  const int n = int(tokens.size()), B = block_size_;
  const int full = std::min(n / B, max_blocks);
  // Each full block looked up by its chain hash. Without a window a hit is a prefix of found blocks;
  // with one, blocks missing before a hit's window do not matter, so the search goes on past a miss.
  uint64_t parent = BlockPool::kRootHash;
  for (int i = 0; i < full; ++i) {
    std::span<const int32_t> blk(tokens.data() + size_t(i) * B, B);
    const uint64_t h = BlockPool::hash_block(parent, blk);
    const int id = pool_.find(h, parent, blk);
    if (id < 0 && window_ == 0) break;
    hits.push_back(id);
    hashes.push_back(h);
    parent = h;
  }
  // The longest L whose needed blocks [first_needed_block(L * B - 1), L) were all found; with exact
  // slots never the whole prompt (see the header: no mid-block start).
  int L = int(hits.size());
  for (; L > 0; --L) {
    if (exact_slots_ && L * B == n) continue;
    bool ok = true;
    for (int i = first_needed_block(L * B - 1); i < L && ok; ++i) ok = hits[size_t(i)] >= 0;
    if (ok) break;
  }
  hits.resize(size_t(L));
  hashes.resize(size_t(L));
  for (int i = 0; i < first_needed_block(L * B - 1); ++i) hits[size_t(i)] = kDropped;
}

int KvCacheManager::cached_blocks(const std::vector<int32_t>& tokens, int max_blocks) const {
  std::vector<int> hits;
  std::vector<uint64_t> hashes;
  match_prefix(tokens, max_blocks, hits, hashes);
  return int(hits.size());
}

int KvCacheManager::take_exact_slot() {
  if (!exact_slots_) return -1;
  if (free_exact_slots_.empty()) return next_exact_slot_++;
  const int slot = *free_exact_slots_.begin();
  free_exact_slots_.erase(free_exact_slots_.begin());
  return slot;
}

std::vector<int32_t> KvCacheManager::take_pending_exact_copies() {
  std::vector<int32_t> out;
  out.swap(pending_exact_copies_);
  return out;
}

int KvCacheManager::peek_cached_tokens(const std::vector<int32_t>& tokens, int max_cached_blocks) const {
  if (tokens.empty()) return 0;
  return std::min(cached_blocks(tokens, max_cached_blocks) * block_size_, int(tokens.size()) - 1);
}

KvCacheManager::PromptPlan KvCacheManager::plan_prompt(const std::vector<int32_t>& tokens, bool use_cache,
                                                        int max_new_tokens, int max_cached_blocks) const {
  LLM_CHECK(!tokens.empty()) << "a prompt without tokens";
  LLM_CHECK(max_new_tokens >= 1) << "allocate_prompt: max_new_tokens must be at least 1";
  const int n = int(tokens.size()), B = block_size_;
  PromptPlan p;
  if (use_cache) match_prefix(tokens, max_cached_blocks, p.hits, p.hashes);
  p.computed = int(p.hits.size()) * B;
  // Everything cached: compute the last token again for its logits, in a private copy of the last
  // block (a hashed block is never written: others may read it in the same step).
  p.cow_last = p.computed == n;
  if (p.cow_last) p.computed = n - 1;
  // Blocks for the cached prefix and the first chunk only; later chunks get theirs from
  // ensure_capacity, so no block sits allocated for tokens that are not computed yet.
  p.num_blocks = blocks_for(int(std::min<int64_t>(n, int64_t(p.computed) + max_new_tokens)));
  const int revived =
      int(std::count_if(p.hits.begin(), p.hits.end(), [&](int id) { return id >= 0 && pool_.ref_count(id) == 0; }));
  const int fresh = p.num_blocks - int(p.hits.size()) + (p.cow_last ? 1 : 0);
  p.fits = fresh <= pool_.num_available() - revived;
  return p;
}

bool KvCacheManager::can_allocate_prompt(const std::vector<int32_t>& tokens, bool use_cache, int max_new_tokens,
                                         int max_cached_blocks) const {
  return plan_prompt(tokens, use_cache, max_new_tokens, max_cached_blocks).fits;
}

std::optional<int> KvCacheManager::allocate_prompt(int64_t seq, const std::vector<int32_t>& tokens, bool use_cache,
                                                   int max_new_tokens, int max_cached_blocks) {
  LLM_CHECK(!has(seq)) << "sequence " << seq << " already holds blocks";
  LLM_CHECK(!tokens.empty()) << "sequence " << seq << " has no tokens";
  PromptPlan p = plan_prompt(tokens, use_cache, max_new_tokens, max_cached_blocks);
  if (!p.fits) return std::nullopt;
  const int n = int(tokens.size()), nb = p.num_blocks, computed = p.computed;
  const bool cow_last = p.cow_last;
  std::vector<int>& hits = p.hits;
  std::vector<uint64_t>& hashes = p.hashes;

  Seq s;
  s.family = seq;
  for (int id : hits) {
    if (id >= 0)
      pool_.retain(id);
    else
      ++s.dropped;  // before the window of the hit: never read
    s.table.push_back(id);
  }
  if (cow_last) {
    const int src = s.table.back(), dst = pool_.allocate();
    LLM_CHECK(dst >= 0) << "copy-on-write without a block (capacity was checked)";
    pending_copies_.emplace_back(src, dst);
    s.table.back() = dst;
    drop(src);  // back to the cache (or to its other holders)
    ++cow_copies_;
  }
  while (int(s.table.size()) < nb) {
    const int id = pool_.allocate();
    LLM_CHECK(id >= 0) << "pool ran dry after its capacity was checked";
    s.table.push_back(id);
  }
  s.hashes = std::move(hashes);
  s.num_computed = computed;
  s.exact_slot = take_exact_slot();
  seqs_.emplace(seq, std::move(s));
  if (use_cache) {  // the hit rate is over the prompts that looked
    lookup_tokens_ += n;
    cached_tokens_ += computed;
  }
  return computed;
}

// Existing blocks that a write of [num_computed, total_tokens) goes into and that another table also
// holds, or that are hashed (only after a truncate: a hashed block's content must stay what its hash
// says): their indices in the table.
std::vector<int> KvCacheManager::shared_in_range(const Seq& s, int total_tokens) const {
  std::vector<int> shared;
  const int nb = blocks_for(total_tokens), have = int(s.table.size());
  if (total_tokens > s.num_computed)
    for (int i = s.num_computed / block_size_; i < std::min(nb, have); ++i)
      if (pool_.ref_count(s.table[i]) > 1 || pool_.is_hashed(s.table[i])) shared.push_back(i);
  return shared;
}

int KvCacheManager::blocks_to_ensure(int64_t seq, int total_tokens) const {
  const Seq& s = get(seq);
  return std::max(0, blocks_for(total_tokens) - int(s.table.size())) + int(shared_in_range(s, total_tokens).size());
}

bool KvCacheManager::ensure_capacity(int64_t seq, int total_tokens) {
  Seq& s = get(seq);
  const int nb = blocks_for(total_tokens);
  const std::vector<int> shared = shared_in_range(s, total_tokens);
  const int fresh = std::max(0, nb - int(s.table.size())) + int(shared.size());
  if (fresh > pool_.num_available()) return false;
  for (int i : shared) copy_on_write(s, i);
  while (int(s.table.size()) < nb) {
    const int id = pool_.allocate();
    LLM_CHECK(id >= 0) << "pool ran dry after its capacity was checked";
    s.table.push_back(id);
  }
  return true;
}

void KvCacheManager::commit_tokens(int64_t seq, const std::vector<int32_t>& tokens, int num_computed) {
  Seq& s = get(seq);
  LLM_CHECK(num_computed >= 0 && num_computed <= int(tokens.size()))
      << "sequence " << seq << ": " << num_computed << " computed of " << tokens.size() << " tokens";
  LLM_CHECK(num_computed <= int(s.table.size()) * block_size_)
      << "sequence " << seq << " computed " << num_computed << " tokens beyond its " << s.table.size() << " blocks";
  s.num_computed = num_computed;
  if (!prefix_caching_) return drop_passed_blocks(s);
  const int full = num_computed / block_size_;
  while (int(s.hashes.size()) < full) {
    const int i = int(s.hashes.size());
    const uint64_t parent = i == 0 ? BlockPool::kRootHash : s.hashes[i - 1];
    std::span<const int32_t> blk(tokens.data() + size_t(i) * block_size_, block_size_);
    const uint64_t h = BlockPool::hash_block(parent, blk);
    (void)pool_.register_full(s.table[i], h, parent, blk);  // false: the same content is cached elsewhere
    s.hashes.push_back(h);
  }
  drop_passed_blocks(s);
}

void KvCacheManager::truncate(int64_t seq, int n) {
  Seq& s = get(seq);
  LLM_CHECK(n >= 0 && first_needed_block(n) >= s.dropped)
      << "truncate of sequence " << seq << " to " << n << " tokens"
      << (n >= 0 ? ", before blocks its sliding window released" : "");
  const int nb = blocks_for(n);
  while (int(s.table.size()) > nb) {  // tail first, as free() does
    drop(s.table.back());
    s.table.pop_back();
  }
  if (n < s.num_computed) {
    s.num_computed = n;
    if (int(s.hashes.size()) > n / block_size_) s.hashes.resize(size_t(n / block_size_));
  }
}

void KvCacheManager::fork(int64_t parent, int64_t child) {
  LLM_CHECK(!has(child)) << "fork into existing sequence " << child;
  Seq c = get(parent);
  for (int id : c.table)
    if (id >= 0) pool_.retain(id);
  c.exact_slot = take_exact_slot();
  if (c.exact_slot >= 0) pending_exact_copies_.insert(pending_exact_copies_.end(), {get(parent).exact_slot, c.exact_slot});
  seqs_.emplace(child, std::move(c));
}

void KvCacheManager::free(int64_t seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  const std::vector<int32_t>& t = it->second.table;
  for (auto id = t.rbegin(); id != t.rend(); ++id)  // tail first: evicted before the head
    if (*id >= 0) drop(*id);
  if (it->second.exact_slot >= 0) free_exact_slots_.insert(it->second.exact_slot);
  seqs_.erase(it);
}

int KvCacheManager::slot(int64_t seq, int position) const {
  const Seq& s = get(seq);
  LLM_CHECK(position >= 0 && position < int(s.table.size()) * block_size_)
      << "position " << position << " outside the " << s.table.size() << " blocks of sequence " << seq;
  LLM_CHECK(position / block_size_ >= s.dropped)
      << "position " << position << " of sequence " << seq << " is in a block its sliding window released";
  return s.table[position / block_size_] * block_size_ + position % block_size_;
}

std::vector<std::pair<int, int>> KvCacheManager::take_pending_copies() {
  std::vector<std::pair<int, int>> out;
  out.swap(pending_copies_);
  return out;
}

KvCacheStats KvCacheManager::stats() const {
  KvCacheStats st;
  st.total_blocks = pool_.num_blocks();
  st.used_blocks = pool_.num_in_use();
  st.cached_blocks = pool_.num_cached();
  st.free_blocks = pool_.num_free();
  st.usage = double(st.used_blocks) / st.total_blocks;
  st.prompt_tokens_looked_up = lookup_tokens_;
  st.prompt_tokens_cached = cached_tokens_;
  st.prefix_hit_rate = lookup_tokens_ ? double(cached_tokens_) / double(lookup_tokens_) : 0.0;
  std::vector<int> fill(pool_.num_blocks(), 0);  // computed tokens in each block (max over its tables)
  for (const auto& [id, s] : seqs_)
    for (int i = s.dropped; i < int(s.table.size()); ++i)
      fill[s.table[i]] = std::max(fill[s.table[i]], std::clamp(s.num_computed - i * block_size_, 0, block_size_));
  for (int f : fill) st.filled_slots += f;
  st.allocated_slots = int64_t(st.used_blocks) * block_size_;
  st.waste = st.allocated_slots ? double(st.allocated_slots - st.filled_slots) / double(st.allocated_slots) : 0.0;
  st.cow_copies = cow_copies_;
  st.evictions = pool_.stats().evictions;
  return st;
}

void KvCacheManager::check_invariants() const {
  pool_.check_invariants();
  const int n = pool_.num_blocks();
  std::vector<int> refs(n, 0);
  std::vector<int64_t> family(n, -1);
  std::vector<char> mixed(n, 0);
  for (const auto& [id, s] : seqs_) {
    LLM_CHECK(int(s.table.size()) >= blocks_for(s.num_computed))
        << "sequence " << id << " computed " << s.num_computed << " tokens in " << s.table.size() << " blocks";
    LLM_CHECK(s.hashes.size() <= s.table.size()) << "sequence " << id << " has more hashes than blocks";
    // (a whole-prompt cache hit keeps the hash of its last block while computing its last token again)
    LLM_CHECK(int(s.hashes.size()) <= blocks_for(s.num_computed))
        << "sequence " << id << " has hashes for blocks past its " << s.num_computed << " computed tokens";
    LLM_CHECK(s.dropped >= 0 && s.dropped <= first_needed_block(std::max(0, s.num_computed)) &&
              s.dropped <= int(s.table.size()))
        << "sequence " << id << " released " << s.dropped << " blocks its window still reads";
    for (int i = 0; i < s.dropped; ++i)
      LLM_CHECK(s.table[size_t(i)] == kDropped) << "sequence " << id << " holds a block before its window";
    std::vector<int32_t> sorted(s.table.begin() + s.dropped, s.table.end());
    std::sort(sorted.begin(), sorted.end());
    LLM_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end())
        << "sequence " << id << " holds a block twice";
    for (int32_t b : sorted) {
      LLM_CHECK(b >= 0 && b < n) << "sequence " << id << " holds block " << b << " out of range";
      ++refs[b];
      if (family[b] < 0) family[b] = s.family;
      else if (family[b] != s.family) mixed[b] = 1;
    }
  }
  for (int b = 0; b < n; ++b) {
    LLM_CHECK(refs[b] == pool_.ref_count(b))
        << "block " << b << " has ref count " << pool_.ref_count(b) << " but " << refs[b] << " tables hold it";
    LLM_CHECK(!mixed[b] || pool_.is_hashed(b)) << "block " << b << " shared across fork families without a hash";
  }
  for (const auto& [src, dst] : pending_copies_)
    LLM_CHECK(pool_.ref_count(dst) > 0) << "pending copy into free block " << dst;
  std::set<int> held;
  for (const auto& [id, s] : seqs_) {
    LLM_CHECK((s.exact_slot >= 0) == exact_slots_) << "sequence " << id << " exact slot " << s.exact_slot;
    if (s.exact_slot < 0) continue;
    LLM_CHECK(s.exact_slot < next_exact_slot_ && !free_exact_slots_.count(s.exact_slot) && held.insert(s.exact_slot).second)
        << "sequence " << id << " holds exact slot " << s.exact_slot << " that is free or held twice";
  }
}

}  // namespace llmctl
