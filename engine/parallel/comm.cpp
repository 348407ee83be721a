#include "engine/parallel/comm.h"

#include <cstring>

#include "engine/core/error.h"

namespace llmctl {

int64_t Comm::irecv(void*, size_t, int peer) {
  LLM_CHECK(false) << name() << " communicator: no non-blocking receive (from rank " << peer << ")";
  return -1;
}

int64_t Comm::ibroadcast(void* data, size_t bytes, int root) {
  broadcast(data, bytes, root);
  return -1;
}

void Comm::wait(int64_t handle) {
  LLM_CHECK(handle < 0) << name() << " communicator: no non-blocking call to wait for (" << handle << ")";
}

namespace {

class SingleRankComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  std::string name() const override { return "single-rank"; }
  void all_reduce_sum(Tensor&) override {}
  void all_gather_cols(const Tensor& x, Tensor& out) override {
    LLM_CHECK(x.device == Device::CPU && out.device == Device::CPU && x.dtype == DType::F32 && out.dtype == DType::F32 &&
              x.numel() == out.numel())
        << "all_gather_cols: x " << x.shape_str() << ", out " << out.shape_str() << " (f32 host tensors of one size)";
    if (x.data != out.data) std::memcpy(out.data, x.data, x.nbytes());
  }
  void broadcast(void*, size_t, int root) override { LLM_CHECK(root == 0) << "broadcast from rank " << root << " of 1"; }
  int64_t all_reduce_min(int64_t v) override { return v; }
  void send(const void*, size_t, int peer) override { LLM_CHECK(false) << "send to rank " << peer << ": world size 1"; }
  void recv(void*, size_t, int peer) override { LLM_CHECK(false) << "recv from rank " << peer << ": world size 1"; }
  void abort_all(const std::string& why) override { LLM_CHECK(false) << why; }
  std::unique_ptr<Comm> split(int, int) override { return std::make_unique<SingleRankComm>(); }
};

}  // namespace

std::unique_ptr<Comm> make_single_rank_comm() { return std::make_unique<SingleRankComm>(); }

}  // namespace llmctl
