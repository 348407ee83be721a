#include "engine/structured/mask_fill.h"

#include <algorithm>

namespace llmctl {

std::shared_future<void> fill_masks_async(std::vector<MaskJob> jobs) {
  return std::async(std::launch::async, [jobs = std::move(jobs)] {
           for (const MaskJob& j : jobs) {
             try {
               j.matcher->fill_mask(j.words);
             } catch (...) {
               std::fill(j.words.begin(), j.words.end(), 0u);
             }
           }
         })
      .share();
}

}  // namespace llmctl
