#include "engine/tokenizer/bpe_model.h"

#include <queue>

#include "engine/core/error.h"
#include "engine/tokenizer/byte_unicode.h"

namespace llmctl {
namespace {
constexpr size_t kCacheLimit = 1 << 18;  // pieces; the cache is cleared when it grows past this
constexpr size_t kCacheMaxPiece = 256;   // longer pieces are not cached
}  // namespace

BpeModel::BpeModel(std::vector<std::string> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, Options opts)
    : opts_(opts), text_(std::move(vocab)) {
  bytes_.resize(text_.size());
  std::fill(std::begin(byte_id_), std::end(byte_id_), -1);
  text_to_id_.reserve(text_.size());
  bytes_to_id_.reserve(text_.size());
  for (int id = 0; id < int(text_.size()); ++id) {
    const std::string& t = text_[id];
    if (t.empty()) continue;  // a hole in the id range
    text_to_id_.emplace(t, id);
    if (unicode_text_to_bytes(t, bytes_[id])) {
      bytes_to_id_.emplace(bytes_[id], id);
      if (bytes_[id].size() == 1 && byte_id_[uint8_t(bytes_[id][0])] < 0) byte_id_[uint8_t(bytes_[id][0])] = id;
    } else {
      bytes_[id] = t;
    }
  }
  merge_map_.reserve(merges.size());
  merges_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& [a, b] = merges[r];
    int ia = text_to_id(a), ib = text_to_id(b), im = text_to_id(a + b);
    if (ia < 0 || ib < 0 || im < 0) {
      LLM_REQUIRE(!opts_.strict_merges) << "BPE merge " << r << " '" << a << " " << b
                                        << "' names a token that is not in the vocabulary";
      ++skipped_merges_;
      continue;
    }
    // A repeated pair keeps its first (best) rank.
    if (merge_map_.emplace(key(ia, ib), MergeInfo{int(merges_.size()), im}).second) merges_.emplace_back(ia, ib);
  }
}

int BpeModel::text_to_id(std::string_view text) const {
  auto it = text_to_id_.find(std::string(text));
  return it == text_to_id_.end() ? -1 : it->second;
}

void BpeModel::encode_word(std::string_view bytes, std::vector<int>& out) const {
  if (bytes.empty()) return;
  if (opts_.ignore_merges) {
    auto it = bytes_to_id_.find(std::string(bytes));
    if (it != bytes_to_id_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  bool cacheable = bytes.size() <= kCacheMaxPiece;
  std::string k;
  if (cacheable) {
    k.assign(bytes);
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(k);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t before = out.size();
  merge_symbols(bytes, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() >= kCacheLimit) cache_.clear();
    cache_.emplace(std::move(k), std::vector<int>(out.begin() + before, out.end()));
  }
}

void BpeModel::merge_symbols(std::string_view bytes, std::vector<int>& out) const {
  // Symbols form a doubly linked list over their first positions; merged ones are marked dead.
  struct Sym {
    int id, prev, next;
  };
  std::vector<Sym> sym;
  sym.reserve(bytes.size());
  for (unsigned char c : bytes) {
    int id = byte_id_[c] >= 0 ? byte_id_[c] : opts_.unk_id;
    if (id < 0) continue;  // no token for this byte and no unk: dropped, as HF does
    int i = int(sym.size());
    sym.push_back({id, i - 1, -1});
    if (i > 0) sym[i - 1].next = i;
  }
  if (sym.empty()) return;

  struct Cand {
    int rank, pos, left, right;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int pos) {
    if (pos < 0 || sym[pos].next < 0) return;
    int r = sym[pos].next;
    auto it = merge_map_.find(key(sym[pos].id, sym[r].id));
    if (it != merge_map_.end()) heap.push({it->second.rank, pos, sym[pos].id, sym[r].id});
  };
  for (int i = 0; i + 1 < int(sym.size()); ++i) push(i);

  while (!heap.empty()) {
    Cand c = heap.top();
    heap.pop();
    Sym& s = sym[c.pos];
    // Stale entries (a side was merged away or changed since the push) are skipped.
    if (s.id != c.left || s.next < 0 || sym[s.next].id != c.right) continue;
    int r = s.next;
    s.id = merge_map_.at(key(c.left, c.right)).id;
    s.next = sym[r].next;
    if (s.next >= 0) sym[s.next].prev = c.pos;
    sym[r].id = -1;  // dead
    push(s.prev);
    push(c.pos);
  }
  for (int i = 0; i >= 0; i = sym[i].next) out.push_back(sym[i].id);
}

}  // namespace llmctl
