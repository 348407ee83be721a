#include "bench/machine_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <thread>

#ifndef LLMCTL_GIT_DESCRIBE
#define LLMCTL_GIT_DESCRIBE "unknown"
#endif
#ifndef LLMCTL_BUILD_TYPE
#define LLMCTL_BUILD_TYPE "unknown"
#endif

namespace llmctl::bench {

namespace {
// The value after "key:" on the first line of a /proc file that starts with key.
std::string proc_field(const char* path, const std::string& key) {
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind(key, 0) != 0) continue;
    size_t c = line.find(':');
    if (c == std::string::npos) continue;
    size_t b = line.find_first_not_of(" \t", c + 1);
    return b == std::string::npos ? "" : line.substr(b);
  }
  return "";
}
}  // namespace

nlohmann::ordered_json machine_info() {
  nlohmann::ordered_json m;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  m["hostname"] = host;
  std::string cpu = proc_field("/proc/cpuinfo", "model name");
  m["cpu"] = cpu.empty() ? "unknown" : cpu;
  m["cores"] = std::thread::hardware_concurrency();
  std::string mem = proc_field("/proc/meminfo", "MemTotal");  // "24567890 kB"
  m["memory_gib"] = mem.empty() ? 0.0 : std::stod(mem) / (1024.0 * 1024.0);
  utsname u{};
  if (uname(&u) == 0) m["os"] = std::string(u.sysname) + " " + u.release + " " + u.machine;
  return m;
}

nlohmann::ordered_json build_info() {
  nlohmann::ordered_json b;
  b["version"] = "0.1.0";
  b["git"] = LLMCTL_GIT_DESCRIBE;
  b["build_type"] = LLMCTL_BUILD_TYPE;
#if defined(__clang__)
  b["compiler"] = "clang " __clang_version__;
#elif defined(__GNUC__)
  b["compiler"] = "gcc " __VERSION__;
#endif
#ifdef LLMCTL_HAVE_CUDA
  b["cuda"] = true;
#else
  b["cuda"] = false;
#endif
  return b;
}

}  // namespace llmctl::bench
