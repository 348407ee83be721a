// How many threads CPU work takes when the user does not say (--threads 0): one per physical core
// among the CPUs this process may run on, and no more than its CPU quota allows.
//  - SMT siblings (two hardware threads of one core) count once: the kernels fill a core's execution
//    units and its share of memory bandwidth with one thread, and two pool threads spinning on one
//    core slow each other (llama.cpp defaults to physical cores too);
//  - the affinity mask (taskset, a container's cpuset) bounds the CPUs: a thread per online CPU on
//    fewer allowed ones runs several threads a core (`taskset -c 0` on a 2-core machine: two threads
//    decoded 83-85 tok/s, one 95-100);
//  - a hybrid CPU's efficiency cores (Linux lists them in /sys/devices/cpu_atom/cpus) are left out
//    unless nothing else is allowed: a loop's pieces are equal, so a slower core holds every loop back
//    (llama.cpp leaves them out too);
//  - a cgroup CPU quota (docker --cpus) of q CPUs' time bounds the count to ceil(q).
// Linux sysfs / cgroup files are read where present; otherwise std::thread::hardware_concurrency().
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace llmctl {

// The default thread count (at least 1), computed once.
int default_cpu_threads();

// The pieces, for tests.
// Physical cores among `cpus`: CPUs whose thread-siblings lists (sysfs topology/thread_siblings_list,
// "0,8" or "0-1") are the same count once; a CPU whose list is empty or unreadable counts alone.
int physical_cores(const std::vector<int>& cpus, const std::function<std::string(int cpu)>& siblings_of);
// The CPUs in a sysfs CPU list ("0-3,8,10-11"), ascending; empty for an empty or malformed list (or
// ids past 65535).
std::vector<int> parse_cpu_list(const std::string& list);
// `allowed` less the `efficiency` CPUs, or `allowed` when that leaves none.
std::vector<int> performance_cpus(const std::vector<int>& allowed, const std::vector<int>& efficiency);
// CPUs' worth of time a quota gives: cgroup v2 cpu.max ("200000 100000" -> 2, "150000 100000" -> 2,
// "max 100000" -> 0: none), or 0 for anything else.
int quota_cpus(const std::string& cpu_max);

}  // namespace llmctl
