#include "kernels/cuda/gemm_tuner.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace llmctl::cuda {
namespace {

int64_t bucket(int64_t t) {
  int64_t b = 1;
  while (b < t) b <<= 1;
  return b;
}

constexpr int kCandidates = 8;

}  // namespace

// The descriptors of one call (row-major out[T,N] = x[T,K] w[N,K]^T is column-major
// out^T[N,T] = w^T x^T: A = w transposed, B = x).
struct GemmTuner::Descs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  Descs(const GemmParams& p, size_t ws_bytes) {
    CUBLAS_CHECK(cublas_api().cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    CUBLAS_CHECK(cublas_api().cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    CUBLAS_CHECK(cublas_api().cublasLtMatrixLayoutCreate(&a, cuda_data_type(p.in_dtype), uint64_t(p.K), uint64_t(p.N), p.K));
    CUBLAS_CHECK(cublas_api().cublasLtMatrixLayoutCreate(&b, cuda_data_type(p.in_dtype), uint64_t(p.K), uint64_t(p.T), p.K));
    CUBLAS_CHECK(cublas_api().cublasLtMatrixLayoutCreate(&c, cuda_data_type(p.out_dtype), uint64_t(p.N), uint64_t(p.T), p.N));
    CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceCreate(&pref));
    CUBLAS_CHECK(cublas_api().cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                                   &ws_bytes, sizeof(ws_bytes)));
  }
  ~Descs() {
    if (pref) cublas_api().cublasLtMatmulPreferenceDestroy(pref);
    for (auto l : {a, b, c})
      if (l) cublas_api().cublasLtMatrixLayoutDestroy(l);
    if (op) cublas_api().cublasLtMatmulDescDestroy(op);
  }
};

GemmTuner::GemmTuner(void* workspace, size_t workspace_bytes, std::string cache_path)
    : ws_(workspace), ws_bytes_(workspace_bytes), path_(std::move(cache_path)) {
  CUBLAS_CHECK(cublas_api().cublasLtCreate(&lt_));
  load();
}

GemmTuner::~GemmTuner() {
  if (lt_) cublas_api().cublasLtDestroy(lt_);
}

// Cache lines: in out N K T-bucket, then either "gemv" and its rows per block, or the 8 words of the
// cuBLASLt algorithm in hex.
void GemmTuner::load() {
  if (path_.empty()) return;
  std::ifstream in(path_);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ss(line);
    int i = 0, o = 0;
    int64_t n = 0, k = 0, t = 0;
    Entry e;
    if (!(ss >> i >> o >> n >> k >> t)) continue;
    bool ok = true;
    if (line.find(" gemv ") != std::string::npos) {
      std::string tag;
      ok = bool(ss >> tag >> e.gemv_rows) && std::find(std::begin(kGemvVariants), std::end(kGemvVariants),
                                                       e.gemv_rows) != std::end(kGemvVariants);
    } else {
      for (auto& w : e.algo.data) ok = ok && bool(ss >> std::hex >> w);
    }
    if (ok) algos_[Key{i, o, n, k, t}] = e;  // a later line for the same shape wins
  }
}

void GemmTuner::save_entry(const Key& key, const Entry& e) const {
  if (path_.empty()) return;
  std::ofstream out(path_, std::ios::app);
  if (!out) return;  // a read-only home only costs the measurement next time
  out << std::get<0>(key) << ' ' << std::get<1>(key) << ' ' << std::get<2>(key) << ' ' << std::get<3>(key) << ' '
      << std::get<4>(key);
  if (e.gemv_rows > 0) {
    out << " gemv " << e.gemv_rows;
  } else {
    out << std::hex;
    for (auto w : e.algo.data) out << ' ' << w;
  }
  out << '\n';
}

GemmTuner::Entry GemmTuner::tune(const GemmParams& p, Descs& d, cudaStream_t stream) {
  cublasLtMatmulHeuristicResult_t res[kCandidates];
  int found = 0;
  CUBLAS_CHECK(cublas_api().cublasLtMatmulAlgoGetHeuristic(lt_, d.op, d.a, d.b, d.c, d.c, d.pref, kCandidates, res, &found));
  KERNEL_CHECK(found > 0) << "gemm: cuBLASLt has no algorithm for T=" << p.T << " N=" << p.N << " K=" << p.K;
  Entry best;
  best.algo = res[0].algo;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  if (capturing != cudaStreamCaptureStatusNone) return best;

  cudaEvent_t e0, e1;
  CUDA_CHECK(cudaEventCreate(&e0));
  CUDA_CHECK(cudaEventCreate(&e1));
  // Best of 3 timed runs after a warm-up; +inf when the candidate fails to launch.
  const auto time_of = [&](const auto& run) {
    float t_best = 1e30f;
    for (int rep = 0; rep < 4; ++rep) {
      CUDA_CHECK(cudaEventRecord(e0, stream));
      if (!run()) return 1e30f;
      CUDA_CHECK(cudaEventRecord(e1, stream));
      CUDA_CHECK(cudaEventSynchronize(e1));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep > 0) t_best = std::min(t_best, ms);
    }
    return t_best;
  };
  float best_ms = 1e30f;
  for (int i = 0; i < found; ++i) {
    const float ms = time_of([&] {
      return cublas_api().cublasLtMatmul(lt_, d.op, &p.alpha, p.w, d.a, p.x, d.b, &p.beta, p.out, d.c, p.out, d.c,
                                         &res[i].algo, ws_, ws_bytes_, stream) == CUBLAS_STATUS_SUCCESS;
    });
    if (ms < best_ms) {
      best_ms = ms;
      best.algo = res[i].algo;
    }
  }
  // The GEMV variants serve every T of the bucket only when the bucket's largest T fits.
  GemmParams bucket_max = p;
  bucket_max.T = bucket(p.T);
  if (gemv_fits(p) && gemv_fits(bucket_max)) {
    for (int rows : kGemvVariants) {
      const float ms = time_of([&] {
        gemv(p, rows, stream);
        return true;
      });
      if (ms < best_ms) {
        best_ms = ms;
        best.gemv_rows = rows;
      }
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  ++measured_;
  return best;
}

void GemmTuner::gemm(const GemmParams& p, cudaStream_t stream) {
  if (p.T == 0 || p.N == 0) return;
  KERNEL_CHECK(p.K > 0) << "gemm: K must be positive";
  KERNEL_CHECK(p.in_dtype == p.out_dtype || p.out_dtype == DType::F32) << "gemm: out dtype must match inputs or be f32";
  Descs d(p, ws_bytes_);
  const Key key{int(p.in_dtype), int(p.out_dtype), p.N, p.K, bucket(p.T)};
  auto it = algos_.find(key);
  if (it != algos_.end() && !it->second.checked) {  // from the file: does it still fit this shape?
    cublasLtMatmulHeuristicResult_t r{};
    const bool fits = it->second.gemv_rows > 0
                          ? gemv_fits(p)
                          : cublas_api().cublasLtMatmulAlgoCheck(lt_, d.op, d.a, d.b, d.c, d.c, &it->second.algo, &r) ==
                                    CUBLAS_STATUS_SUCCESS &&
                                r.workspaceSize <= ws_bytes_;
    if (fits) {
      it->second.checked = true;
      ++from_cache_;
    } else {
      algos_.erase(it);
      it = algos_.end();
    }
  }
  if (it == algos_.end()) {
    const int measured_before = measured_;
    Entry e = tune(p, d, stream);
    if (measured_ > measured_before) save_entry(key, e);  // not an untimed choice made during capture
    e.checked = true;
    it = algos_.emplace(key, e).first;
  }
  cublasLtMatmulAlgo_t algo = it->second.algo;
  if (it->second.gemv_rows > 0) {
    if (gemv_fits(p)) {
      gemv(p, it->second.gemv_rows, stream);
      return;
    }
    // A call of the bucket the GEMV cannot take (unaligned operands): cuBLASLt's first choice.
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    CUBLAS_CHECK(cublas_api().cublasLtMatmulAlgoGetHeuristic(lt_, d.op, d.a, d.b, d.c, d.c, d.pref, 1, &r, &found));
    KERNEL_CHECK(found > 0) << "gemm: cuBLASLt has no algorithm for T=" << p.T << " N=" << p.N << " K=" << p.K;
    algo = r.algo;
  }
  CUBLAS_CHECK(cublas_api().cublasLtMatmul(lt_, d.op, &p.alpha, p.w, d.a, p.x, d.b, &p.beta, p.out, d.c, p.out, d.c,
                                           &algo, ws_, ws_bytes_, stream));
}

}  // namespace llmctl::cuda
