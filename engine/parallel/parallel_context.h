// What a model needs to know of tensor parallelism: its rank in the group, the group's size, and
// the communicator its layers all-reduce / all-gather through. World 1 (the default) never calls
// the communicator, so a single rank costs nothing.
#pragma once
#include "engine/parallel/comm.h"

namespace llmctl {

struct ParallelContext {
  int rank = 0, world = 1;
  Comm* comm = nullptr;  // required when world > 1; not owned
};

}  // namespace llmctl
