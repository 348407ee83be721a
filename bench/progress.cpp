#include "bench/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace llmctl::bench {

Progress::Progress(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)),
      total_(std::max<int64_t>(total, 1)),
      enabled_(enabled),
      tty_(isatty(fileno(stderr)) != 0),
      start_(std::chrono::steady_clock::now()),
      last_(start_) {}

Progress::~Progress() { finish(); }

void Progress::update(int64_t done, const std::string& note) {
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double since = std::chrono::duration<double>(now - last_).count();
  if (elapsed < 2.0 || since < (tty_ ? 0.1 : 10.0)) return;
  last_ = now;
  const double frac = std::clamp(double(done) / double(total_), 0.0, 1.0);
  const double eta = frac > 0 ? elapsed * (1 - frac) / frac : 0;
  if (tty_) {
    constexpr int kWidth = 30;
    const int fill = int(frac * kWidth);
    std::fprintf(stderr, "\r%s [%s%s] %lld/%lld %3.0f%% %.0fs, eta %.0fs %s\033[K", label_.c_str(),
                 std::string(size_t(fill), '#').c_str(), std::string(size_t(kWidth - fill), '.').c_str(),
                 (long long)done, (long long)total_, 100 * frac, elapsed, eta, note.c_str());
  } else {
    std::fprintf(stderr, "%s: %lld/%lld (%.0f%%) after %.0fs %s\n", label_.c_str(), (long long)done,
                 (long long)total_, 100 * frac, elapsed, note.c_str());
  }
  std::fflush(stderr);
  drawn_ = true;
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (drawn_ && tty_) std::fprintf(stderr, "\n");
}

}  // namespace llmctl::bench
