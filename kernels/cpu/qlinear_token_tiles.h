// Activations of a prefill's tokens interleaved per tile of 4, for the row-lane kernels' prefill
// tiles (qlinear_rowlane_avx2_prefill.h, qlinear_rowlane_avx512_prefill.h): a tile's loop then walks
// one pointer per kind of data instead of one per token (address registers the tiles ran short of).
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/qlinear.h"

namespace llmctl::kernels::detail {

// Tokens of x in tiles of 4 (the last one padded with zeros), each tile's data interleaved by token:
//   q   [tiles][K / 32][4][32]  int8 activations, a block's 4 tokens side by side (128 bytes)
//   xs  [tiles][K / 32][4]      their block scales
//   S   [tiles][GS][4]          qact_group_sums per group (GS = K / group x SG units' groups)
//   hs  [tiles][K / 16][4]      qact_half_sums (codes stored from a base: their correction), or empty
struct TokenTiles {
  int64_t blocks = 0, gs = 0;
  std::vector<int8_t> q;
  std::vector<float> xs, S;
  std::vector<int32_t> hs;
  const int8_t* tile_q(int64_t tile) const { return q.data() + tile * blocks * 128; }
  const float* tile_xs(int64_t tile) const { return xs.data() + tile * blocks * 4; }
  const float* tile_S(int64_t tile) const { return S.data() + tile * gs * 4; }
  const int32_t* tile_hs(int64_t tile) const { return hs.empty() ? nullptr : hs.data() + tile * blocks * 8; }
};

// Fills tt from x, its group sums S [T, gs] and (or null) its half-block sums H [T, K / 16].
inline void interleave_tokens(const QActivations& x, const float* S, int64_t gs, const int32_t* H, TokenTiles& tt) {
  const int64_t blocks = x.k / 32, tiles = (x.t + 3) / 4;
  tt.blocks = blocks, tt.gs = gs;
  tt.q.assign(size_t(tiles * blocks * 128), 0);
  tt.xs.assign(size_t(tiles * blocks * 4), 0.f);
  tt.S.assign(size_t(tiles * gs * 4), 0.f);
  tt.hs.assign(H ? size_t(tiles * blocks * 8) : 0, 0);
  for (int64_t t = 0; t < x.t; ++t) {
    const int64_t tile = t / 4, j = t % 4;
    for (int64_t b = 0; b < blocks; ++b) {
      std::memcpy(tt.q.data() + (tile * blocks + b) * 128 + 32 * j, x.q + t * x.k + 32 * b, 32);
      tt.xs[size_t((tile * blocks + b) * 4 + j)] = x.scale[t * blocks + b];
    }
    for (int64_t g = 0; g < gs; ++g) tt.S[size_t((tile * gs + g) * 4 + j)] = S[t * gs + g];
    if (H)
      for (int64_t hb = 0; hb < 2 * blocks; ++hb) tt.hs[size_t((tile * 2 * blocks + hb) * 4 + j)] = H[t * 2 * blocks + hb];
  }
}

}  // namespace llmctl::kernels::detail
