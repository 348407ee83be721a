// The CPU backend's attention work items (engine/backend/cpu/cpu_attention_items.h): every query
// token of every query head exactly once, tiles of one sequence and one kv head per item, at most the
// kernel's tile count, and the largest shape that leaves each thread 4 items.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "engine/backend/cpu/cpu_attention_items.h"

using namespace llmctl;
using cpu::AttentionItem;
using cpu::AttentionUnit;

namespace {

// A sequence of `tokens` prompt tokens from row `first`: tiles of 4, then single tokens.
void add_sequence(std::vector<AttentionUnit>& units, int32_t first, int32_t tokens, int32_t seq) {
  int32_t t = first;
  for (; t + 4 <= first + tokens; t += 4) units.push_back({t, 4, seq});
  for (; t < first + tokens; ++t) units.push_back({t, 1, seq});
}

// Checks the items' invariants; returns the most tiles an item holds.
int check_items(const std::vector<AttentionUnit>& units, const std::vector<AttentionItem>& items, int hq, int group,
                int max_tiles) {
  std::map<std::pair<int32_t, int>, int> seen;  // (query row, head) -> times
  int most = 0;
  for (const AttentionItem& it : items) {
    REQUIRE(it.units >= 1);
    REQUIRE(it.heads >= 1);
    REQUIRE(it.unit + it.units <= int32_t(units.size()));
    CHECK(it.head / group == (it.head + it.heads - 1) / group);  // one kv head
    const AttentionUnit& a = units[size_t(it.unit)];
    if (a.count == 1) {
      CHECK(it.units == 1);
      CHECK(it.heads == 1);
    } else {
      CHECK(it.units * it.heads <= max_tiles);
      most = std::max(most, it.units * it.heads);
      for (int32_t u = it.unit; u < it.unit + it.units; ++u) {
        CHECK(units[size_t(u)].count == 4);
        CHECK(units[size_t(u)].seq == a.seq);
      }
    }
    for (int32_t u = it.unit; u < it.unit + it.units; ++u)
      for (int h = it.head; h < it.head + it.heads; ++h)
        for (int j = 0; j < units[size_t(u)].count; ++j) ++seen[{units[size_t(u)].first + j, h}];
  }
  int32_t rows = 0;
  for (const AttentionUnit& u : units) rows += u.count;
  CHECK(seen.size() == size_t(rows) * size_t(hq));
  for (const auto& [key, times] : seen) CHECK(times == 1);
  return most;
}

}  // namespace

TEST_CASE("attention items: every query token and head once, tiles as large as the threads allow") {
  SUBCASE("a long prompt, 8 kv heads of one query head: runs of 8 tiles") {
    std::vector<AttentionUnit> units;
    add_sequence(units, 0, 4096, 0);
    const auto items = cpu::attention_items(units, 8, 1, 8, 2);
    CHECK(check_items(units, items, 8, 1, 8) == 8);
    CHECK(items.size() == 8 * 128);
    CHECK(items.front().head == 0);  // kv head by kv head
    CHECK(items.back().head == 7);
  }
  SUBCASE("GQA groups of 4: the group's heads times 2 tokens' tiles; of 3: 8 tokens' tiles a head") {
    std::vector<AttentionUnit> units;
    add_sequence(units, 0, 1027, 0);  // 256 tiles and 3 single tokens
    const auto items = cpu::attention_items(units, 8, 4, 8, 2);
    CHECK(check_items(units, items, 8, 4, 8) == 8);
    for (const AttentionItem& it : items)
      if (units[size_t(it.unit)].count == 4) CHECK((it.heads == 4 && it.units <= 2));
    const auto threes = cpu::attention_items(units, 9, 3, 8, 2);  // 3 heads x 2 units is 6 tiles, not 8
    CHECK(check_items(units, threes, 9, 3, 8) == 8);
  }
  SUBCASE("a short prompt on many threads: smaller items, at least 4 a thread") {
    std::vector<AttentionUnit> units;
    add_sequence(units, 0, 64, 0);  // 16 tiles
    for (int threads : {1, 2, 4, 8, 16, 64}) {
      const auto items = cpu::attention_items(units, 8, 2, 8, threads);
      const int most = check_items(units, items, 8, 2, 8);
      CAPTURE(threads);
      if (threads <= 16) CHECK(items.size() >= size_t(4 * threads));
      if (threads == 1) CHECK(most == 8);
      if (threads == 64) CHECK(most == 1);  // 16 tiles x 8 heads: as many items as there can be
    }
  }
  SUBCASE("several sequences, decode tokens and tiles") {
    std::vector<AttentionUnit> units;
    add_sequence(units, 0, 37, 0);
    add_sequence(units, 37, 1, 1);
    add_sequence(units, 38, 40, 2);
    add_sequence(units, 78, 8, 3);
    const auto one = cpu::attention_items(units, 2, 1, 8, 1);
    CHECK(check_items(units, one, 2, 1, 8) == 8);  // sequence 0's 9 tiles: 8 + 1
    int long_runs = 0;
    for (const AttentionItem& it : one) long_runs += units[size_t(it.unit)].seq == 2 && it.units == 8;
    CHECK(long_runs == 2);  // sequence 2's 10 tiles: 8 + 2 on each of 2 heads
    for (int threads : {1, 3})
      for (auto [hq, group] : {std::pair{4, 1}, {8, 4}, {12, 12}, {16, 16}}) {
        CAPTURE(hq);
        CAPTURE(group);
        check_items(units, cpu::attention_items(units, hq, group, 8, threads), hq, group, 8);
      }
  }
  SUBCASE("no units, or a bad grouping") {
    CHECK(cpu::attention_items({}, 8, 2, 8, 2).empty());
    CHECK_THROWS(cpu::attention_items({}, 8, 3, 8, 2));
  }
}
