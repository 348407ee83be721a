// The CPU backend packs a quantized weight's rows on its pool's threads (pack_cpu_quantized with a
// pool: the factoring of the scales, the codes' range and the row blocks, by runs of rows): the
// packed bytes are those of packing on one thread, for every GGUF type the loader converts, a row
// count that is not whole row blocks, fused parts, and more threads than runs.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/cpu/cpu_quantized_weight.h"
#include "engine/core/thread_pool.h"
#include "engine/model/weights/load_weights.h"
#include "kernels/cpu/qlinear.h"
#include "quant/format/gguf_group_affine.h"
#include "tests/unit/gguf_test_blocks.h"
#include "tests/unit/skip.h"

using namespace llmctl;

namespace {

// The canonical weight the loader makes of random GGUF blocks of `type`, [n, k].
LinearWeight canonical_of(uint32_t type, int64_t n, int64_t k, std::mt19937& rng) {
  const std::vector<uint8_t> blocks = qtest::random_blocks(type, quant::gguf_group_affine_blocks(type, n, k), rng);
  auto w = quant::group_affine_from_gguf(type, blocks.data(), blocks.size(), n, k, nullptr);
  REQUIRE(w.has_value());
  return pack_quantized_linear(std::move(*w), ShardSpec{});
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.empty() || b.empty()) return a.empty() && b.empty();
  return a.shape == b.shape && a.dtype == b.dtype && std::memcmp(a.data, b.data, a.nbytes()) == 0;
}

}  // namespace

TEST_CASE("cpu packing: a pool's threads give the bytes of one thread (every GGUF type, parts)") {
  std::mt19937 rng(97);
  ThreadPool pool3(3), pool2(2);
  for (uint32_t type : {2u, 3u, 6u, 7u, 8u, 10u, 11u, 12u, 13u, 14u, 20u, 23u, 39u}) {
    const std::string label = quant::ggml_type_label(type);
    CAPTURE(label);
    const LinearWeight c = canonical_of(type, 16 * 21 + 5, 512, rng);  // 22 row blocks, the last of 5 rows
    const LinearWeight one = pack_cpu_quantized(c, nullptr);
    for (ThreadPool* pool : {&pool3, &pool2}) {
      const LinearWeight many = pack_cpu_quantized(c, pool);
      CHECK(same_bytes(one.data, many.data));
      CHECK(same_bytes(one.scales, many.scales));
      CHECK(same_bytes(one.zeros, many.zeros));
    }
    // fused parts of 16 x 9 and 16 x 13 rows (each its own runs)
    LinearWeight fused = canonical_of(type, 16 * 22, 512, rng);
    fused.part_rows = {16 * 9, 16 * 13};
    CHECK(same_bytes(pack_cpu_quantized(fused, nullptr).data, pack_cpu_quantized(fused, &pool3).data));
  }
}

TEST_CASE("cpu packing: a codebook is found across runs of rows, or refused where the runs' values add up past 16") {
  // codebooks are a row-lane layout's (the scalar kernels take 8-bit codes in rows)
  if (kernels::qweight_preferred_layout(8, 32) != kernels::QLayout::RowLane16)
    LLMCTL_SKIP("no row-lane layout on this ISA");
  // 8-bit codes, rows [0, 128), [128, 256), [256, 384) each from its own values: 5 + 5 + 6 (a codebook of
  // 16, 4-bit positions) or 8 + 8 + 8 (none, though each run of rows alone would take one: 3 threads'
  // runs are those thirds, 2 threads' hold 16 values each)
  auto weight = [](const int (&per_third)[3], uint32_t seed) {
    std::mt19937 rng(seed);
    quant::GroupAffineWeight w;
    w.bits = 8, w.n = 384, w.k = 256, w.group = 32;
    w.codes.resize(size_t(w.n * w.k));
    for (int64_t r = 0; r < w.n; ++r)
      for (int64_t i = 0; i < w.k; ++i) {
        const int third = int(r / 128), v = -120 + 80 * third + 3 * int(rng() % uint32_t(per_third[third]));
        w.codes[size_t(r * w.k + i)] = uint8_t(int8_t(v));
      }
    w.scale.resize(size_t(w.n * w.groups()));
    for (float& s : w.scale) s = 1e-3f * float(1 + rng() % 9);
    w.offset.assign(w.scale.size(), 0.0f);
    return pack_quantized_linear(std::move(w), ShardSpec{});
  };
  ThreadPool pool3(3), pool2(2);
  const LinearWeight book = weight({5, 5, 6}, 5), none = weight({8, 8, 8}, 6);
  const LinearWeight book1 = pack_cpu_quantized(book, nullptr), none1 = pack_cpu_quantized(none, nullptr);
  auto codebook = [](const LinearWeight& w) {  // the row-lane descriptor's codebook flag (its last row, byte 12)
    int32_t v;
    std::memcpy(&v, static_cast<const uint8_t*>(w.data.data) + (w.data.shape[0] - 1) * w.data.shape[1] + 12, 4);
    return v;
  };
  CHECK(codebook(book1) == 1);
  CHECK(codebook(none1) == 0);
  CHECK(book1.data.nbytes() < none1.data.nbytes());  // 4-bit positions against 8-bit codes
  for (ThreadPool* pool : {&pool3, &pool2}) {
    CHECK(same_bytes(book1.data, pack_cpu_quantized(book, pool).data));
    CHECK(same_bytes(none1.data, pack_cpu_quantized(none, pool).data));
  }
}
