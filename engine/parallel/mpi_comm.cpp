#include "engine/parallel/mpi_comm.h"

#include "engine/core/error.h"

#ifdef LLMCTL_HAVE_MPI
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>
#endif

namespace llmctl {

#ifdef LLMCTL_HAVE_MPI
namespace {

void mpi_check(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  LLM_CHECK(false) << what << " failed: " << std::string(msg, size_t(len));
}

// Time spent in the step's collectives (waiting for the slowest rank included), per process; with
// --comm-stats each rank prints them at exit (scripts/bench-tp-cpu.sh reads them).
struct CollectiveStats {
  int64_t reduces = 0, gathers = 0;
  double reduce_s = 0, gather_s = 0;
};
CollectiveStats g_stats;
bool g_report_stats = false;  // make_mpi_comm(report_stats)

class Timed {
 public:
  Timed(int64_t& count, double& seconds) : count_(count), seconds_(seconds), t0_(std::chrono::steady_clock::now()) {}
  ~Timed() {
    ++count_;
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

 private:
  int64_t& count_;
  double& seconds_;
  std::chrono::steady_clock::time_point t0_;
};

void init_mpi_once() {
  int done = 0;
  MPI_Initialized(&done);
  if (done) return;
  int provided = 0;
  mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
  LLM_CHECK(provided >= MPI_THREAD_SERIALIZED) << "MPI gives thread level " << provided << ", llmctl needs SERIALIZED";
  std::atexit([] {
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) return;
    if (g_report_stats) {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      // Memory at exit: anonymous (the rank's own weights, cache, buffers) and file-backed (pages of
      // the memory-mapped checkpoint it read: page cache, shared and reclaimable), and the peak.
      std::ifstream st("/proc/self/status");
      std::string line, mem;
      while (std::getline(st, line))
        if (line.rfind("VmHWM", 0) == 0 || line.rfind("RssAnon", 0) == 0 || line.rfind("RssFile", 0) == 0)
          mem += " " + line.substr(0, line.find(':')) + " " + std::to_string(std::stol(line.substr(line.find(':') + 1)) / 1024) + " MiB";
      std::fprintf(stderr, "llmctl: rank %d: comm: %lld all-reduces %.3f s, %lld all-gathers %.3f s; memory:%s\n", rank,
                   (long long)g_stats.reduces, g_stats.reduce_s, (long long)g_stats.gathers, g_stats.gather_s, mem.c_str());
    }
    MPI_Finalize();
  });
}

void check_host_f32(const Tensor& t, const char* what) {
  LLM_CHECK(t.device == Device::CPU && t.dtype == DType::F32)
      << "MPI " << what << ": a host f32 tensor is needed, got " << dtype_name(t.dtype) << " " << t.shape_str()
      << (t.device == Device::CPU ? "" : " on a GPU (NCCL is the GPU communicator)");
}

class MpiComm final : public Comm {
 public:
  // The world of the ranks mpirun started, or (split) a part of it.
  explicit MpiComm(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &world_);
  }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string name() const override { return "mpi"; }

  // Every element is summed in rank order, ((x0 + x1) + x2) + ..., whatever the tensor's size and
  // the element's place in it: MPI_Allreduce picks its algorithm (and so each element's order of
  // additions) by message size and segment, which made a sequence's output depend on how many
  // other rows shared its step. A reduce-scatter by hand (rank r sums chunk r of every rank's x,
  // in rank order), then an all-gather: the bytes a ring all-reduce moves.
  void all_reduce_sum(Tensor& x) override {
    check_host_f32(x, "all_reduce_sum");
    Timed t(g_stats.reduces, g_stats.reduce_s);
    const int64_t n = x.numel(), chunk = (n + world_ - 1) / world_;
    LLM_CHECK(chunk * world_ <= std::numeric_limits<int>::max())
        << "all_reduce_sum of " << n << " floats: over MPI's int count";
    float* xp = x.ptr<float>();
    const bool even = n == chunk * world_;  // else x is padded to world_ chunks in send_
    const float* from = xp;
    if (!even) {
      send_.resize(size_t(chunk * world_));
      std::copy_n(xp, n, send_.data());
      std::fill(send_.begin() + n, send_.end(), 0.0f);
      from = send_.data();
    }
    parts_.resize(size_t(chunk * world_));  // [world, chunk]: every rank's chunk `rank_`
    mpi_check(MPI_Alltoall(from, int(chunk), MPI_FLOAT, parts_.data(), int(chunk), MPI_FLOAT, comm_), "MPI_Alltoall");
    mine_.assign(parts_.begin(), parts_.begin() + chunk);
    for (int r = 1; r < world_; ++r) {
      const float* p = parts_.data() + int64_t(r) * chunk;
      for (int64_t i = 0; i < chunk; ++i) mine_[size_t(i)] += p[i];
    }
    float* to = even ? xp : send_.data();
    mpi_check(MPI_Allgather(mine_.data(), int(chunk), MPI_FLOAT, to, int(chunk), MPI_FLOAT, comm_), "MPI_Allgather");
    if (!even) std::copy_n(send_.data(), n, xp);
  }

  void all_gather_cols(const Tensor& x, Tensor& out) override {
    check_host_f32(x, "all_gather_cols");
    check_host_f32(out, "all_gather_cols");
    LLM_CHECK(x.rank() == 2 && out.rank() == 2 && out.dim(0) == x.dim(0) && out.dim(1) == x.dim(1) * world_)
        << "all_gather_cols: x " << x.shape_str() << ", out " << out.shape_str() << ", world " << world_;
    const int64_t R = x.dim(0), C = x.dim(1);
    Timed t(g_stats.gathers, g_stats.gather_s);
    gathered_.resize(size_t(R * C * world_));
    mpi_check(MPI_Allgather(x.data, int(R * C), MPI_FLOAT, gathered_.data(), int(R * C), MPI_FLOAT, comm_),
              "MPI_Allgather");
    // gathered_ is [world, R, C]; out is [R, world * C].
    for (int64_t r = 0; r < R; ++r)
      for (int w = 0; w < world_; ++w)
        std::copy_n(gathered_.data() + (int64_t(w) * R + r) * C, C, out.ptr<float>() + r * C * world_ + w * C);
  }

  void broadcast(void* data, size_t bytes, int root) override {
    // MPI counts are int: send large payloads in pieces. A rank waiting for rank 0's next command
    // may wait for a long time (an idle server): it polls, then sleeps between polls, instead of
    // spinning on a core the other ranks need.
    auto* p = static_cast<char*>(data);
    for (size_t off = 0; off < bytes; off += kPiece) {
      MPI_Request req;
      mpi_check(MPI_Ibcast(p + off, int(std::min(kPiece, bytes - off)), MPI_BYTE, root, comm_, &req),
                "MPI_Ibcast");
      int done = 0;
      for (int polls = 0;; ++polls) {
        mpi_check(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
        if (done) break;
        if (polls > 2000) std::this_thread::sleep_for(std::chrono::microseconds(polls > 20000 ? 1000 : 50));
      }
    }
  }

  int64_t all_reduce_min(int64_t v) override {
    long long in = v, out = 0;
    mpi_check(MPI_Allreduce(&in, &out, 1, MPI_LONG_LONG, MPI_MIN, comm_), "MPI_Allreduce(min)");
    return out;
  }

  void send(const void* data, size_t bytes, int peer) override {
    const auto* p = static_cast<const char*>(data);
    for (size_t off = 0; off < bytes; off += kPiece)
      mpi_check(MPI_Send(p + off, int(std::min(kPiece, bytes - off)), MPI_BYTE, peer, 0, comm_), "MPI_Send");
  }
  void recv(void* data, size_t bytes, int peer) override {
    auto* p = static_cast<char*>(data);
    for (size_t off = 0; off < bytes; off += kPiece)
      mpi_check(MPI_Recv(p + off, int(std::min(kPiece, bytes - off)), MPI_BYTE, peer, 0, comm_,
                         MPI_STATUS_IGNORE),
                "MPI_Recv");
  }

  int64_t irecv(void* data, size_t bytes, int peer) override {
    return post(data, bytes, [&](char* p, int n, MPI_Request* r) {
      mpi_check(MPI_Irecv(p, n, MPI_BYTE, peer, 0, comm_, r), "MPI_Irecv");
    });
  }
  int64_t ibroadcast(void* data, size_t bytes, int root) override {
    return post(data, bytes, [&](char* p, int n, MPI_Request* r) {
      mpi_check(MPI_Ibcast(p, n, MPI_BYTE, root, comm_, r), "MPI_Ibcast");
    });
  }
  void wait(int64_t handle) override {
    if (handle < 0) return;
    auto it = pending_.find(handle);
    LLM_CHECK(it != pending_.end()) << "wait for receive " << handle << ", which is not pending";
    std::vector<MPI_Request> reqs = std::move(it->second);
    pending_.erase(it);
    if (!reqs.empty())
      mpi_check(MPI_Waitall(int(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE), "MPI_Waitall");
  }

  std::unique_ptr<Comm> split(int color, int key) override {
    MPI_Comm part;
    mpi_check(MPI_Comm_split(comm_, color, key, &part), "MPI_Comm_split");
    return std::make_unique<MpiComm>(part);  // freed by MPI_Finalize
  }

  void abort_all(const std::string& why) override {
    std::cerr << "llmctl: rank " << rank_ << ": error: " << why << std::endl;
    MPI_Abort(MPI_COMM_WORLD, 1);  // the whole run, not just this group
    std::abort();  // MPI_Abort does not return
  }

 private:
  static constexpr size_t kPiece = size_t(1) << 30;
  MPI_Comm comm_;
  int rank_ = 0, world_ = 1;
  // A non-blocking call in pieces of at most kPiece bytes (MPI counts are int), under one handle.
  template <class Start>
  int64_t post(void* data, size_t bytes, Start start) {
    auto* p = static_cast<char*>(data);
    std::vector<MPI_Request>& reqs = pending_[next_handle_];
    for (size_t off = 0; off < bytes; off += kPiece) {
      reqs.emplace_back();
      start(p + off, int(std::min(kPiece, bytes - off)), &reqs.back());
    }
    return next_handle_++;
  }

  std::vector<float> gathered_;
  std::vector<float> send_, parts_, mine_;  // all_reduce_sum's scratch
  std::map<int64_t, std::vector<MPI_Request>> pending_;  // irecv / ibroadcast handles not yet waited for
  int64_t next_handle_ = 0;
};

}  // namespace

bool mpi_available() { return true; }
std::unique_ptr<Comm> make_mpi_comm(bool report_stats) {
  g_report_stats = g_report_stats || report_stats;
  init_mpi_once();
  return std::make_unique<MpiComm>(MPI_COMM_WORLD);
}

#else

bool mpi_available() { return false; }
std::unique_ptr<Comm> make_mpi_comm(bool) {
  LLM_REQUIRE(false) << "this llmctl was built without MPI: tensor parallelism needs Open MPI "
                        "(apt-get install openmpi-bin libopenmpi-dev, then rebuild)";
  return nullptr;
}

#endif

}  // namespace llmctl
