#include "bench/stats.h"

#include <algorithm>
#include <cmath>

#include "engine/core/error.h"

namespace llmctl::bench {

double percentile(std::vector<double> v, double q) {
  LLM_CHECK(q >= 0 && q <= 100) << "percentile " << q;
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = q / 100.0 * double(v.size() - 1);
  const size_t lo = size_t(std::floor(idx)), hi = std::min(lo + 1, v.size() - 1);
  const double frac = idx - double(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

Summary summarize(const std::vector<double>& v) {
  Summary s;
  s.n = int(v.size());
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / double(v.size());
  if (v.size() > 1) {
    double ss = 0;
    for (double x : v) ss += (x - s.mean) * (x - s.mean);
    s.stddev = std::sqrt(ss / double(v.size() - 1));
  }
  auto [mn, mx] = std::minmax_element(v.begin(), v.end());
  s.min = *mn;
  s.max = *mx;
  s.median = percentile(v, 50);
  s.p90 = percentile(v, 90);
  s.p99 = percentile(v, 99);
  return s;
}

void put_summary(nlohmann::ordered_json& row, const std::string& prefix, const Summary& s, double scale) {
  row[prefix + "_mean"] = s.mean * scale;
  row[prefix + "_std"] = s.stddev * scale;
  row[prefix + "_min"] = s.min * scale;
  row[prefix + "_median"] = s.median * scale;
  row[prefix + "_p90"] = s.p90 * scale;
  row[prefix + "_p99"] = s.p99 * scale;
  row[prefix + "_max"] = s.max * scale;
}

}  // namespace llmctl::bench
