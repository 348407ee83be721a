// The byte-level BPE model: a vocabulary in GPT-2 byte spelling and ranked merges. encode_word
// turns one pre-tokenized piece (raw bytes) into ids by applying the lowest-rank merge first
// (leftmost on ties), with a per-piece cache.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace llmctl {

class BpeModel {
 public:
  struct Options {
    bool ignore_merges = false;  // a piece that is itself in the vocabulary is one token (Llama 3)
    int unk_id = -1;             // for bytes missing from the vocabulary; -1: they are dropped
    bool strict_merges = true;   // a merge naming unknown tokens throws; else it is skipped
  };

  BpeModel() = default;
  // vocab[id] is the entry as written ("Ġthe"); merges are pairs of entries, best rank first.
  BpeModel(std::vector<std::string> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           Options opts);
  BpeModel(const BpeModel&) = delete;
  BpeModel& operator=(const BpeModel&) = delete;

  void encode_word(std::string_view bytes, std::vector<int>& out) const;

  int size() const { return int(text_.size()); }
  const std::string& text(int id) const { return text_[id]; }
  // Raw bytes of an entry: the byte-level spelling undone, or the entry itself (UTF-8) when it
  // has characters outside the byte alphabet (added tokens such as "<｜begin▁of▁sentence｜>").
  const std::string& bytes(int id) const { return bytes_[id]; }
  int text_to_id(std::string_view text) const;  // -1 when absent
  const Options& options() const { return opts_; }
  // Merges that were kept, best rank first, as (left id, right id).
  const std::vector<std::pair<int, int>>& merges() const { return merges_; }
  size_t skipped_merges() const { return skipped_merges_; }

 private:
  struct MergeInfo {
    int rank;
    int id;
  };
  static uint64_t key(int a, int b) { return uint64_t(uint32_t(a)) << 32 | uint32_t(b); }
  void merge_symbols(std::string_view bytes, std::vector<int>& out) const;

  Options opts_;
  std::vector<std::string> text_, bytes_;
  std::unordered_map<std::string, int> text_to_id_;
  std::unordered_map<std::string, int> bytes_to_id_;  // entries written in the byte alphabet only
  int byte_id_[256];
  std::unordered_map<uint64_t, MergeInfo> merge_map_;
  std::vector<std::pair<int, int>> merges_;
  size_t skipped_merges_ = 0;

  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int>> cache_;
};

}  // namespace llmctl
