// Multi-rank execution (tensor and pipeline parallel): one process per rank, each with its share of
// the model (a LocalExecutor over a Model built with a ParallelContext). Rank 0 runs the engine, the scheduler,
// the server and sampling; its MultiRankExecutor sends every call that touches the model or
// the KV cache to the other ranks, which run serve_rank_steps until rank 0 shuts them down:
//
//   rank 0: Executor call -> broadcast Command (+ payload) -> its own LocalExecutor call
//   rank r: serve_rank_steps: receive Command -> the same LocalExecutor call -> ... -> Shutdown
//
// Collectives inside the step (all-reduce, all-gather) and the stages' sends and receives pair up
// because every rank runs the same step. Rank 0 ends with the full logits rows and samples. The KV cache budget is the
// minimum over the ranks. An error on any rank during a step aborts every rank (the communicator's
// abort: mpirun ends the job with the message), never a hang.
#pragma once
#include <memory>

#include "engine/executor/local_executor.h"
#include "engine/parallel/comm.h"

namespace llmctl {

// Rank 0's executor. comm must outlive it; model is rank 0's share.
std::unique_ptr<Executor> make_multi_rank_executor(Model& model, KvCacheOptions kv, Comm& comm,
                                                   PipelineOptions pp = {});

// Ranks > 0: runs rank 0's commands on `local` until it shuts down (or aborts the job).
void serve_rank_steps(LocalExecutor& local, Comm& comm);

}  // namespace llmctl
