#include "engine/parallel/nccl_comm.h"

#include "engine/core/error.h"

#ifdef LLMCTL_HAVE_NCCL
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <nccl.h>

#include <cstring>
#include <type_traits>

#include "engine/backend/cuda/cuda_backend.h"
#endif

namespace llmctl {

#ifdef LLMCTL_HAVE_NCCL
namespace {

// libnccl is opened when a communicator is first made, not linked: llmctl starts (and runs one
// rank) on a machine without it, and says so only when NCCL is asked for.
struct NcclApi {
  decltype(&::ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&::ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&::ncclCommDestroy) comm_destroy = nullptr;
  decltype(&::ncclAllReduce) all_reduce = nullptr;
  decltype(&::ncclAllGather) all_gather = nullptr;
  decltype(&::ncclGetErrorString) error_string = nullptr;
};

const NcclApi& nccl() {
  static const NcclApi api = [] {
    void* lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib) lib = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    LLM_REQUIRE(lib) << "NCCL is not installed (libnccl.so.2 not found: " << dlerror()
                     << "); GPU ranks need it, CPU ranks (--device cpu) do not";
    NcclApi a;
    auto get = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      LLM_REQUIRE(fn) << "libnccl has no " << name;
    };
    get(a.get_unique_id, "ncclGetUniqueId");
    get(a.comm_init_rank, "ncclCommInitRank");
    get(a.comm_destroy, "ncclCommDestroy");
    get(a.all_reduce, "ncclAllReduce");
    get(a.all_gather, "ncclAllGather");
    get(a.error_string, "ncclGetErrorString");
    return a;
  }();
  return api;
}

void nccl_check(ncclResult_t r, const char* what) {
  LLM_CHECK(r == ncclSuccess) << what << " failed: " << nccl().error_string(r);
}
void cuda_check(cudaError_t e, const char* what) {
  LLM_CHECK(e == cudaSuccess) << what << " failed: " << cudaGetErrorString(e);
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::F32: return ncclFloat32;
    case DType::F16: return ncclFloat16;
    case DType::BF16: return ncclBfloat16;
    default: LLM_CHECK(false) << "NCCL all-reduce of " << dtype_name(t) << " tensors";
  }
  return ncclFloat32;
}

class NcclComm final : public Comm {
 public:
  NcclComm(Comm* bootstrap, cudaStream_t stream) : boot_(bootstrap), stream_(stream) {
    rank_ = boot_ ? boot_->rank() : 0;
    world_ = boot_ ? boot_->world() : 1;
    ncclUniqueId id;
    if (rank_ == 0) nccl_check(nccl().get_unique_id(&id), "ncclGetUniqueId");
    if (boot_) boot_->broadcast(&id, sizeof id, 0);
    nccl_check(nccl().comm_init_rank(&comm_, world_, id, rank_), "ncclCommInitRank");
  }
  ~NcclComm() override { nccl().comm_destroy(comm_); }

  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string name() const override { return "nccl"; }

  void all_reduce_sum(Tensor& x) override {
    LLM_CHECK(x.device == Device::CUDA) << "NCCL all_reduce_sum of a host tensor " << x.shape_str();
    nccl_check(nccl().all_reduce(x.data, x.data, size_t(x.numel()), nccl_type(x.dtype), ncclSum, comm_, stream_),
               "ncclAllReduce");
  }

  // Gathered as [world, R, C] in a stream-ordered temporary (capturable), then each rank's block
  // copied to its columns of out [R, world * C].
  void all_gather_cols(const Tensor& x, Tensor& out) override {
    LLM_CHECK(x.device == Device::CUDA && out.device == Device::CUDA && x.dtype == DType::F32 &&
              out.dtype == DType::F32 && x.rank() == 2 && out.rank() == 2 && out.dim(0) == x.dim(0) &&
              out.dim(1) == x.dim(1) * world_)
        << "NCCL all_gather_cols: x " << x.shape_str() << ", out " << out.shape_str() << ", world " << world_;
    const size_t R = size_t(x.dim(0)), C = size_t(x.dim(1)), row = C * sizeof(float);
    if (world_ == 1) {
      cuda_check(cudaMemcpyAsync(out.data, x.data, R * row, cudaMemcpyDeviceToDevice, stream_), "cudaMemcpyAsync");
      return;
    }
    void* tmp = nullptr;
    cuda_check(cudaMallocAsync(&tmp, R * row * size_t(world_), stream_), "cudaMallocAsync");
    nccl_check(nccl().all_gather(x.data, tmp, R * C, ncclFloat32, comm_, stream_), "ncclAllGather");
    for (int w = 0; w < world_; ++w)
      cuda_check(cudaMemcpy2DAsync(static_cast<char*>(out.data) + size_t(w) * row, row * size_t(world_),
                                   static_cast<char*>(tmp) + size_t(w) * R * row, row, row, R,
                                   cudaMemcpyDeviceToDevice, stream_),
                 "cudaMemcpy2DAsync");
    cuda_check(cudaFreeAsync(tmp, stream_), "cudaFreeAsync");
  }

  // Host traffic: the bootstrap communicator's (world 1: nothing to exchange).
  void broadcast(void* data, size_t bytes, int root) override {
    if (boot_) boot_->broadcast(data, bytes, root);
  }
  int64_t all_reduce_min(int64_t v) override { return boot_ ? boot_->all_reduce_min(v) : v; }
  void send(const void* data, size_t bytes, int peer) override {
    LLM_CHECK(boot_) << "send to rank " << peer << ": world size 1";
    boot_->send(data, bytes, peer);
  }
  void recv(void* data, size_t bytes, int peer) override {
    LLM_CHECK(boot_) << "recv from rank " << peer << ": world size 1";
    boot_->recv(data, bytes, peer);
  }
  std::unique_ptr<Comm> split(int, int) override {
    LLM_CHECK(false) << "split an NCCL communicator: split its bootstrap communicator instead";
    return nullptr;
  }
  void abort_all(const std::string& why) override {
    if (boot_) boot_->abort_all(why);
    LLM_CHECK(false) << why;
  }

 private:
  Comm* boot_;
  cudaStream_t stream_;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, world_ = 1;
};

}  // namespace

bool nccl_available() { return true; }

std::unique_ptr<Comm> make_nccl_comm(Comm* bootstrap, Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  LLM_REQUIRE(cuda) << "the NCCL communicator runs on the CUDA backend, not " << backend.name();
  return std::make_unique<NcclComm>(bootstrap, cuda->stream());
}

#else

bool nccl_available() { return false; }
std::unique_ptr<Comm> make_nccl_comm(Comm*, Backend&) {
  LLM_REQUIRE(false) << "this llmctl was built without NCCL (CUDA with NCCL is needed for tensor parallelism on GPUs)";
  return nullptr;
}

#endif

}  // namespace llmctl
