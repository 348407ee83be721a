// Randomized stress test of BlockPool + KvCacheManager + Scheduler, without a model. Fixed seeds.
// Operations: submit (common prefixes, so blocks are shared), step (schedule, copy, "forward", report
// tokens, finish some, abort some in flight; a verifying step accepts a random number of its drafts and
// rolls the others back, some steps append a jump-forward run of several tokens), draft (append 1..4
// unverified tokens to a running sequence), abort (any state), fork. Small pools, so preemption and
// eviction happen a lot. After every operation the test checks from the public API:
//   - each block's ref count equals the number of block tables holding it;
//   - free + referenced + cached == total;
//   - a block in two tables is a hashed prefix block or shared inside one fork family;
//   - waiting requests hold no blocks;
//   - a hashed block in a table lies within the table's computed full blocks and is found under the
//     hash of the sequence's own tokens (no block was ever registered with a rolled-back token);
// and after every step, with a fake KV cache where each slot stores a hash of the whole token prefix
// up to its position: every sequence writes only unhashed blocks it holds alone, and reads back exactly its own
// prefix at every position of its context (prefix hits, copy-on-write and eviction all checked).
// After draining everything: no block referenced, every block free or cached.
// With a sliding window (KvCacheGroups: the full-attention layers' pool and the sliding layers' own,
// or one sliding pool), each pool has its fake cache: a sliding pool's sequences read back their own
// prefix at every position their window still covers, and hold no block wholly before it.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <span>
#include <vector>

#include "engine/sched/batch_builder.h"
#include "engine/sched/scheduler.h"

using namespace llmctl;

namespace {

struct StressConfig {
  uint64_t seed;
  int num_blocks;
  SchedulerConfig sched;
  int ops;
  int window = 0;         // > 0: a sliding window ...
  int window_blocks = 0;  // ... in a pool of this many blocks beside the full one (0: the only pool)
};

std::vector<int> group_blocks(const StressConfig& c) {
  return c.window > 0 && c.window_blocks > 0 ? std::vector<int>{c.num_blocks, c.window_blocks}
                                             : std::vector<int>{c.num_blocks};
}
std::vector<int> group_windows(const StressConfig& c) {
  return c.window > 0 && c.window_blocks > 0 ? std::vector<int>{0, c.window} : std::vector<int>{c.window};
}

uint64_t prefix_mix(uint64_t h, int32_t t, int p) {
  h ^= uint64_t(uint32_t(t)) + 0x9e3779b97f4a7c15ULL + (uint64_t(p) << 32);
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 29);
}

class Stress {
 public:
  explicit Stress(const StressConfig& c)
      : c_(c), s_(c.sched, group_blocks(c), group_windows(c)), rng_(c.seed), B_(c.sched.block_size) {
    for (int n : group_blocks(c)) kv_.emplace_back(size_t(n) * B_, 0);
    limit_ = c.num_blocks * B_;  // max_total_tokens - 1 must fit the pool ...
    if (!c.sched.chunked_prefill) limit_ = std::min(limit_, c.sched.max_num_batched_tokens);  // ... and one step
    limit_ = std::min(limit_, 80);
    for (int k = 0; k < 3; ++k) {  // shared "system prompts"
      std::vector<int32_t> p;
      int len = limit_ * (k + 1) / 5;
      for (int i = 0; i < len; ++i) p.push_back(int32_t(rng_() % 1000));
      prefixes_.push_back(p);
    }
  }

  void run() {
    for (int op = 0; op < c_.ops; ++op) {
      const int r = int(rng_() % 100);
      if (r < 28) submit();
      else if (r < 75) step(true);
      else if (r < 82) draft_one();
      else if (r < 91) abort_one();
      else fork_one();
      check();
      ++ops_done_;
    }
    drain();
  }

  int ops_done_ = 0;
  int64_t steps_ = 0, finished_ = 0, aborted_ = 0, forks_ = 0, copies_ = 0;
  int64_t drafts_ = 0, accepted_ = 0, rejected_ = 0, jumps_ = 0;
  int64_t window_reads_ = 0, dropped_seen_ = 0;  // reads that started past key 0, released table entries seen
  Scheduler& sched() { return s_; }

 private:
  int rnd(int lo, int hi) { return lo + int(rng_() % uint64_t(hi - lo + 1)); }  // [lo, hi]

  void submit() {
    if (live_.size() >= 40) return;
    std::vector<int32_t> prompt;
    const int k = rnd(0, 3);
    if (k < 3) prompt = prefixes_[k];
    const int suffix = rnd(1, std::max(1, limit_ / 3));
    for (int i = 0; i < suffix; ++i) prompt.push_back(int32_t(rng_() % 4));  // tiny vocab: more sharing
    if (int(prompt.size()) > limit_ - 1) prompt.resize(limit_ - 1);
    const int max_total = rnd(int(prompt.size()) + 1, std::min(limit_, int(prompt.size()) + 24));
    const int64_t id = next_id_++;
    s_.add(id, prompt, max_total);
    live_.insert(id);
    family_[id] = id;
  }

  std::vector<uint64_t> prefix_hashes(const std::vector<int32_t>& t) const {
    std::vector<uint64_t> h(t.size());
    uint64_t x = 0x1234;
    for (size_t p = 0; p < t.size(); ++p) h[p] = x = prefix_mix(x, t[p], int(p));
    return h;
  }

  void step(bool allow_abort) {
    SchedulerOutput out = s_.schedule();
    ++steps_;
    const KvCacheGroups& kv = s_.kv();
    for (int64_t id : out.preempted) {
      for (const auto& q : out.seqs) REQUIRE(q.seq_id != id);
      REQUIRE(s_.sequence(id).state == SeqStatus::waiting);
    }
    REQUIRE(int(out.block_copies.size()) == kv.num_groups());
    for (int g = 0; g < kv.num_groups(); ++g)
      for (const auto& [src, dst] : out.block_copies[size_t(g)]) {  // copy-on-write, before the forward
        REQUIRE(kv.group(g).pool().ref_count(dst) == 1);
        std::copy_n(kv_[size_t(g)].begin() + size_t(src) * B_, B_, kv_[size_t(g)].begin() + size_t(dst) * B_);
        ++copies_;
      }
    BatchPlan plan = build_batch_plan(out, s_);
    plan.validate(B_, kv.group(0).num_blocks(), kv.group(0).window());
    if (!out.empty()) REQUIRE(plan.has_window_tables() == (kv.num_groups() > 1));
    if (plan.has_window_tables()) plan.validate_window_tables(B_, kv.group(1).num_blocks(), kv.group(1).window());
    int sampling = 0;
    for (const auto& q : out.seqs) {
      sampling += q.samples ? 1 + q.num_draft : 0;
      const Sequence& r = s_.sequence(q.seq_id);
      REQUIRE(q.num_draft == (q.samples ? r.num_draft : 0));
      if (!q.samples) REQUIRE(q.start + q.num_new <= r.verify_start());  // drafts are verified whole
    }
    REQUIRE(int(plan.logits_rows.size()) == sampling);
    REQUIRE(out.num_tokens <= c_.sched.max_num_batched_tokens);
    REQUIRE(int(out.seqs.size()) <= c_.sched.max_num_seqs);
    // "forward": write each new token's prefix hash, only into blocks held alone, in every pool
    std::map<int64_t, std::vector<uint64_t>> ph;
    for (const auto& q : out.seqs) {
      const Sequence& r = s_.sequence(q.seq_id);
      REQUIRE(r.state == SeqStatus::running);
      auto& h = ph[q.seq_id] = prefix_hashes(r.tokens);
      for (int g = 0; g < kv.num_groups(); ++g) {
        const KvCacheManager& m = kv.group(g);
        const auto& table = m.block_table(q.seq_id);
        for (int p = q.start; p < q.start + q.num_new; ++p) {
          REQUIRE(m.pool().ref_count(table[p / B_]) == 1);  // held alone ...
          REQUIRE_FALSE(m.pool().is_hashed(table[p / B_]));   // ... and not a shareable prefix block
          kv_[size_t(g)][size_t(m.slot(q.seq_id, p))] = h[p];
        }
      }
    }
    // "attention": every sequence reads exactly its own prefix at every position of its context that
    // its first new token's window covers
    for (const auto& q : out.seqs) {
      const auto& h = ph[q.seq_id];
      for (int g = 0; g < kv.num_groups(); ++g) {
        const KvCacheManager& m = kv.group(g);
        const int first = m.window() > 0 ? std::max(0, q.start - m.window() + 1) : 0;
        for (int p = first; p < q.start + q.num_new; ++p) REQUIRE(kv_[size_t(g)][size_t(m.slot(q.seq_id, p))] == h[p]);
        window_reads_ += m.window() > 0 && first > 0;
      }
    }
    for (const auto& q : out.seqs) {
      if (allow_abort && rng_() % 50 == 0) {  // aborted between the forward and its report
        REQUIRE(s_.abort(q.seq_id));
        live_.erase(q.seq_id);
        ++aborted_;
        if (rng_() % 2) continue;  // the engine may skip its report
      }
      const bool fin = q.samples && rng_() % 12 == 0;
      if (!s_.has(q.seq_id) || (q.num_draft == 0 && rng_() % 2)) {  // aborted, or the one-token report
        std::optional<int32_t> tok;
        if (q.samples) tok = int32_t(rng_() % 4);
        if (s_.on_step_done(q.seq_id, tok, fin) && live_.erase(q.seq_id)) ++finished_;
        continue;
      }
      StepOutcome o;
      std::vector<int32_t> appended;
      if (q.samples) {
        const Sequence& r = s_.sequence(q.seq_id);
        o.num_accepted = rnd(0, q.num_draft);
        accepted_ += o.num_accepted;
        rejected_ += q.num_draft - o.num_accepted;
        // After the accepted drafts: the verifier's token, sometimes a jump-forward run (within the limit).
        const int room = r.max_total_tokens - (int(r.tokens.size()) - (q.num_draft - o.num_accepted));
        const int n = rng_() % 6 == 0 ? rnd(1, std::min(room, 5)) : 1;
        jumps_ += n > 1;
        for (int i = 0; i < n; ++i) appended.push_back(int32_t(rng_() % 4));
        o.appended = appended;
      }
      o.finished = fin;
      if (s_.on_step_done(q.seq_id, o) && live_.erase(q.seq_id)) ++finished_;
    }
  }

  void draft_one() {
    std::vector<int64_t> running;
    for (int64_t id : live_) {
      const Sequence& r = s_.sequence(id);
      if (r.state == SeqStatus::running && int(r.tokens.size()) + 1 < r.max_total_tokens &&
          r.num_draft + 2 <= c_.sched.max_num_batched_tokens)
        running.push_back(id);
    }
    if (running.empty()) return;
    const int64_t id = running[rng_() % running.size()];
    const Sequence& r = s_.sequence(id);
    const int room = std::min(r.max_total_tokens - 1 - int(r.tokens.size()),
                              c_.sched.max_num_batched_tokens - 1 - r.num_draft);
    std::vector<int32_t> d;
    for (int i = rnd(1, std::min(room, 4)); i > 0; --i) d.push_back(int32_t(rng_() % 4));
    s_.append_draft(id, d);
    drafts_ += int64_t(d.size());
  }

  void abort_one() {
    if (live_.empty()) return;
    auto it = live_.begin();
    std::advance(it, rnd(0, int(live_.size()) - 1));
    REQUIRE(s_.abort(*it));
    REQUIRE_FALSE(s_.kv().has(*it));
    live_.erase(it);
    ++aborted_;
  }

  void fork_one() {
    std::vector<int64_t> running;
    for (int64_t id : live_)
      if (s_.sequence(id).state == SeqStatus::running) running.push_back(id);
    if (running.empty() || live_.size() >= 40) return;
    const int64_t parent = running[rng_() % running.size()];
    if (s_.sequence(parent).num_draft > 0) return;  // drafts are not forked
    const int64_t child = next_id_++;
    std::optional<int32_t> last;
    if (rng_() % 2) last = int32_t(rng_() % 4);
    s_.fork(parent, child, last);
    live_.insert(child);
    family_[child] = family_[parent];
    ++forks_;
  }

  void check() {
    s_.check_invariants();
    for (int g = 0; g < s_.kv().num_groups(); ++g) check_group(s_.kv().group(g));
  }

  void check_group(const KvCacheManager& kv) {
    const BlockPool& pool = kv.pool();
    const int n = kv.num_blocks();
    std::vector<int> holders(n, 0);
    std::vector<std::set<int64_t>> families(n);
    for (int64_t id : live_) {
      REQUIRE(s_.has(id));
      const Sequence& r = s_.sequence(id);
      if (r.state == SeqStatus::waiting) {
        REQUIRE_FALSE(kv.has(id));
        continue;
      }
      REQUIRE(r.state == SeqStatus::running);
      const auto& table = kv.block_table(id);
      // a window's blocks wholly before the first key of the token before the next are released
      // (admission with a cache hit keeps that one's; the next commit releases the rest)
      const int gone = kv.window() > 0 ? std::max(0, r.num_computed - kv.window()) / B_ : 0;
      uint64_t parent = BlockPool::kRootHash;
      for (int i = 0; i < int(table.size()); ++i) {
        if (i < gone) {
          REQUIRE(table[i] == KvCacheManager::kDropped);
          ++dropped_seen_;
        }
        if (table[i] == KvCacheManager::kDropped) {
          REQUIRE(kv.window() > 0);
          REQUIRE((i + 1) * B_ <= std::max(0, r.num_computed - kv.window() + 1));  // only before the window
        } else {
          ++holders[table[i]];
          families[table[i]].insert(family_.at(id));
        }
        if ((i + 1) * B_ > r.num_computed) {  // not a computed full block: never hashed
          if (table[i] >= 0) REQUIRE_FALSE(pool.is_hashed(table[i]));
          continue;
        }
        std::span<const int32_t> blk(r.tokens.data() + size_t(i) * B_, size_t(B_));
        const uint64_t h = BlockPool::hash_block(parent, blk);
        if (table[i] >= 0 && pool.is_hashed(table[i])) REQUIRE(pool.find(h, parent, blk) == table[i]);
        parent = h;
      }
    }
    int referenced = 0;
    for (int b = 0; b < n; ++b) {
      REQUIRE(pool.ref_count(b) == holders[b]);
      referenced += holders[b] > 0;
      if (families[b].size() > 1) REQUIRE(pool.is_hashed(b));  // shared across requests: a prefix block
    }
    REQUIRE(pool.num_free() + referenced + pool.num_cached() == n);
    REQUIRE(pool.num_in_use() == referenced);
  }

  void drain() {
    for (int guard = 0; s_.has_unfinished(); ++guard) {
      REQUIRE(guard < 100000);
      step(false);
      check();
    }
    REQUIRE(live_.empty());
    REQUIRE(s_.kv().num_seqs() == 0);
    for (int g = 0; g < s_.kv().num_groups(); ++g) {
      const BlockPool& pool = s_.kv().group(g).pool();
      REQUIRE(pool.num_in_use() == 0);
      REQUIRE(pool.num_free() + pool.num_cached() == pool.num_blocks());
      for (int b = 0; b < pool.num_blocks(); ++b) REQUIRE(pool.ref_count(b) == 0);
    }
  }

  StressConfig c_;
  Scheduler s_;
  std::mt19937_64 rng_;
  int B_;
  std::vector<std::vector<uint64_t>> kv_;  // fake KV cache of each pool: one prefix hash per slot
  int limit_ = 0;
  std::vector<std::vector<int32_t>> prefixes_;
  std::set<int64_t> live_;
  std::map<int64_t, int64_t> family_;
  int64_t next_id_ = 0;
};

SchedulerConfig sc(int max_seqs, int max_tokens, int block_size, bool prefix, bool chunked, bool defer = true) {
  SchedulerConfig c;
  c.max_num_seqs = max_seqs;
  c.max_num_batched_tokens = max_tokens;
  c.block_size = block_size;
  c.enable_prefix_caching = prefix;
  c.chunked_prefill = chunked;
  c.defer_shared_prefill = defer;
  return c;
}

}  // namespace

TEST_CASE("stress: pool + cache manager + scheduler under random submit / step / abort / fork") {
  const std::vector<StressConfig> configs = {
      {1, 24, sc(6, 16, 4, true, true), 12000},
      {2, 8, sc(8, 12, 4, true, false, false), 12000},
      {3, 16, sc(6, 32, 8, false, true), 12000},
      {4, 12, sc(16, 8, 2, true, true), 12000},
      // sliding windows: a pool of their own beside the full one; the only pool
      {5, 24, sc(6, 16, 4, true, true), 12000, 7, 20},
      {6, 12, sc(6, 12, 4, true, true), 12000, 9, 0},
  };
  int64_t total_ops = 0;
  for (const auto& c : configs) {
    CAPTURE(c.seed);
    Stress st(c);
    st.run();
    const SchedulerStats& ss = st.sched().stats();
    const KvCacheStats ks = st.sched().kv().stats();
    MESSAGE("seed " << c.seed << ": " << st.ops_done_ << " ops, " << st.steps_ << " steps, " << ss.admitted
                    << " admissions, " << ss.preemptions << " preemptions, " << ks.evictions << " evictions, "
                    << st.forks_ << " forks, " << st.copies_ << " block copies, " << st.finished_ << " finished, "
                    << st.aborted_ << " aborted, prefix hit rate " << ks.prefix_hit_rate << ", " << st.drafts_
                    << " drafts (" << st.accepted_ << " accepted, " << st.rejected_ << " rolled back), "
                    << st.jumps_ << " jump-forward runs, " << st.window_reads_ << " windowed reads, "
                    << st.dropped_seen_ << " released blocks seen");
    if (c.window > 0) {
      CHECK(st.window_reads_ > 1000);
      CHECK(st.dropped_seen_ > 1000);
    }
    CHECK(st.ops_done_ >= 10000);
    CHECK(ss.preemptions > 50);
    CHECK(st.finished_ > 100);
    CHECK(st.forks_ > 100);
    CHECK(st.accepted_ > 100);
    CHECK(st.rejected_ > 100);
    CHECK(st.jumps_ > 20);
    if (c.sched.enable_prefix_caching) {
      CHECK(ks.evictions > 50);
      CHECK(ks.prefix_hit_rate > 0.05);
    }
    total_ops += st.ops_done_;
  }
  CHECK(total_ops >= 60000);
}
