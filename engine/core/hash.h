// 64-bit mixing shared by the counter-based sampler, child seeds and KV block hashes.
#pragma once
#include <cstdint>

namespace llmctl {

// The splitmix64 finalizer: a bijective mix in which every input bit affects every output bit.
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace llmctl
