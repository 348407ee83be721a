// What the CPU backend's quantized linears do with their f32 activations (kernels/cpu/qlinear.h):
//   Int8 (default, as llama.cpp): quantized per block of 32 to int8 once per linear, integer dot
//        products; faster, a small measured accuracy cost.
//   None: f32 activations against the dequantized weights (exact up to summation order).
// Chosen with --act-quant int8|none (generate, serve, bench).
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

namespace llmctl {

enum class ActQuantMode : uint8_t { Int8, None };

inline const char* act_quant_name(ActQuantMode m) { return m == ActQuantMode::Int8 ? "int8" : "none"; }

inline std::optional<ActQuantMode> parse_act_quant(std::string_view s) {
  if (s == "int8") return ActQuantMode::Int8;
  if (s == "none") return ActQuantMode::None;
  return std::nullopt;
}

}  // namespace llmctl
