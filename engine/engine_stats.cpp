#include "engine/engine_stats.h"

#include <algorithm>

namespace llmctl {

void EngineStats::record_step(const KvCacheGroups& groups, int64_t preempted) {
  ++steps;
  preemptions += preempted;
  const KvCacheStats now = groups.stats();
  waste_sum += now.waste;
  usage_peak = std::max(usage_peak, now.usage);
  peak_blocks.resize(size_t(groups.num_groups()), 0);
  for (int g = 0; g < groups.num_groups(); ++g)
    peak_blocks[size_t(g)] = std::max(peak_blocks[size_t(g)], groups.group(g).pool().num_in_use());
}

}  // namespace llmctl
