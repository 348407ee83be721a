// Token id runs for the KV cache and scheduler tests.
#pragma once
#include <cstdint>
#include <vector>

namespace llmctl::test {

// first, first + 1, ..., first + n - 1
inline std::vector<int32_t> toks(int first, int n) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(first + i);
  return t;
}

}  // namespace llmctl::test
