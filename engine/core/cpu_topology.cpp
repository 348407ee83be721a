#include "engine/core/cpu_topology.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#if defined(__linux__)
#include <sched.h>
#endif

namespace llmctl {

namespace {

// A small text file's first line, trimmed ("" when absent or unreadable).
std::string read_line(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  if (!f || !std::getline(f, line)) return "";
  const auto b = line.find_first_not_of(" \t\r\n"), e = line.find_last_not_of(" \t\r\n");
  return b == std::string::npos ? "" : line.substr(b, e - b + 1);
}

// The CPUs this process may run on (empty where that cannot be asked).
std::vector<int> allowed_cpus() {
  std::vector<int> cpus;
#if defined(__linux__)
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
#endif
  return cpus;
}

// The quota line in cpu.max's form, from cgroup v2 or v1 ("" for none).
std::string cpu_quota_line() {
  std::string v2 = read_line("/sys/fs/cgroup/cpu.max");
  if (!v2.empty()) return v2;
  const std::string quota = read_line("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
                    period = read_line("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  return quota.empty() || period.empty() ? "" : quota + " " + period;
}

int compute_default() {
  const int online = int(std::max(1u, std::thread::hardware_concurrency()));
  const std::vector<int> efficiency = parse_cpu_list(read_line("/sys/devices/cpu_atom/cpus"));  // hybrid CPUs
  const std::vector<int> cpus = performance_cpus(allowed_cpus(), efficiency);
  int n = cpus.empty() ? online : physical_cores(cpus, [](int cpu) {
    return read_line("/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/thread_siblings_list");
  });
  const int quota = quota_cpus(cpu_quota_line());
  if (quota > 0) n = std::min(n, quota);
  return std::max(1, n);
}

}  // namespace

int physical_cores(const std::vector<int>& cpus, const std::function<std::string(int cpu)>& siblings_of) {
  std::set<std::string> cores;
  for (int cpu : cpus) {
    const std::string s = siblings_of(cpu);
    cores.insert(s.empty() ? "cpu " + std::to_string(cpu) : s);  // unknown: a core of its own
  }
  return int(cores.size());
}

std::vector<int> parse_cpu_list(const std::string& list) {
  constexpr long kMaxCpu = 65535;
  std::set<int> cpus;
  std::istringstream in(list);
  std::string item;
  while (std::getline(in, item, ',')) {
    long a = 0, b = 0;
    char dash = 0, extra = 0;
    std::istringstream one(item);
    if (!(one >> a)) return {};
    b = a;
    if (one >> dash && (dash != '-' || !(one >> b))) return {};
    if (one >> extra || a < 0 || b < a || b > kMaxCpu) return {};
    for (long c = a; c <= b; ++c) cpus.insert(int(c));
  }
  return {cpus.begin(), cpus.end()};
}

std::vector<int> performance_cpus(const std::vector<int>& allowed, const std::vector<int>& efficiency) {
  const std::set<int> slow(efficiency.begin(), efficiency.end());
  std::vector<int> fast;
  for (int c : allowed)
    if (!slow.count(c)) fast.push_back(c);
  return fast.empty() ? allowed : fast;
}

int quota_cpus(const std::string& cpu_max) {
  std::istringstream in(cpu_max);
  long long quota = 0, period = 0;
  if (!(in >> quota >> period) || quota <= 0 || period <= 0) return 0;  // "max ...", "-1 ...", garbage
  const long long n = (quota + period - 1) / period;
  return int(std::min<long long>(n, 1 << 20));
}

int default_cpu_threads() {
  static const int n = compute_default();
  return n;
}

}  // namespace llmctl
