// LoopbackComm: a pipeline of `world` stages run one after another in one process (quantize's
// calibration runs a model one layer-stage at a time). The caller sets which stage is running
// (set_rank); what a stage sends waits in a queue until the next stage receives it, in order, with
// the same sizes. Collectives have no peers here and are refused.
#pragma once
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "engine/parallel/comm.h"

namespace llmctl {

class LoopbackComm final : public Comm {
 public:
  explicit LoopbackComm(int world);
  void set_rank(int rank);
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  std::string name() const override { return "loopback"; }
  void all_reduce_sum(Tensor& x) override;
  void all_gather_cols(const Tensor& x, Tensor& out) override;
  void broadcast(void* data, size_t bytes, int root) override;
  int64_t all_reduce_min(int64_t v) override;
  // send queues the bytes (for any later stage); recv takes the oldest queued message, which must
  // be from `peer` and of `bytes` bytes.
  void send(const void* data, size_t bytes, int peer) override;
  void recv(void* data, size_t bytes, int peer) override;
  std::unique_ptr<Comm> split(int color, int key) override;
  void abort_all(const std::string& why) override;
  // Messages sent and not yet received.
  size_t pending() const { return queue_.size(); }
  // Replay (a stage run again on the same input: quantize's calibration probes a layer with trial
  // weights): while on, recv reads the queued messages in order without taking them, and send drops
  // what it is given; turning it off leaves the queue as it was.
  void set_replay(bool on) {
    replay_ = on;
    replay_at_ = 0;
  }

 private:
  struct Message {
    int from, to;
    std::vector<char> bytes;
  };
  int world_, rank_ = 0;
  std::deque<Message> queue_;
  bool replay_ = false;
  size_t replay_at_ = 0;  // the next message a replaying recv reads
};

}  // namespace llmctl
