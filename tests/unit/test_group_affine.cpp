// quant/format/group_affine.h and gguf_group_affine.h: the conversions into the group-affine form
// give the source layouts' values (GGUF: bit for bit against gguf_blocks' dequantization), and the
// row/column operations the loader fuses and shards with keep every value where it belongs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "engine/model/gguf.h"
#include "quant/format/gguf_blocks.h"
#include "quant/format/gguf_group_affine.h"
#include "quant/format/group_affine.h"
#include "quant/format/half_float.h"
#include "tests/unit/gguf_test_blocks.h"
#include "tests/unit/source_dir.h"

using namespace llmctl;
using quant::GroupAffineWeight;
using qtest::random_blocks;

namespace {

// Equal values: bit for bit, except that -0 and +0 count as equal (see gguf_group_affine.h).
int64_t count_unequal(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  int64_t bad = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i]) && std::memcmp(&a[i], &b[i], 4) != 0) ++bad;  // == alone: -0 == +0
  return bad;
}

GroupAffineWeight random_weight(int bits, int64_t n, int64_t k, int group, std::mt19937& rng) {
  GroupAffineWeight w;
  w.bits = bits, w.n = n, w.k = k, w.group = group;
  w.codes.resize(size_t(n * k));
  for (uint8_t& c : w.codes) c = uint8_t(bits == 4 ? rng() % 16 : rng() % 256);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t i = 0; i < n * w.groups(); ++i) w.scale.push_back(u(rng)), w.offset.push_back(u(rng));
  return w;
}

}  // namespace

TEST_CASE("group affine: GGUF block types convert bit for bit (random blocks)") {
  std::mt19937 rng(1234);
  // ..., Q2_K, Q3_K, ..., MXFP4, then the IQ grid and ternary formats (IQ2_XXS ... TQ2_0)
  const uint32_t types[] = {2, 3, 6, 7, 8, 10, 11, 12, 13, 14, 20, 23, 39, 16, 17, 18, 19, 21, 22, 29, 34, 35};
  for (uint32_t type : types) {
    const std::string label = quant::ggml_type_label(type);
    CAPTURE(label);
    quant::GgmlBlockLayout l;
    REQUIRE(quant::ggml_block_layout(type, &l));
    const int64_t n = 5, k = 2 * 256;
    const std::vector<uint8_t> blocks = random_blocks(type, n * k / l.block_size, rng);
    std::vector<float> ref(size_t(n * k));
    REQUIRE(quant::dequantize_row(type, blocks.data(), ref.data(), n * k));
    std::string why;
    auto w = quant::group_affine_from_gguf(type, blocks.data(), blocks.size(), n, k, &why);
    REQUIRE(w.has_value());
    w->validate();
    CHECK(w->bits == (type == 2 || type == 3 || type == 10 || type == 12 ? 4 : 8));
    const bool sixteen = type == 10 || type == 11 || type == 14 || type == 17 || type == 22 || type == 29;
    CHECK(w->group == (sixteen ? 16 : 32));
    const std::vector<float> got = quant::dequantize(*w);
    CHECK(count_unequal(got, ref) == 0);
    int64_t differing_bits = 0, nonzero = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      differing_bits += std::memcmp(&got[i], &ref[i], 4) != 0;
      nonzero += ref[i] != 0;
    }
    // only Q4_0's d * q + (-8 d) and TQ's d * q + (-d) may turn -0 into +0
    if (type != 2 && type != 34 && type != 35) CHECK(differing_bits == 0);
    CHECK(nonzero > n * k / 2);                 // the data is not degenerate
  }
}

TEST_CASE("group affine: GGUF blocks converted in ranges (a loader's threads) give the whole conversion's bytes") {
  std::mt19937 rng(4321);
  for (uint32_t type : {2u, 3u, 6u, 7u, 8u, 10u, 11u, 12u, 13u, 14u, 20u, 23u, 39u, 16u, 19u, 29u, 34u}) {
    const std::string label = quant::ggml_type_label(type);
    CAPTURE(label);
    quant::GgmlBlockLayout l;
    REQUIRE(quant::ggml_block_layout(type, &l));
    const int64_t n = 7, k = 3 * 256, count = quant::gguf_group_affine_blocks(type, n, k);
    CHECK(count == n * k / l.block_size);
    const std::vector<uint8_t> blocks = random_blocks(type, count, rng);
    const auto whole = quant::group_affine_from_gguf(type, blocks.data(), blocks.size(), n, k, nullptr);
    REQUIRE(whole.has_value());
    GroupAffineWeight w = quant::gguf_group_affine_shell(type, blocks.size(), n, k);
    for (int64_t b0 = count; b0 > 0;) {  // uneven ranges, last first
      const int64_t b1 = b0;
      b0 = std::max<int64_t>(0, b0 - 1 - int64_t(rng() % 5));
      quant::gguf_group_affine_convert(type, blocks.data(), b0, b1, w);
    }
    CHECK(w.bits == whole->bits);
    CHECK(w.group == whole->group);
    CHECK(w.codes == whole->codes);
    CHECK(std::memcmp(w.scale.data(), whole->scale.data(), w.scale.size() * 4) == 0);
    CHECK(std::memcmp(w.offset.data(), whole->offset.data(), w.offset.size() * 4) == 0);
    CHECK_THROWS_AS(quant::gguf_group_affine_convert(type, blocks.data(), 0, count + 1, w), std::invalid_argument);
    GroupAffineWeight short_scales = w;  // not the shell this type makes: refused before a write
    short_scales.scale.pop_back();
    CHECK_THROWS_AS(quant::gguf_group_affine_convert(type, blocks.data(), 0, count, short_scales), std::invalid_argument);
    // another type's blocks into this shell (Q4_K's 4-bit codes, or Q6_K's 8-bit codes in groups of 16)
    const uint32_t other = type == 14 || type == 11 || type == 29 ? 12 : 14;
    CHECK_THROWS_AS(quant::gguf_group_affine_convert(other, blocks.data(), 0, 1, w), std::invalid_argument);
  }
  CHECK_THROWS_AS(quant::gguf_group_affine_shell(2, 18 * 3, 2, 64), std::invalid_argument);  // bytes of 3 blocks, not 4
}

TEST_CASE("group affine: GGUF reference tensors (gguf.quants) convert exactly") {
  const std::string data = std::string(llmctl::test::source_dir()) + "/tests/unit/data/";
  auto blocks = GgufFile::open(data + "gguf_blocks_ref.gguf");
  auto codes = GgufFile::open(data + "gguf_code_blocks_ref.gguf");
  for (const char* name : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS", "MXFP4",
                           "Q2_K", "Q3_K", "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "TQ1_0",
                           "TQ2_0"}) {
    CAPTURE(name);
    auto& g = codes->find_tensor(std::string(name) + ".q") ? codes : blocks;
    const GgufTensorInfo* q = g->find_tensor(std::string(name) + ".q");
    REQUIRE(q);
    Tensor ref = g->load(*g->find_tensor(std::string(name) + ".ref"));
    const auto shape = q->shape();
    std::string why;
    auto w = quant::group_affine_from_gguf(uint32_t(q->type), q->data, q->nbytes, shape[0], shape[1], &why);
    REQUIRE(w.has_value());
    const std::vector<float> got = quant::dequantize(*w);
    CHECK(count_unequal(got, std::vector<float>(ref.ptr<float>(), ref.ptr<float>() + ref.numel())) == 0);
  }
  std::vector<uint8_t> bytes(18 * 4);
  CHECK_THROWS_WITH_AS(quant::group_affine_from_gguf(2, bytes.data(), bytes.size(), 2, 48, nullptr),
                       doctest::Contains("whole blocks of 32"), std::invalid_argument);
  CHECK_THROWS_WITH_AS(quant::group_affine_from_gguf(2, bytes.data(), bytes.size() - 1, 2, 64, nullptr),
                       doctest::Contains("expected 72"), std::invalid_argument);
}

TEST_CASE("group affine: from compressed-tensors / AWQ / GPTQ codes, 4 and 8 bits, sym and asym") {
  std::mt19937 rng(7);
  for (int bits : {4, 8})
    for (bool sym : {true, false})
      for (int group : {32, -1}) {
        CAPTURE(bits);
        CAPTURE(sym);
        CAPTURE(group);
        quant::QuantizedLinear q;
        q.n = 6, q.k = 64;
        q.scheme = {bits, group, sym};
        const int64_t G = q.groups();
        for (int64_t i = 0; i < q.n * q.k; ++i) q.q.push_back(uint8_t(rng() % (1u << bits)));
        for (int64_t i = 0; i < q.n * G; ++i) {
          q.scales.push_back(0.001f + float(rng() % 1000) / 7919.0f);
          q.zeros.push_back(sym ? q.scheme.sym_zero() : int(rng() % (1u << bits)));
        }
        if (group > 0 && bits == 8)  // GPTQ without act-order writes the trivial g_idx
          for (int64_t c = 0; c < q.k; ++c) q.g_idx.push_back(int32_t(c / group));
        auto w = quant::group_affine_from_quantized(q, nullptr);
        REQUIRE(w.has_value());
        w->validate();
        CHECK(w->bits == bits);
        CHECK(w->group == (group > 0 ? group : 64));
        if (bits == 8 && sym)
          for (float o : w->offset) CHECK(o == 0.0f);
        const std::vector<float> ref = quant::dequantize(q), got = quant::dequantize(*w);
        double worst = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
          const float s = q.scales[size_t(int64_t(i) / q.k * G + q.group_of(int64_t(i) % q.k))];
          // Two roundings (the offset, the sum) of values up to 2^bits * scale.
          worst = std::max(worst, std::fabs(double(got[i]) - ref[i]) / (s * (1 << bits) * 1.2e-7));
        }
        CHECK(worst <= 2.0);
      }
}

TEST_CASE("group affine: an act-order g_idx becomes a column permutation that dequantizes to the same weights") {
  std::mt19937 rng(31);
  quant::QuantizedLinear q;
  q.n = 3, q.k = 96;
  q.scheme = {4, 32, false};
  std::uniform_int_distribution<int> code(0, 15), zero(1, 15);
  for (int64_t i = 0; i < q.n * q.k; ++i) q.q.push_back(uint8_t(code(rng)));
  for (int64_t i = 0; i < q.n * 3; ++i) {
    q.scales.push_back(0.01f * float(1 + i));
    q.zeros.push_back(zero(rng));
  }
  std::vector<int32_t> order(size_t(q.k));  // GPTQ desc_act: group i / 32 of a shuffled order
  for (int64_t i = 0; i < q.k; ++i) order[size_t(i)] = int32_t(i);
  std::shuffle(order.begin(), order.end(), rng);
  q.g_idx.assign(size_t(q.k), 0);
  for (int64_t i = 0; i < q.k; ++i) q.g_idx[size_t(order[size_t(i)])] = int32_t(i / 32);

  std::string why;
  const std::optional<GroupAffineWeight> w = quant::group_affine_from_quantized(q, &why);
  REQUIRE_MESSAGE(w.has_value(), why);
  REQUIRE(w->perm.size() == size_t(q.k));
  w->validate();
  for (int64_t j = 0; j < q.k; ++j) {  // packed column j: input perm[j], in group j / 32, codes moved
    CHECK(q.g_idx[size_t(w->perm[size_t(j)])] == j / 32);
    if (j > 0 && j % 32 != 0) CHECK(w->perm[size_t(j)] > w->perm[size_t(j - 1)]);  // stable within a group
    for (int64_t r = 0; r < q.n; ++r) CHECK(w->codes[size_t(r * q.k + j)] == q.q[size_t(r * q.k + w->perm[size_t(j)])]);
  }
  const std::vector<float> got = quant::dequantize(*w), ref = quant::dequantize(q);
  for (size_t i = 0; i < ref.size(); ++i) CHECK(got[i] == doctest::Approx(ref[i]).epsilon(1e-6));

  // Rows keep the order; concat_rows needs one order for all parts; a column split is refused.
  const GroupAffineWeight rows = quant::select_rows(*w, {{1, 2}});
  CHECK(rows.perm == w->perm);
  const auto fused = quant::concat_rows({&*w, &rows}, nullptr);
  REQUIRE(fused.has_value());
  CHECK(fused->perm == w->perm);
  GroupAffineWeight other = *w;
  std::swap(other.perm[0], other.perm[1]);
  CHECK_FALSE(quant::concat_rows({&*w, &other}, &why).has_value());
  CHECK(why.find("permutation") != std::string::npos);
  GroupAffineWeight plain = *w;
  plain.perm.clear();
  CHECK_FALSE(quant::concat_rows({&plain, &*w}, nullptr).has_value());
  CHECK_THROWS_WITH_AS(quant::select_columns(*w, {{0, 32}}), doctest::Contains("act-order"), std::invalid_argument);

  // validate: not a permutation
  other.perm[0] = other.perm[1];
  CHECK_THROWS_WITH_AS(other.validate(), doctest::Contains("not a permutation"), std::invalid_argument);
  other.perm.resize(5);
  CHECK_THROWS_AS(other.validate(), std::invalid_argument);
}

TEST_CASE("group affine: validate refuses non-finite and absurd scales and offsets, by row and group") {
  std::mt19937 rng(9);
  for (int bits : {4, 8}) {
    const GroupAffineWeight w = random_weight(bits, 3, 64, 32, rng);
    CHECK_NOTHROW(w.validate());
    int largest = 15;  // the largest code magnitude present bounds the scale (8 bits: up to 128)
    if (bits == 8) {
      largest = 1;
      for (uint8_t c : w.codes) largest = std::max(largest, std::abs(int(int8_t(c))));
      CHECK(largest >= 120);
    }
    const float limit = 65504.0f / float(largest);
    struct Case { float scale, offset; bool ok; };
    const Case cases[] = {{limit, 0.0f, true}, {-limit, 65504.0f, true}, {std::nextafter(limit, 1e9f), 0.0f, false},
                          {1e38f, 0.0f, false}, {NAN, 0.0f, false}, {INFINITY, 0.0f, false},
                          {0.01f, 70000.0f, false}, {0.01f, NAN, false}};
    for (const Case& c : cases) {
      GroupAffineWeight bad = w;
      bad.scale[3] = c.scale, bad.offset[3] = c.offset;  // row 1, group 1
      CAPTURE(bits);
      CAPTURE(c.scale);
      CAPTURE(c.offset);
      if (c.ok)
        CHECK_NOTHROW(bad.validate());
      else
        CHECK_THROWS_WITH_AS(bad.validate(), doctest::Contains("row 1, group 1"), std::invalid_argument);
    }
  }
}

TEST_CASE("group affine: 8-bit codes of a table format (MXFP4's up to 12) allow scales up to 65504 / 12") {
  std::mt19937 rng(10);
  GroupAffineWeight w = random_weight(8, 2, 64, 32, rng);
  for (uint8_t& c : w.codes) c = uint8_t(int8_t(int(rng() % 25) - 12));
  w.codes[5] = uint8_t(int8_t(-12));
  for (float& o : w.offset) o = -0.0f;
  w.scale[1] = 4096.0f;  // 2^(e - 128) for e = 140: weights up to 49152
  CHECK_NOTHROW(w.validate());
  w.scale[1] = 8192.0f;  // 98304: past f16
  CHECK_THROWS_WITH_AS(w.validate(), doctest::Contains("row 0, group 1"), std::invalid_argument);
}

TEST_CASE("group affine: an act-order g_idx with groups of unequal size is not representable (loaded dense)") {
  quant::QuantizedLinear q;
  q.n = 2, q.k = 64;
  q.scheme = {4, 32, true};
  q.q.assign(size_t(q.n * q.k), 3);
  q.scales.assign(size_t(q.n * 2), 0.5f);
  q.zeros.assign(size_t(q.n * 2), 8);
  q.g_idx.resize(64);
  for (int c = 0; c < 64; ++c) q.g_idx[size_t(c)] = c % 3 == 0 ? 1 : 0;  // 22 and 42 columns
  std::string why;
  CHECK_FALSE(quant::group_affine_from_quantized(q, &why).has_value());
  CHECK(why.find("act-order") != std::string::npos);
  CHECK(why.find("42 columns in group 0") != std::string::npos);
}

TEST_CASE("group affine: concat_rows fuses equal forms and widens / splits mixed ones exactly") {
  std::mt19937 rng(99);
  const GroupAffineWeight a = random_weight(4, 3, 64, 32, rng), b = random_weight(4, 2, 64, 32, rng);
  const GroupAffineWeight c8 = random_weight(8, 4, 64, 16, rng);
  auto cat = [](std::vector<std::vector<float>> parts) {
    std::vector<float> out;
    for (auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
  };
  auto same = quant::concat_rows({&a, &b}, nullptr);
  REQUIRE(same.has_value());
  CHECK(same->bits == 4);
  CHECK(same->group == 32);
  CHECK(same->n == 5);
  CHECK(quant::dequantize(*same) == cat({quant::dequantize(a), quant::dequantize(b)}));

  auto mixed = quant::concat_rows({&a, &c8, &b}, nullptr);  // Q4_K-like q/k with a Q6_K-like v
  REQUIRE(mixed.has_value());
  CHECK(mixed->bits == 8);
  CHECK(mixed->group == 16);
  CHECK(mixed->n == 9);
  CHECK(quant::dequantize(*mixed) == cat({quant::dequantize(a), quant::dequantize(c8), quant::dequantize(b)}));

  std::string why;
  const GroupAffineWeight k96 = random_weight(4, 1, 96, 32, rng), g48 = random_weight(4, 1, 96, 48, rng);
  CHECK_FALSE(quant::concat_rows({&a, &k96}, &why).has_value());
  CHECK(why.find("input features") != std::string::npos);
  CHECK_FALSE(quant::concat_rows({&k96, &g48}, &why).has_value());
  CHECK(why.find("groups of 48") != std::string::npos);
}

TEST_CASE("group affine: row and column selections") {
  std::mt19937 rng(5);
  const GroupAffineWeight w = random_weight(8, 6, 128, 32, rng);
  const std::vector<float> dense = quant::dequantize(w);
  const GroupAffineWeight rows = quant::select_rows(w, {{4, 2}, {0, 1}});
  REQUIRE(rows.n == 3);
  const std::vector<float> dr = quant::dequantize(rows);
  for (int64_t c = 0; c < 128; ++c) {
    CHECK(dr[size_t(c)] == dense[size_t(4 * 128 + c)]);
    CHECK(dr[size_t(2 * 128 + c)] == dense[size_t(c)]);
  }
  const GroupAffineWeight cols = quant::select_columns(w, {{64, 64}, {0, 32}});
  REQUIRE(cols.k == 96);
  const std::vector<float> dc = quant::dequantize(cols);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < 96; ++c) {
      const int64_t src = c < 64 ? 64 + c : c - 64;
      CHECK(dc[size_t(r * 96 + c)] == dense[size_t(r * 128 + src)]);
    }
  // A range that cuts groups splits them, each part with its group's scale and offset.
  const GroupAffineWeight cut = quant::select_columns(w, {{16, 64}, {104, 8}});
  REQUIRE(cut.k == 72);
  CHECK(cut.group == 8);
  CHECK_NOTHROW(cut.validate());
  const std::vector<float> dcut = quant::dequantize(cut);
  for (int64_t r = 0; r < 6; ++r)
    for (int64_t c = 0; c < 72; ++c) {
      const int64_t src = c < 64 ? 16 + c : 104 + (c - 64);
      CHECK(dcut[size_t(r * 72 + c)] == dense[size_t(r * 128 + src)]);
    }
  CHECK_THROWS_AS(quant::select_columns(w, {{100, 29}}), std::invalid_argument);
  CHECK_THROWS_AS(quant::select_rows(w, {{5, 2}}), std::invalid_argument);
}

TEST_CASE("group affine: columns taken from their cover of whole units are the columns taken from the whole") {
  std::mt19937 rng(17);
  const GroupAffineWeight w = random_weight(4, 3, 192, 32, rng);
  const std::vector<float> dense = quant::dequantize(w);
  std::uniform_int_distribution<int64_t> at(0, 191);
  for (int64_t unit : {32, 64, 8}) {
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<quant::IndexRange> cols;
      const int count = 1 + trial % 3;
      for (int i = 0; i < count; ++i) {
        const int64_t b = at(rng), e = std::min<int64_t>(192, b + 1 + at(rng) % 80);
        cols.emplace_back(b, e - b);
      }
      if (trial % 5 == 0) cols = {{64, 64}, {128, 64}};  // shard segments: runs that continue each other
      CAPTURE(unit);
      CAPTURE(trial);
      const quant::ColumnCover cover = quant::cover_columns(cols, unit, 192);
      REQUIRE(cover.within.size() == cols.size());
      int64_t covered = 0;
      for (const auto& [b, len] : cover.cover) {
        CHECK(b % unit == 0);
        CHECK((len % unit == 0 || b + len == 192));
        covered += len;
      }
      if (trial % 5 == 0) CHECK(cover.cover.size() == 1);
      const GroupAffineWeight via = quant::select_columns(quant::select_columns(w, cover.cover), cover.within);
      const GroupAffineWeight direct = quant::select_columns(w, cols);
      REQUIRE(via.k == direct.k);
      for (const auto& [b, len] : cover.within) CHECK((b >= 0 && b + len <= covered));  // (ranges may overlap)
      CHECK(quant::dequantize(via) == quant::dequantize(direct));
      // and both are the dense weight's columns
      const std::vector<float> d = quant::dequantize(direct);
      int64_t c = 0;
      bool same = true;
      for (const auto& [b, len] : cols)
        for (int64_t j = 0; j < len; ++j, ++c)
          for (int64_t r = 0; r < 3; ++r) same &= d[size_t(r * direct.k + c)] == dense[size_t(r * 192 + b + j)];
      CHECK(same);
    }
  }
  CHECK_THROWS_AS(quant::cover_columns({{180, 20}}, 32, 192), std::invalid_argument);
}
