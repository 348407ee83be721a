// TokenTiles (qlinear_token_tiles.h): built here, for any x86-64, and used by every ISA's prefill tile.
#include "kernels/cpu/qlinear_token_tiles.h"

#include "kernels/cpu/qlinear_impl.h"
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
  for (int64_t t = t0; t < t1; ++t)
    for (int64_t g = 0; g < gs; ++g) tt.S[size_t(((t - t0) / 4 * gs + g) * 4 + (t - t0) % 4)] = S[t * gs + g];
  const bool own = !shared, own_wide = widen && !shared_wide;
  if (own) {  // every slot written below, padding included
    tt.q.resize(size_t(tiles * blocks * 128)), tt.xs.resize(size_t(tiles * blocks * 4));
    tt.hs.resize(H ? size_t(tiles * blocks * 8) : 0);
  }
  if (own_wide) tt.q16.resize(size_t(tiles * blocks * 128)), tt.wc.resize(size_t(tiles * blocks * 4));
  if (own || own_wide) {  // what x does not carry from t0, built as the quantizer builds it
    QActivations rows = qactivation_rows(x, t0, t1);
    rows.half_sum = H ? H + t0 * (x.k / 16) : nullptr;
    qact_write_tiles(rows, 0, rows.t, 4, own ? tt.q.data() : nullptr, own ? tt.xs.data() : nullptr, nullptr,
                     own && H ? tt.hs.data() : nullptr, own_wide ? tt.q16.data() : nullptr,
                     own_wide ? tt.wc.data() : nullptr);
  }
  tt.qp = own ? tt.q.data() : x.tile_q + t0 / 4 * blocks * 128;
  tt.xsp = own ? tt.xs.data() : x.tile_scale + t0 / 4 * blocks * 4;
  tt.hsp = !H ? nullptr : own ? tt.hs.data() : x.tile_half_sum + t0 / 4 * blocks * 8;
  tt.q16p = own_wide ? tt.q16.data() : widen ? x.tile_q16 + t0 / 4 * blocks * 128 : nullptr;
  tt.wcp = own_wide ? tt.wc.data() : widen ? x.tile_wc + t0 / 4 * blocks * 4 : nullptr;
}

}  // namespace llmctl::kernels::detail
