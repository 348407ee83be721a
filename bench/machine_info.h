// Where a benchmark ran: the machine (hostname, CPU model, cores, memory, OS) and the build
// (version, git describe at configure time, build type, compiler), for reports.
#pragma once
#include <nlohmann/json.hpp>

namespace llmctl::bench {

nlohmann::ordered_json machine_info();
nlohmann::ordered_json build_info();

}  // namespace llmctl::bench
