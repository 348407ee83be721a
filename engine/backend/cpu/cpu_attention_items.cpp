#include "engine/backend/cpu/cpu_attention_items.h"

#include <algorithm>

#include "engine/core/error.h"

namespace llmctl::cpu {

namespace {

struct Run {
  int32_t unit, units;
};

// A sequence's consecutive tiles in runs of at most `most`; single tokens as runs of one.
std::vector<Run> runs_of(const std::vector<AttentionUnit>& units, int most) {
  std::vector<Run> runs;
  for (int32_t u = 0; u < int32_t(units.size()); ++u) {
    const AttentionUnit& a = units[size_t(u)];
    if (!runs.empty() && a.count == 4) {
      Run& r = runs.back();
      const AttentionUnit& b = units[size_t(r.unit)];
      if (b.count == 4 && b.seq == a.seq && r.units < most) {
        ++r.units;
        continue;
      }
    }
    runs.push_back({u, 1});
  }
  return runs;
}

std::vector<AttentionItem> items_of(const std::vector<AttentionUnit>& units, const std::vector<Run>& runs, int hq,
                                    int group, int heads) {
  std::vector<AttentionItem> items;
  const int64_t n = int64_t(runs.size());
  for (int h0 = 0; h0 < hq; h0 += group)                // kv head by kv head
    for (int c = h0; c < h0 + group; c += heads)        // its query heads, `heads` at a time for tiles
      for (int64_t k = 0; k < n; ++k) {
        const Run& r = runs[size_t(balanced_order(k, n))];
        if (units[size_t(r.unit)].count == 4)
          items.push_back({r.unit, r.units, c, heads});
        else
          for (int h = c; h < c + heads; ++h) items.push_back({r.unit, 1, h, 1});
      }
  return items;
}

}  // namespace

std::vector<AttentionItem> attention_items(const std::vector<AttentionUnit>& units, int hq, int group,
                                           int max_tiles, int threads) {
  LLM_CHECK(group >= 1 && hq % group == 0 && max_tiles >= 1 && threads >= 1)
      << "attention_items: " << hq << " query heads in groups of " << group << ", " << max_tiles << " tiles";
  int64_t singles = 0;
  for (const AttentionUnit& u : units) singles += u.count == 1;
  // shapes by falling tile count (heads a divisor of the group, then units), the first with enough items
  for (int tiles = max_tiles; tiles > 1; --tiles)
    for (int heads = std::min(group, tiles); heads >= 1; --heads) {
      if (group % heads != 0 || tiles % heads != 0) continue;
      const std::vector<Run> runs = runs_of(units, tiles / heads);
      const int64_t tile_runs = int64_t(runs.size()) - singles;
      if (tile_runs * (hq / heads) + singles * hq >= 4 * int64_t(threads))
        return items_of(units, runs, hq, group, heads);
    }
  return items_of(units, runs_of(units, 1), hq, group, 1);
}

}  // namespace llmctl::cpu
