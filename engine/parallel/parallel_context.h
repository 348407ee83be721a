// What a model needs to know of parallelism:
//  - tensor parallel: its rank in its group, the group's size, and the communicator its layers
//    all-reduce / all-gather through;
//  - pipeline parallel: its stage, the number of stages, and the communicator of every rank
//    (numbered stage * tp_size + tp_rank) over which a stage sends its activations to the next.
// The defaults (one rank, one stage) never call a communicator, so a single rank costs nothing.
#pragma once
#include "engine/parallel/comm.h"

namespace llmctl {

struct ParallelContext {
  int rank = 0, world = 1;  // tensor parallel: this rank in its group, the group's size
  Comm* comm = nullptr;     // the tensor-parallel group; required when world > 1; not owned
  int stage = 0, stages = 1;  // pipeline parallel
  Comm* pp_comm = nullptr;    // every rank of the run; required when stages > 1; not owned

  bool first_stage() const { return stage == 0; }
  bool last_stage() const { return stage == stages - 1; }
  // This stage's layers [begin, end) of num_layers (stages must divide num_layers).
  int layer_begin(int num_layers) const { return num_layers / stages * stage; }
  int layer_end(int num_layers) const { return num_layers / stages * (stage + 1); }
  // The rank (in pp_comm) of the same tensor-parallel rank in another stage.
  int rank_in_stage(int s) const { return s * world + rank; }
};

}  // namespace llmctl
