#include "engine/structured/mask_fill.h"

#include <algorithm>
#include <thread>

namespace llmctl {

namespace {
void fill_one(const MaskJob& j) {
  try {
    j.matcher->fill_mask(j.words);
  } catch (...) {
    std::fill(j.words.begin(), j.words.end(), 0u);
  }
}
}  // namespace

void fill_masks(const std::vector<MaskJob>& jobs) {
  if (jobs.empty()) return;  // every step without constrained sequences (twice a step)
  // read once: glibc counts the cores from sysfs on every call (an open and a read a decode step)
  static const size_t cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min({cores, size_t(8), (jobs.size() + 3) / 4});
  if (threads <= 1) {
    for (const MaskJob& j : jobs) fill_one(j);
    return;
  }
  // Thread t fills jobs t, t + threads, ... (each matcher is touched by one thread).
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t)
    pool.emplace_back([&jobs, t, threads] {
      for (size_t i = t; i < jobs.size(); i += threads) fill_one(jobs[i]);
    });
  for (size_t i = 0; i < jobs.size(); i += threads) fill_one(jobs[i]);
  for (std::thread& th : pool) th.join();
}

std::shared_future<void> fill_masks_async(std::vector<MaskJob> jobs) {
  return std::async(std::launch::async, [jobs = std::move(jobs)] { fill_masks(jobs); }).share();
}

}  // namespace llmctl
