// engine/core/cpu_topology: physical cores from sysfs-style thread-sibling lists, cgroup quotas, and
// the default thread count built from them.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "engine/core/cpu_topology.h"

using namespace llmctl;

TEST_CASE("physical_cores: SMT siblings count once, among the allowed CPUs only") {
  // 4 cores x 2 threads, numbered as Linux numbers them: cpu c and c + 4 share a core
  const std::map<int, std::string> smt = {{0, "0,4"}, {1, "1,5"}, {2, "2,6"}, {3, "3,7"},
                                          {4, "0,4"}, {5, "1,5"}, {6, "2,6"}, {7, "3,7"}};
  auto of = [&](int c) { return smt.at(c); };
  CHECK(physical_cores({0, 1, 2, 3, 4, 5, 6, 7}, of) == 4);
  CHECK(physical_cores({0, 4}, of) == 1);  // both threads of one core
  CHECK(physical_cores({0, 1}, of) == 2);
  CHECK(physical_cores({5}, of) == 1);
  CHECK(physical_cores({}, of) == 0);
  const std::map<int, std::string> ranges = {{0, "0-1"}, {1, "0-1"}, {2, "2-3"}, {3, "2-3"}};  // adjacent siblings
  CHECK(physical_cores({0, 1, 2, 3}, [&](int c) { return ranges.at(c); }) == 2);
  CHECK(physical_cores({0, 1, 2}, [](int c) { return std::to_string(c); }) == 3);  // no SMT
  CHECK(physical_cores({0, 1, 2}, [](int) { return std::string(); }) == 3);        // unreadable: each alone
}

TEST_CASE("parse_cpu_list: sysfs CPU lists; anything malformed is no list") {
  CHECK(parse_cpu_list("0-3,8,10-11") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(parse_cpu_list("5") == std::vector<int>{5});
  CHECK(parse_cpu_list("16-23") == std::vector<int>{16, 17, 18, 19, 20, 21, 22, 23});
  CHECK(parse_cpu_list("3,1,2-2") == std::vector<int>{1, 2, 3});
  for (const char* bad : {"", "x", "3-", "-1", "5-3", "1-2-3", "1;2", "2x", "0-70000"}) {
    INFO(bad);
    CHECK(parse_cpu_list(bad).empty());
  }
}

TEST_CASE("performance_cpus: a hybrid CPU's efficiency cores left out, unless only they are allowed") {
  // 6 P-cores with SMT (0-11) and 8 E-cores (12-19), as an Intel hybrid laptop part lists them
  std::vector<int> all;
  for (int c = 0; c < 20; ++c) all.push_back(c);
  const std::vector<int> atoms = parse_cpu_list("12-19");
  const std::vector<int> fast = performance_cpus(all, atoms);
  CHECK(fast.size() == 12);
  CHECK(fast.back() == 11);
  auto siblings = [](int c) { return std::to_string(c / 2 * 2) + "-" + std::to_string(c / 2 * 2 + 1); };
  CHECK(physical_cores(fast, siblings) == 6);
  CHECK(performance_cpus({12, 13}, atoms) == std::vector<int>{12, 13});  // taskset to E-cores: kept
  CHECK(performance_cpus({0, 12}, atoms) == std::vector<int>{0});
  CHECK(performance_cpus({0, 1}, {}) == std::vector<int>{0, 1});  // not hybrid
}

TEST_CASE("quota_cpus: a cgroup cpu.max line as whole CPUs, rounded up; none for 'max' or anything else") {
  CHECK(quota_cpus("200000 100000") == 2);
  CHECK(quota_cpus("150000 100000") == 2);
  CHECK(quota_cpus("50000 100000") == 1);
  CHECK(quota_cpus("1600000 100000") == 16);
  CHECK(quota_cpus("max 100000") == 0);
  CHECK(quota_cpus("-1 100000") == 0);  // cgroup v1's "no quota", as the reader joins its two files
  CHECK(quota_cpus("100000 0") == 0);
  CHECK(quota_cpus("") == 0);
  CHECK(quota_cpus("garbage") == 0);
}

TEST_CASE("default_cpu_threads: at least one, at most the online CPUs, the same every call") {
  const int n = default_cpu_threads();
  CHECK(n >= 1);
  CHECK(n <= int(std::max(1u, std::thread::hardware_concurrency())));
  CHECK(default_cpu_threads() == n);
}
