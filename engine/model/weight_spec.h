// WeightSpec: one checkpoint tensor a model reads, by its HF name, with the shape its config implies.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace llmctl {

struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool norm = false;  // an RMSNorm weight (centred on 1, not 0)
};

}  // namespace llmctl
