// The KV cache element types a user picks (--kv-cache-dtype): auto = the activation dtype (no
// scales); int8 = int8 with dynamic per-token, per-head asymmetric scales; fp8 = e4m3 with fixed
// per-head scales (k_scale / v_scale from the checkpoint, else 1.0). Below engine/kv so that the
// backend (KvLayer, supports_kv_cache) and the cache spec name the same thing.
#pragma once
#include <optional>
#include <string>

namespace llmctl {

enum class KvCacheDtype { Auto, Int8, Fp8 };

inline const char* kv_cache_dtype_name(KvCacheDtype d) {
  switch (d) {
    case KvCacheDtype::Auto: return "auto";
    case KvCacheDtype::Int8: return "int8";
    case KvCacheDtype::Fp8: return "fp8";
  }
  return "?";
}

// "auto" | "int8" | "fp8" ("fp8_e4m3" too, vLLM's spelling); nullopt otherwise.
inline std::optional<KvCacheDtype> parse_kv_cache_dtype(const std::string& s) {
  if (s == "auto") return KvCacheDtype::Auto;
  if (s == "int8") return KvCacheDtype::Int8;
  if (s == "fp8" || s == "fp8_e4m3") return KvCacheDtype::Fp8;
  return std::nullopt;
}

}  // namespace llmctl
