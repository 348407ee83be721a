// TokenTiles (qlinear_token_tiles.h): built here, for any x86-64, and used by every ISA's prefill tile.
#include "kernels/cpu/qlinear_token_tiles.h"

#include <cstring>

#include "kernels/kernel_check.h"

namespace llmctl::kernels::detail {

TokenTiles& thread_token_tiles() {
  thread_local TokenTiles tt;
  return tt;
}

void interleave_tokens(const QActivations& x, int64_t t0, int64_t t1, const float* S, int64_t gs, const int32_t* H,
                       TokenTiles& tt, bool widen) {
  KERNEL_CHECK(!widen || H) << "widened token tiles need the activations' half-block sums";
  const int64_t blocks = x.k / 32, tiles = (t1 - t0 + 3) / 4;
  // x's tiles: from a tile's first token, and to x's end or a tile's (its last tile padded as ours)
  const bool shared = x.tile_rows == 4 && t0 % 4 == 0 && (t1 == x.t || t1 % 4 == 0);
  const bool shared_wide = widen && shared && x.tile_q16;
  tt.blocks = blocks, tt.gs = gs;
  tt.S.assign(size_t(tiles * gs * 4), 0.f);
  if (shared_wide) {
    tt.q16p = x.tile_q16 + t0 / 4 * blocks * 128, tt.wcp = x.tile_wc + t0 / 4 * blocks * 4;
  } else {
    tt.q16.assign(widen ? size_t(tiles * blocks * 128) : 0, 0);
    tt.wc.assign(widen ? size_t(tiles * blocks * 4) : 0, 0);
    tt.q16p = tt.q16.data(), tt.wcp = tt.wc.data();
  }
  if (shared) {
    tt.qp = x.tile_q + t0 / 4 * blocks * 128, tt.xsp = x.tile_scale + t0 / 4 * blocks * 4;
    tt.hsp = H ? x.tile_half_sum + t0 / 4 * blocks * 8 : nullptr;
  } else {
    tt.q.assign(size_t(tiles * blocks * 128), 0);
    tt.xs.assign(size_t(tiles * blocks * 4), 0.f);
    tt.hs.assign(H ? size_t(tiles * blocks * 8) : 0, 0);
    tt.qp = tt.q.data(), tt.xsp = tt.xs.data(), tt.hsp = H ? tt.hs.data() : nullptr;
  }
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t tile = (t - t0) / 4, j = (t - t0) % 4;
    for (int64_t g = 0; g < gs; ++g) tt.S[size_t((tile * gs + g) * 4 + j)] = S[t * gs + g];
    if (!shared) {
      for (int64_t b = 0; b < blocks; ++b) {
        std::memcpy(tt.q.data() + (tile * blocks + b) * 128 + 32 * j, x.q + t * x.k + 32 * b, 32);
        tt.xs[size_t((tile * blocks + b) * 4 + j)] = x.scale[t * blocks + b];
      }
      if (H)
        for (int64_t hb = 0; hb < 2 * blocks; ++hb)
          tt.hs[size_t((tile * 2 * blocks + hb) * 4 + j)] = H[t * 2 * blocks + hb];
    }
    if (!widen || shared_wide) continue;
    for (int64_t b = 0; b < blocks; ++b) {
      tt.wc[size_t((tile * blocks + b) * 4 + j)] = -128 * (H[t * 2 * blocks + 2 * b] + H[t * 2 * blocks + 2 * b + 1]);
      const int8_t* a = x.q + t * x.k + 32 * b;
      int16_t* a16 = tt.q16.data() + (tile * blocks + b) * 128 + 32 * j;
      for (int i = 0; i < 32; i += 4)
        a16[i] = a[i], a16[i + 1] = a[i + 2], a16[i + 2] = a[i + 1], a16[i + 3] = a[i + 3];
    }
  }
}

}  // namespace llmctl::kernels::detail
