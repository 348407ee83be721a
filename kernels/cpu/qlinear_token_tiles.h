// Activations of a prefill's tokens interleaved per tile of 4, for the row-lane kernels' prefill
// tiles (qlinear_rowlane_avx2_prefill.h, qlinear_rowlane_avx512_prefill.h): a tile's loop then walks
// one pointer per kind of data instead of one per token (address registers the tiles ran short of).
// The functions live in qlinear_token_tiles.cpp, compiled for any x86-64: inline in this header they
// would be compiled once per ISA's translation unit, and the linker could keep an AVX-512 copy.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/cpu/qlinear.h"

namespace llmctl::kernels::detail {

// Tokens of x in tiles of 4 (the last one padded with zeros), each tile's data interleaved by token:
//   q   [tiles][K / 32][4][32]  int8 activations, a block's 4 tokens side by side (128 bytes)
//   xs  [tiles][K / 32][4]      their block scales
//   S   [tiles][GS][4]          qact_group_sums per group (GS = K / group x SG units' groups)
//   hs  [tiles][K / 16][4]      qact_half_sums (codes stored from a base: their correction), or empty
//   q16 [tiles][K / 32][4][32]  the int8 activations as int16, each quad of inputs 4i..4i+3 in the order
//                               4i, 4i + 2, 4i + 1, 4i + 3 (vpmaddwd's pairs of the even and the odd
//                               bytes of a 4-byte lane), or empty
//   wc  [tiles][K / 32][4]      -128 x a block's integer sum (the widened tiles' correction for values
//                               stored + 128), or empty; q16 and wc need H
// q, xs, hs (and q16, wc) are read where they lie: the quantizer's (QActivations' tiles of 4, built
// once for every thread) or this buffer's own vectors (built here where x comes without them).
struct TokenTiles {
  int64_t blocks = 0, gs = 0;
  std::vector<int8_t> q;
  std::vector<float> xs, S;
  std::vector<int32_t> hs, wc;
  std::vector<int16_t> q16;
  const int8_t* qp = nullptr;
  const float* xsp = nullptr;
  const int32_t* hsp = nullptr;  // null: no half-block sums
  const int16_t* q16p = nullptr;  // widened: q16 and wc likewise
  const int32_t* wcp = nullptr;
  const int8_t* tile_q(int64_t tile) const { return qp + tile * blocks * 128; }
  const int16_t* tile_q16(int64_t tile) const { return q16p + tile * blocks * 128; }
  const float* tile_xs(int64_t tile) const { return xsp + tile * blocks * 4; }
  const float* tile_S(int64_t tile) const { return S.data() + tile * gs * 4; }
  const int32_t* tile_hs(int64_t tile) const { return hsp ? hsp + tile * blocks * 8 : nullptr; }
  const int32_t* tile_wc(int64_t tile) const { return wcp + tile * blocks * 4; }
};

// Tokens interleaved at a time: the kernels run a prefill's tokens in chunks of this many, so that
// the buffer (about 1.4 x chunk x K bytes a thread, 3.4 x with q16) stays bounded whatever the
// prompt's length.
constexpr int64_t kTokenChunk = 256;

// The calling thread's buffer (one for every kernel: none holds it across calls).
TokenTiles& thread_token_tiles();

// Fills tt with tokens [t0, t1) of x (tile i: tokens t0 + 4i ..), from x, its group sums S [T, gs]
// and (or null) its half-block sums H [T, K / 16]; q16 and wc too where widen (H then not null).
// Codes, scales and half-block sums are x's own tiles where it has them from t0 (tiles of 4).
void interleave_tokens(const QActivations& x, int64_t t0, int64_t t1, const float* S, int64_t gs, const int32_t* H,
                       TokenTiles& tt, bool widen = false);

}  // namespace llmctl::kernels::detail
