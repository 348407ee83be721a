// The CPU backend's weights of fused parts (LinearWeight::part_rows: q / k / v, gate / up): each part
// packed in its own form where the forms differ (a codebook part beside 2-bit and 6-bit ones), the
// outputs of each part's rows those of the part packed alone, bit for bit, in both activation modes
// and any thread count (16 over a prompt: its tokens in ranges too); parts whose forms agree are one
// packing.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cpu/cpu_quantized_weight.h"
#include "kernels/cpu/qlinear.h"
#include "tests/unit/qlinear_test_util.h"

using namespace llmctl;
using namespace llmctl::qtest;
using kernels::QLayout;
using kernels::ScaleType;

namespace {

constexpr int64_t kK = 256;

// An 8-bit canonical weight of `rows` rows in groups of `group` (f32 scales and offsets): codes
// drawn by `code`, scales per `scale_group` inputs (repeated over the groups within one).
LinearWeight part(int64_t rows, int group, int scale_group, uint32_t seed, int (*code)(std::mt19937&)) {
  std::mt19937 rng(seed);
  LinearWeight w;
  w.format = WeightFormat::Int8Group;
  w.n = rows, w.k = kK, w.group_size = group;
  w.data = Tensor::empty_host(DType::U8, {rows, kK});
  for (int64_t i = 0; i < rows * kK; ++i) w.data.ptr<uint8_t>()[i] = uint8_t(int8_t(code(rng)));
  const int64_t G = kK / group;
  w.scales = Tensor::empty_host(DType::F32, {rows, G});
  w.zeros = Tensor::empty_host(DType::F32, {rows, G});
  std::uniform_real_distribution<float> s(0.001f, 0.03f), o(-0.2f, 0.2f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < G; g += scale_group / group) {
      const float sv = s(rng), ov = o(rng);
      for (int64_t j = g; j < g + scale_group / group; ++j)
        w.scales.ptr<float>()[r * G + j] = sv, w.zeros.ptr<float>()[r * G + j] = ov;
    }
  return w;
}

// w in groups of `group` (each scale and offset repeated): the form a fused weight's part takes.
LinearWeight split(const LinearWeight& w, int group) {
  LinearWeight o = w;
  const int64_t G = w.k / w.group_size, r = w.group_size / group;
  o.group_size = group;
  o.scales = Tensor::empty_host(DType::F32, {w.n, G * r});
  o.zeros = Tensor::empty_host(DType::F32, {w.n, G * r});
  for (int64_t i = 0; i < w.n * G * r; ++i)
    o.scales.ptr<float>()[i] = w.scales.ptr<float>()[i / r], o.zeros.ptr<float>()[i] = w.zeros.ptr<float>()[i / r];
  return o;
}

// The parts' rows one after another (all in the first one's group), part_rows set.
LinearWeight fuse(const std::vector<LinearWeight>& parts) {
  LinearWeight f = parts[0];
  f.n = 0;
  for (const LinearWeight& p : parts) f.n += p.n, f.part_rows.push_back(p.n);
  const int64_t G = kK / f.group_size;
  f.data = Tensor::empty_host(DType::U8, {f.n, kK});
  f.scales = Tensor::empty_host(DType::F32, {f.n, G});
  f.zeros = Tensor::empty_host(DType::F32, {f.n, G});
  int64_t r0 = 0;
  for (const LinearWeight& p : parts) {
    REQUIRE(p.group_size == f.group_size);
    std::memcpy(f.data.ptr<uint8_t>() + r0 * kK, p.data.data, p.data.nbytes());
    std::memcpy(f.scales.ptr<float>() + r0 * G, p.scales.data, p.scales.nbytes());
    std::memcpy(f.zeros.ptr<float>() + r0 * G, p.zeros.data, p.zeros.nbytes());
    r0 += p.n;
  }
  return f;
}

int iq4_level(std::mt19937& rng) {
  static const int levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  return levels[rng() % 16];
}
int two_bit(std::mt19937& rng) { return int(rng() % 4); }
int six_bit(std::mt19937& rng) { return int(rng() % 64) - 32; }
int four_bit(std::mt19937& rng) { return int(rng() % 16); }

// out [T, N] of w through the backend.
Tensor run(Backend& be, const Tensor& x, const LinearWeight& w, const Tensor& bias) {
  Tensor o = Tensor::empty_host(DType::F32, {x.dim(0), w.n});
  be.linear(x, w, &bias, o);
  return o;
}

}  // namespace

TEST_CASE("CpuBackend packing: fused parts of different forms each in its own, each part's outputs its own bits") {
  // q: IQ4-like levels, scales per 32 (a codebook, groups of 32 once merged back); k: codes 0..3 (2
  // bits, groups of 16); v: -32..31 (6-bit narrow codes, groups of 16). Fused: 8-bit codes, groups of 16.
  const std::vector<LinearWeight> own = {part(64, 32, 32, 1, iq4_level), part(32, 16, 16, 2, two_bit),
                                         part(48, 16, 16, 3, six_bit)};
  const LinearWeight fused = fuse({split(own[0], 16), own[1], own[2]});
  LinearWeight common = fused;  // the same weight without its parts: one form (8-bit codes) for all
  common.part_rows.clear();
  const int64_t N = fused.n;
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (ActQuantMode mode : {ActQuantMode::Int8, ActQuantMode::None})
    for (int threads : {1, 2, 16}) {  // 16 threads over 9 chunks: a prompt's tokens split in ranges too
      auto be = make_cpu_backend(threads, mode);
      const LinearWeight packed = be->upload_quantized(fused), whole = be->upload_quantized(common);
      const std::vector<CpuQSegment> segs = cpu_qweight_segments(packed);
      if (kernels::qweight_preferred_layout(8, 16) != QLayout::RowLane16) {  // the Rows layout: one form
        CHECK(segs.size() == 1);
        continue;
      }
      REQUIRE(segs.size() == 3);
      CHECK(segs[0].row0 == 0);
      CHECK(segs[1].row0 == 64);
      CHECK(segs[2].row0 == 96);
      CHECK((segs[0].view.bits == 4 && segs[0].view.codebook && segs[0].view.group == 32));
      CHECK((segs[1].view.bits == 2 && segs[1].view.group == 16));
      CHECK((segs[2].view.bits == 6 && segs[2].view.narrow_base == -32 && segs[2].view.group == 16));
      CHECK(packed.data.nbytes() < whole.data.nbytes());
      CHECK_THROWS(cpu_qweight_view(packed));  // a weight of parts has no single view
      for (int64_t T : {1, 3, 6, 19}) {
        Tensor x = Tensor::empty_host(DType::F32, {T, kK}), bias = Tensor::empty_host(DType::F32, {N});
        for (int64_t i = 0; i < T * kK; ++i) x.ptr<float>()[i] = nd(rng);
        for (int64_t i = 0; i < N; ++i) bias.ptr<float>()[i] = nd(rng);
        const Tensor got = run(*be, x, packed, bias);
        int64_t r0 = 0;
        for (const LinearWeight& p : own) {  // each part packed alone, its own bias rows
          Tensor pb = Tensor::empty_host(DType::F32, {p.n});
          std::memcpy(pb.data, bias.ptr<float>() + r0, size_t(p.n) * 4);
          const Tensor want = run(*be, x, be->upload_quantized(p), pb);
          int bad = 0;
          for (int64_t t = 0; t < T; ++t)
            bad += std::memcmp(got.ptr<float>() + t * N + r0, want.ptr<float>() + t * p.n, size_t(p.n) * 4) != 0;
          INFO("mode " << act_quant_name(mode) << " threads " << threads << " T " << T << " part at row " << r0);
          CHECK(bad == 0);
          r0 += p.n;
        }
        // linear_group runs it as linear() does
        Tensor grouped = Tensor::empty_host(DType::F32, {T, N});
        const Backend::GroupedLinear item{x, &packed, grouped};
        be->linear_group(std::span<const Backend::GroupedLinear>(&item, 1));
        Tensor nobias = Tensor::empty_host(DType::F32, {T, N});
        be->linear(x, packed, nullptr, nobias);
        CHECK(std::memcmp(grouped.data, nobias.data, nobias.nbytes()) == 0);
      }
    }
}

TEST_CASE("CpuBackend packing: fused parts of one form (gate / up) are one packing, the whole weight's bytes") {
  const std::vector<LinearWeight> own = {part(48, 32, 32, 4, four_bit), part(48, 32, 32, 5, four_bit)};
  const LinearWeight fused = fuse(own);
  LinearWeight common = fused;
  common.part_rows.clear();
  const LinearWeight a = pack_cpu_quantized(fused), b = pack_cpu_quantized(common);
  CHECK(cpu_qweight_segments(a).size() == 1);
  REQUIRE(a.data.nbytes() == b.data.nbytes());
  CHECK(std::memcmp(a.data.data, b.data.data, a.data.nbytes()) == 0);
  // parts that are not whole row blocks of 16 are packed as one weight
  const LinearWeight odd = fuse({part(40, 16, 16, 6, two_bit), part(24, 16, 16, 7, six_bit)});
  CHECK(cpu_qweight_segments(pack_cpu_quantized(odd)).size() == 1);
}

TEST_CASE("CpuBackend packing: a packed weight keeps its parts' views; a copy with other bytes is read afresh") {
  const LinearWeight fused = fuse({split(part(64, 32, 32, 11, iq4_level), 16), part(32, 16, 16, 12, two_bit)});
  const LinearWeight packed = pack_cpu_quantized(fused);
  std::vector<CpuQSegment> scratch;
  const std::vector<CpuQSegment>& kept = cpu_qweight_parts(packed, scratch);
  CHECK(scratch.empty());  // read at packing, not now
  const std::vector<CpuQSegment> read = cpu_qweight_segments(packed);
  REQUIRE(kept.size() == read.size());
  for (size_t i = 0; i < read.size(); ++i) {
    CHECK(kept[i].row0 == read[i].row0);
    const kernels::QWeightView &k = kept[i].view, &r = read[i].view;
    CHECK((k.bits == r.bits && k.n == r.n && k.k == r.k && k.group == r.group && k.layout == r.layout &&
           k.packed == r.packed && k.scale_type == r.scale_type && k.scale == r.scale && k.offset == r.offset &&
           k.implied_zero == r.implied_zero && k.scale_d == r.scale_d && k.offset_d == r.offset_d &&
           k.codebook == r.codebook && k.narrow_base == r.narrow_base && k.narrow_five == r.narrow_five));
  }
  REQUIRE(packed.packed_view);
  CHECK(packed.packed_view->bytes == packed.data.nbytes() + packed.scales.nbytes() + packed.zeros.nbytes());

  // The same bytes elsewhere: the view (pointers into the first copy) is not used for them.
  LinearWeight moved = packed;
  moved.data = Tensor::empty_host(DType::U8, packed.data.shape);
  std::memcpy(moved.data.data, packed.data.data, packed.data.nbytes());
  const std::vector<CpuQSegment>& fresh = cpu_qweight_parts(moved, scratch);
  CHECK(&fresh == &scratch);
  REQUIRE(fresh.size() == read.size());
  const auto* base = moved.data.ptr<uint8_t>();
  for (const CpuQSegment& s : fresh)
    CHECK((s.view.packed >= base && s.view.packed < base + moved.data.nbytes()));

  // Both run the same numbers, each through its own bytes.
  auto be = make_cpu_backend(2, ActQuantMode::Int8);
  std::mt19937 rng(13);
  std::normal_distribution<float> nd(0.f, 1.f);
  Tensor x = Tensor::empty_host(DType::F32, {3, kK});
  for (int64_t i = 0; i < 3 * kK; ++i) x.ptr<float>()[i] = nd(rng);
  Tensor a = Tensor::empty_host(DType::F32, {3, packed.n}), b = Tensor::empty_host(DType::F32, {3, packed.n});
  be->linear(x, packed, nullptr, a);
  be->linear(x, moved, nullptr, b);
  CHECK(std::memcmp(a.data, b.data, a.nbytes()) == 0);
}
