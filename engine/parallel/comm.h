// Comm: the data plane between the ranks of a tensor-parallel group (DESIGN.md, Parallelism).
// Collectives are called by every rank of the group in the same order; point-to-point calls pair
// a send on one rank with a recv on its peer. Implementations: SingleRankComm (world 1: every
// call is a copy or nothing), MpiComm (CPU tensors, Open MPI; engine/parallel/mpi_comm.h), NcclComm
// (CUDA tensors of a tensor-parallel group; engine/parallel/nccl_comm.h). Pipeline stages send and
// receive host bytes: CUDA ranks stage device tensors through host memory (engine/model/llama/llama.cpp).
//
// Errors: a peer that dies makes the launcher (mpirun) take every rank down, so no call waits
// forever on a dead rank; a misuse (wrong dtype, device or size) throws Error with context.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/core/tensor.h"

namespace llmctl {

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual std::string name() const = 0;  // "single-rank", "mpi"

  // In place: x = the elementwise sum of every rank's x (f32; same shape on every rank).
  virtual void all_reduce_sum(Tensor& x) = 0;
  // out [R, world * C] = every rank's x [R, C] side by side, rank 0's columns first (f32): a
  // vocab-parallel lm_head's logits shards become the full rows.
  virtual void all_gather_cols(const Tensor& x, Tensor& out) = 0;
  // bytes from `root` to every rank (host memory).
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // The smallest v over the ranks (e.g. the KV blocks every rank can hold).
  virtual int64_t all_reduce_min(int64_t v) = 0;
  // Host bytes to / from one peer (pipeline stages).
  virtual void send(const void* data, size_t bytes, int peer) = 0;
  virtual void recv(void* data, size_t bytes, int peer) = 0;
  // Non-blocking forms, for rank 0 with pipeline steps in flight (it sends the next step's command
  // and receives a step's logits while the other stages still work): each returns at once with a
  // handle; data must stay valid until wait(handle) completes it (handle -1: nothing to wait for).
  // Receives from one peer, and broadcasts, complete in the order they were posted.
  // ibroadcast: as broadcast (the other ranks call broadcast). Default: the blocking broadcast, -1.
  virtual int64_t ibroadcast(void* data, size_t bytes, int root);
  // irecv: as recv. Default: refuses.
  virtual int64_t irecv(void* data, size_t bytes, int peer);
  virtual void wait(int64_t handle);
  // The ranks with the same color form a new communicator, numbered by key (MPI_Comm_split): a
  // run of TP x PP ranks splits into one tensor-parallel group per pipeline stage.
  virtual std::unique_ptr<Comm> split(int color, int key) = 0;
  // Ends every rank of the run: writes "llmctl: rank <r>: error: <why>" to stderr and aborts the
  // job (MPI_Abort; the launcher reports it and exits non-zero). Used when ranks can no longer
  // agree on what runs next. World 1: throws Error(why).
  virtual void abort_all(const std::string& why) = 0;
};

// World 1: all_reduce_sum and broadcast do nothing, all_gather_cols copies, send/recv refuse
// (there is no peer).
std::unique_ptr<Comm> make_single_rank_comm();

}  // namespace llmctl
