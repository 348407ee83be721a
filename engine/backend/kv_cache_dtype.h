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

// The runner's KV cache as the user asked for it: its element type, and for fp8 whether each
// sequence's open block is also kept exact where the backend can (engine/backend/kv_exact_rows.h;
// --kv-fp8-exact-open-block, on by default: off only to measure what it buys). Converts from a dtype.
struct KvCacheOptions {
  KvCacheOptions(KvCacheDtype d = KvCacheDtype::Auto, bool exact_open_block = true)
      : dtype(d), fp8_exact_open_block(exact_open_block) {}
  KvCacheDtype dtype;
  bool fp8_exact_open_block;
};

// "auto" | "int8" | "fp8" ("fp8_e4m3" too, vLLM's spelling); nullopt otherwise.
inline std::optional<KvCacheDtype> parse_kv_cache_dtype(const std::string& s) {
  if (s == "auto") return KvCacheDtype::Auto;
  if (s == "int8") return KvCacheDtype::Int8;
  if (s == "fp8" || s == "fp8_e4m3") return KvCacheDtype::Fp8;
  return std::nullopt;
}

}  // namespace llmctl
