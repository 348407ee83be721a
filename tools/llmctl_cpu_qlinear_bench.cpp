// CPU quantized-linear microbenchmark (numbers are reported, never asserted): Backend::linear on the
// CPU backend for the default model's (SmolLM2-135M) linear shapes -- qkv 576 -> 960, gate_up
// 576 -> 3072, down 1536 -> 576, lm_head 576 -> 49152 -- with int4 and int8 group-32 weights (f16
// scales and offsets, random codes) under --act-quant int8 and none, against the dense f32 and bf16
// kernels on the same shapes, at T = 1 and T = 128 tokens, on 1 and 2 threads. Where K is whole
// 256-input super-blocks (down, and a 1024-wide model's shapes), GGUF K-quant-like weights too: int4
// group 32 with scales d x sc and offsets -(dmin x m) (Q4_K), int8 group 16 with scales d x sc (Q6_K),
// each packed factored (kernels/cpu/qlinear.h) and, one scale nudged off its factors, with f32 scales;
// Q6_K also with one code out of its range (wide codes, not narrow); Q3_K-like int8 group-16 weights
// (codes -4..3: narrow 4-bit codes) and the same with one far code (a codebook).
// GGUF IQ4_NL-like int8 weights (codes from its 16 levels) as 4-bit codebook positions and, a 17th
// value put in, as 8-bit codes; IQ2-like ones (its grid values with their signs, spanning 86) in groups
// of 32 with f16 scales and of 16 with factored ones (IQ2_XXS / IQ2_XS).
// Q6_K-like weights also through the kernels directly (1 thread, int8 activations): the row-lane
// layout's 6-bit narrow codes (what the backend packs) beside the 8-bit narrow ones of before.
// Reports the median time, GB/s of weight bytes read (packed codes + scales + offsets, or the dense
// matrix) and GFLOP/s (2 * T * N * K). Prints a table on stdout.
// Shapes up1024 (1024 -> 5632) and down2816 (2816 -> 1024) are bench-cpu-kquants.sh's model's MLP.
// Options: --threads 1,2  --tokens 1,128  --min-ms 300 (time spent per measurement)  --cpu-isa ISA
// --cpu-weight-prefetch auto|all|wide (qlinear.h qlinear_prefetch)
// --codebook-prefill auto|magnitude|narrow (qlinear.h qlinear_codebook_prefill)
// --shapes h1024,up1024 (those only)  --act int8|none (that activation mode only).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/qlinear.h"

using namespace llmctl;

namespace {

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) v.push_back(std::atoi(item.c_str()));
  return v;
}

Tensor random_tensor(DType dt, std::vector<int64_t> shape, std::mt19937& rng, float lo, float hi) {
  Tensor t = Tensor::empty_host(dt, std::move(shape));
  std::uniform_real_distribution<float> d(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const float v = d(rng);
    if (dt == DType::F32) t.ptr<float>()[i] = v;
    else if (dt == DType::F16) t.ptr<uint16_t>()[i] = f32_to_f16(v);
    else t.ptr<uint16_t>()[i] = f32_to_bf16(v);
  }
  return t;
}

// Canonical group-32 weight: codes one per byte, f16 scales/offsets.
LinearWeight canonical(int bits, int64_t N, int64_t K, std::mt19937& rng) {
  LinearWeight w;
  w.format = bits == 4 ? WeightFormat::Int4Group : WeightFormat::Int8Group;
  w.n = N, w.k = K, w.group_size = 32;
  w.data = Tensor::empty_host(DType::U8, {N, K});
  std::uniform_int_distribution<int> c(0, 255);
  for (int64_t i = 0; i < N * K; ++i) w.data.ptr<uint8_t>()[i] = uint8_t(bits == 4 ? c(rng) & 15 : c(rng));
  w.scales = random_tensor(DType::F16, {N, K / 32}, rng, 0.001f, 0.02f);
  w.zeros = random_tensor(DType::F16, {N, K / 32}, rng, -0.1f, 0.1f);
  return w;
}

// A GGUF K-quant-like weight: Q4_K (int4, group 32, scales d x sc, offsets -(dmin x m)) or Q6_K (int8,
// group 16, scales d x sc, no offsets) with f32 scales; factored = false nudges one scale by an ulp,
// so that the backend keeps f32 scales (the same weight otherwise); wide = true puts one code of Q6_K
// out of -32..31, so that the backend keeps them wide (qlinear.h's narrow codes).
LinearWeight kquant(int bits, int64_t N, int64_t K, bool factored, std::mt19937& rng, bool wide = false) {
  LinearWeight w;
  w.format = bits == 4 ? WeightFormat::Int4Group : WeightFormat::Int8Group;
  w.n = N, w.k = K, w.group_size = bits == 4 ? 32 : 16;
  const int64_t G = K / w.group_size;
  w.data = Tensor::empty_host(DType::U8, {N, K});
  std::uniform_int_distribution<int> c(0, 255);
  for (int64_t i = 0; i < N * K; ++i) w.data.ptr<uint8_t>()[i] = uint8_t(bits == 4 ? c(rng) & 15 : (c(rng) & 63) - 32);
  w.scales = Tensor::empty_host(DType::F32, {N, G});
  w.zeros = Tensor::empty_host(DType::F32, {N, G});
  std::uniform_real_distribution<float> u(0.5f, 1.0f);
  for (int64_t i = 0; i < N * G; i += 8) {
    const float d = f16_to_f32(f32_to_f16(1e-3f * u(rng))), dmin = f16_to_f32(f32_to_f16(1e-2f * u(rng)));
    for (int64_t j = i; j < i + 8; ++j) {
      w.scales.ptr<float>()[j] = d * float(bits == 4 ? c(rng) % 64 : c(rng) - 128);
      w.zeros.ptr<float>()[j] = bits == 4 ? -(dmin * float(c(rng) % 64)) : -0.0f;
    }
  }
  if (!factored) w.scales.ptr<float>()[0] = std::nextafter(w.scales.ptr<float>()[0], 1.0f);
  if (wide) w.data.ptr<uint8_t>()[N * K - 1] = 100;
  return w;
}

// GGUF codebooks' values: IQ4_NL's 16 levels, IQ2's grid values with their signs (+-8, 25, 43).
const std::vector<int8_t> kIQ4NL = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
const std::vector<int8_t> kIQ2 = {-43, -25, -8, 8, 25, 43};

// A GGUF codebook weight, IQ4_NL-like: int8 group 32, codes from `levels` (IQ4_NL's 16), f16 scales,
// no offsets; the CPU backend packs it as 4-bit positions in a codebook where its kernels take one
// (qlinear.h); codebook = false puts a 17th value into the last row, so that it keeps the 8-bit codes.
LinearWeight book_weight(int64_t N, int64_t K, bool codebook, std::mt19937& rng,
                         const std::vector<int8_t>& levels = kIQ4NL) {
  LinearWeight w;
  w.format = WeightFormat::Int8Group;
  w.n = N, w.k = K, w.group_size = 32;
  w.data = Tensor::empty_host(DType::I8, {N, K});
  for (int64_t i = 0; i < N * K; ++i) w.data.ptr<int8_t>()[i] = levels[rng() % levels.size()];
  if (!codebook) w.data.ptr<int8_t>()[N * K - 1] = 0;
  w.scales = random_tensor(DType::F16, {N, K / 32}, rng, 1e-4f, 1e-3f);
  w.zeros = Tensor::empty_host(DType::F16, {N, K / 32});
  for (int64_t i = 0; i < N * (K / 32); ++i) w.zeros.ptr<uint16_t>()[i] = 0x8000;  // -0: none
  return w;
}

// w (a Q6_K-like kquant weight, factored, narrow from -32) packed row-lane at `bits` (6 or 8), as the
// kernels' view; *packed holds the bytes.
kernels::QWeightView q6k_rowlane(const LinearWeight& w, int bits, std::vector<uint8_t>* packed) {
  kernels::FactoredParams fs;
  if (!kernels::qweight_factor(w.n, w.k, w.group_size, w.scales.ptr<float>(), &fs)) std::abort();
  const int64_t bb = kernels::qweight_rowlane_block_bytes(bits, w.k, w.group_size, kernels::ScaleType::Factored, 0);
  packed->assign(size_t((w.n + 15) / 16 * bb), 0);
  kernels::qweight_pack_rowlane(bits, w.n, w.k, w.group_size, kernels::ScaleType::Factored, w.data.ptr<uint8_t>(), &fs,
                                nullptr, packed->data(), /*implied_zero=*/0, /*narrow_base=*/-32);
  kernels::QWeightView v;
  v.bits = bits, v.n = w.n, v.k = w.k, v.group = w.group_size, v.layout = kernels::QLayout::RowLane16;
  v.packed = packed->data(), v.scale_type = kernels::ScaleType::Factored, v.implied_zero = 0, v.narrow_base = -32;
  return v;
}

struct Timing {
  double median = 0, best = 0, cpu = 0;  // seconds a call: wall median, wall minimum, process CPU time / threads
};
double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// f() timed over repetitions filling about min_ms (after one warm-up call).
template <class F>
Timing time_calls(F&& f, double min_ms, int threads) {
  f();
  std::vector<double> ts;
  const double c0 = cpu_now();
  const auto start = std::chrono::steady_clock::now();
  while (ts.size() < 5 || (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() < min_ms &&
                           ts.size() < 10000)) {
    const auto a = std::chrono::steady_clock::now();
    f();
    ts.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - a).count());
  }
  Timing r;
  r.cpu = (cpu_now() - c0) / double(ts.size()) / threads;
  std::sort(ts.begin(), ts.end());
  r.median = ts[ts.size() / 2];
  r.best = ts.front();
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> threads = {1, 2}, tokens = {1, 128};
  double min_ms = 300;
  std::string only_shapes, only_act;  // empty: all
  std::string isa = "auto", prefetch = "auto", codebook_prefill = "auto";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) threads = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--tokens")) tokens = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--min-ms")) min_ms = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--cpu-isa")) isa = argv[i + 1];
    else if (!std::strcmp(argv[i], "--cpu-weight-prefetch")) prefetch = argv[i + 1];
    else if (!std::strcmp(argv[i], "--codebook-prefill")) codebook_prefill = argv[i + 1];
    else if (!std::strcmp(argv[i], "--shapes")) only_shapes = "," + std::string(argv[i + 1]) + ",";
    else if (!std::strcmp(argv[i], "--act")) only_act = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: %s [--threads 1,2] [--tokens 1,128] [--min-ms 300]"
                   " [--cpu-isa auto|amx|avx512-vnni|avx-vnni|avx2|scalar] [--shapes qkv,h1024,...]"
                   " [--act int8|none] [--cpu-weight-prefetch auto|all|wide]"
                   " [--codebook-prefill auto|magnitude|narrow]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    kernels::select_cpu_kernels(isa, false, prefetch);
    kernels::select_codebook_prefill(codebook_prefill);
  } catch (const std::exception& e) {  // an ISA this CPU lacks, an unknown name
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 2;
  }
  struct Shape {
    const char* name;
    int64_t K, N;
  } shapes[] = {{"qkv", 576, 960},     {"gate_up", 576, 3072},    {"down", 1536, 576},
                {"lm_head", 576, 49152}, {"h1024", 1024, 1024}, {"lm1024", 1024, 49152},
                {"up1024", 1024, 5632},  {"down2816", 2816, 1024}};
  std::printf("qlinear isa %s%s, weight prefetch %s, codebook prefill %s, dense avx2 %s\n", kernels::qlinear_isa(),
              kernels::qlinear_amx() ? " + amx" : "", kernels::qlinear_prefetch(), kernels::qlinear_codebook_prefill(),
              kernels::cpu_has_avx2() ? "yes" : "no");
  // GB/s and GFLOP/s from the median wall time; best_us the fastest call; cpu_us the process CPU time a
  // call / threads (on a shared machine, what the kernel costs when it has the cores).
  std::printf("%-8s %11s %4s %3s %-21s %10s %9s %9s %9s %9s\n", "shape", "K->N", "T", "thr", "weights", "median_us",
              "best_us", "cpu_us", "GB/s", "GFLOP/s");
  std::mt19937 rng(1);
  for (const Shape& s : shapes) {
    if (!only_shapes.empty() && only_shapes.find("," + std::string(s.name) + ",") == std::string::npos) continue;
    const LinearWeight c4 = canonical(4, s.N, s.K, rng), c8 = canonical(8, s.N, s.K, rng);
    const Tensor wf32 = random_tensor(DType::F32, {s.N, s.K}, rng, -0.05f, 0.05f);
    const Tensor wbf16 = random_tensor(DType::BF16, {s.N, s.K}, rng, -0.05f, 0.05f);
    for (int T : tokens) {
      const Tensor x = random_tensor(DType::F32, {T, s.K}, rng, -2.f, 2.f);
      Tensor out = Tensor::empty_host(DType::F32, {T, s.N});
      for (int th : threads) {
        auto report = [&](const char* what, double bytes, const Timing& tm) {
          std::printf("%-8s %5lld->%-5lld %4d %3d %-21s %10.1f %9.1f %9.1f %9.2f %9.2f\n", s.name, (long long)s.K,
                      (long long)s.N, T, th, what, tm.median * 1e6, tm.best * 1e6, tm.cpu * 1e6, bytes / tm.median / 1e9,
                      2.0 * T * s.N * s.K / tm.median / 1e9);
          std::fflush(stdout);
        };
        for (ActQuantMode aq : {ActQuantMode::Int8, ActQuantMode::None}) {
          if (!only_act.empty() && only_act != act_quant_name(aq)) continue;
          auto be = make_cpu_backend(th, aq);
          for (const LinearWeight* c : {&c4, &c8}) {
            const LinearWeight w = be->upload_quantized(*c);
            const double bytes = double(w.data.nbytes() + w.scales.nbytes() + w.zeros.nbytes());
            const std::string what = std::string(c == &c4 ? "int4-g32" : "int8-g32") + " act " + act_quant_name(aq);
            report(what.c_str(), bytes, time_calls([&] { be->linear(x, w, nullptr, out); }, min_ms, th));
          }
          for (bool codebook : {false, true}) {
            const LinearWeight w = be->upload_quantized(book_weight(s.N, s.K, codebook, rng));
            const double bytes = double(w.data.nbytes() + w.scales.nbytes() + w.zeros.nbytes());
            const std::string what = std::string(codebook ? "iq4nl book" : "iq4nl i8") + " act " + act_quant_name(aq);
            report(what.c_str(), bytes, time_calls([&] { be->linear(x, w, nullptr, out); }, min_ms, th));
          }
          {  // an IQ2-like codebook (values spanning 86: narrow codes on AVX2 without VNNI), groups of 32
            const LinearWeight w = be->upload_quantized(book_weight(s.N, s.K, true, rng, kIQ2));
            const double bytes = double(w.data.nbytes() + w.scales.nbytes() + w.zeros.nbytes());
            report((std::string("iq2 book g32 act ") + act_quant_name(aq)).c_str(), bytes,
                   time_calls([&] { be->linear(x, w, nullptr, out); }, min_ms, th));
          }
          if (s.K % 256 != 0) continue;
          for (int bits : {4, 8})
            for (bool factored : {false, true}) {
              const LinearWeight w = be->upload_quantized(kquant(bits, s.N, s.K, factored, rng));
              const double bytes = double(w.data.nbytes() + w.scales.nbytes() + w.zeros.nbytes());
              const std::string what = std::string(bits == 4 ? "q4k" : "q6k") + (factored ? " fact" : " f32") +
                                       " act " + act_quant_name(aq);
              report(what.c_str(), bytes, time_calls([&] { be->linear(x, w, nullptr, out); }, min_ms, th));
            }
          // Q3_K-like: codes -4..3 (narrow 4-bit), or one far code (a codebook); IQ2_XS-like: IQ2's values,
          // factored scales in groups of 16
          for (const char* kind : {"q3k narrow4", "q3k book", "iq2 book g16"}) {
            const bool iq2 = kind[0] == 'i';
            LinearWeight q3 = kquant(8, s.N, s.K, true, rng);
            for (int64_t i = 0; i < s.N * s.K; ++i)
              q3.data.ptr<uint8_t>()[i] = uint8_t(iq2 ? kIQ2[rng() % kIQ2.size()] : int8_t(int(rng() % 8) - 4));
            if (std::string(kind) == "q3k book") q3.data.ptr<uint8_t>()[s.N * s.K - 1] = 100;
            const LinearWeight w = be->upload_quantized(q3);
            const double bytes = double(w.data.nbytes() + w.scales.nbytes() + w.zeros.nbytes());
            report((std::string(kind) + " act " + act_quant_name(aq)).c_str(), bytes,
                   time_calls([&] { be->linear(x, w, nullptr, out); }, min_ms, th));
          }
          const LinearWeight w = be->upload_quantized(kquant(8, s.N, s.K, true, rng, /*wide=*/true));
          const double bytes = double(w.data.nbytes() + w.scales.nbytes() + w.zeros.nbytes());
          report((std::string("q6k fact wide act ") + act_quant_name(aq)).c_str(), bytes,
                 time_calls([&] { be->linear(x, w, nullptr, out); }, min_ms, th));
        }
        if (th == 1 && s.K % 256 == 0 && kernels::qweight_preferred_layout(8, 16) == kernels::QLayout::RowLane16) {
          const LinearWeight q6 = kquant(8, s.N, s.K, true, rng);
          std::vector<uint8_t> abuf(kernels::qactivation_bytes(T, s.K) + 64);
          void* ab = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(abuf.data()) + 63) & ~uintptr_t(63));
          for (int bits : {8, 6}) {
            std::vector<uint8_t> packed;
            const kernels::QWeightView v = q6k_rowlane(q6, bits, &packed);
            report(bits == 8 ? "q6k kernel narrow8" : "q6k kernel narrow6", double(packed.size()), time_calls([&] {
                     const kernels::QActivations qa = kernels::quantize_activations(x.ptr<float>(), T, s.K, ab);
                     kernels::qlinear_rows_q8(qa, v, nullptr, 0, s.N, out.ptr<float>(), s.N);
                   }, min_ms, 1));
          }
        }
        auto be = make_cpu_backend(th);
        report("dense f32", double(wf32.nbytes()), time_calls([&] { be->linear(x, wf32, nullptr, out); }, min_ms, th));
        report("dense bf16", double(wbf16.nbytes()), time_calls([&] { be->linear(x, wbf16, nullptr, out); }, min_ms, th));
      }
    }
  }
  return 0;
}
