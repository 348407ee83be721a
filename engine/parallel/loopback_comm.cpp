#include "engine/parallel/loopback_comm.h"

#include <cstring>

#include "engine/core/error.h"

namespace llmctl {

LoopbackComm::LoopbackComm(int world) : world_(world) {
  LLM_CHECK(world >= 1) << "loopback communicator of " << world << " ranks";
}

void LoopbackComm::set_rank(int rank) {
  LLM_CHECK(rank >= 0 && rank < world_) << "loopback rank " << rank << " of " << world_;
  rank_ = rank;
}

void LoopbackComm::all_reduce_sum(Tensor&) { LLM_CHECK(false) << "loopback communicator: no all_reduce_sum"; }
void LoopbackComm::all_gather_cols(const Tensor&, Tensor&) {
  LLM_CHECK(false) << "loopback communicator: no all_gather_cols";
}
void LoopbackComm::broadcast(void*, size_t, int) { LLM_CHECK(false) << "loopback communicator: no broadcast"; }
int64_t LoopbackComm::all_reduce_min(int64_t v) { return v; }  // every stage runs here, on one machine

void LoopbackComm::send(const void* data, size_t bytes, int peer) {
  LLM_CHECK(peer >= 0 && peer < world_ && peer != rank_) << "loopback send from " << rank_ << " to " << peer;
  if (replay_) return;
  const char* p = static_cast<const char*>(data);
  queue_.push_back({rank_, peer, std::vector<char>(p, p + bytes)});
}

void LoopbackComm::recv(void* data, size_t bytes, int peer) {
  const size_t at = replay_ ? replay_at_ : 0;
  LLM_CHECK(at < queue_.size()) << "loopback recv on rank " << rank_ << " from " << peer << ": nothing was sent";
  Message& m = queue_[at];
  LLM_CHECK(m.from == peer && m.to == rank_ && m.bytes.size() == bytes)
      << "loopback recv on rank " << rank_ << " of " << bytes << " bytes from " << peer << ": the next message is "
      << m.bytes.size() << " bytes from " << m.from << " to " << m.to;
  std::memcpy(data, m.bytes.data(), bytes);
  if (replay_)
    ++replay_at_;
  else
    queue_.pop_front();
}

std::unique_ptr<Comm> LoopbackComm::split(int, int) {
  LLM_CHECK(false) << "loopback communicator: no split";
  return nullptr;
}

void LoopbackComm::abort_all(const std::string& why) { LLM_CHECK(false) << why; }

}  // namespace llmctl
