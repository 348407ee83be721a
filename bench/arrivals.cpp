#include "bench/arrivals.h"

#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "engine/core/error.h"

namespace llmctl::bench {

std::vector<double> poisson_arrivals(int n, double rate, uint64_t seed) {
  LLM_REQUIRE(rate > 0) << "request rate must be > 0 (or inf), got " << rate;
  std::vector<double> t(size_t(std::max(n, 0)), 0.0);
  if (std::isinf(rate)) return t;
  std::mt19937_64 rng(seed);
  double now = 0;
  for (auto& x : t) {
    const double u = double(rng() >> 11) * 0x1.0p-53;  // [0, 1)
    now += -std::log1p(-u) / rate;
    x = now;
  }
  return t;
}

std::vector<double> parse_rates(const std::string& list) {
  std::vector<double> out;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item == "inf" || item == "Inf" || item == "INF") {
      out.push_back(std::numeric_limits<double>::infinity());
      continue;
    }
    size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    LLM_REQUIRE(used == item.size() && !item.empty() && v > 0 && std::isfinite(v))
        << "bad request rate '" << item << "' (expected positive numbers or inf, e.g. 1,4,16,inf)";
    out.push_back(v);
  }
  LLM_REQUIRE(!out.empty()) << "no request rate given";
  return out;
}

std::string format_rate(double rate) {
  if (std::isinf(rate)) return "inf";
  std::ostringstream os;
  os << rate;
  return os.str();
}

}  // namespace llmctl::bench
