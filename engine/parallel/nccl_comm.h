// NcclComm: Comm for CUDA tensors (tensor parallel on GPUs). The step's collectives (all-reduce,
// all-gather) are enqueued on the CUDA backend's stream, so CUDA graphs capture them with the rest
// of a decode step. Host traffic (commands, the KV budget, pipeline sends) goes through the
// bootstrap communicator (MPI) that also carried NCCL's unique id. Built when CMake finds nccl.h
// with CUDA (LLMCTL_HAVE_NCCL); libnccl.so.2 is opened at run time, on the first communicator.
// Without either, make_nccl_comm refuses by name.
//
// World 1 (no bootstrap): a real one-rank NCCL communicator, so that the NCCL path can be checked
// against the plain one on a single GPU (--nccl-single-rank, scripts/gpu-check.sh).
#pragma once
#include <memory>

#include "engine/parallel/comm.h"

namespace llmctl {

class Backend;

bool nccl_available();
// bootstrap: the ranks of this tensor-parallel group (host communicator), or nullptr for world 1.
// backend: the CUDA backend whose stream the collectives go on. Throws InputError without NCCL.
std::unique_ptr<Comm> make_nccl_comm(Comm* bootstrap, Backend& backend);

}  // namespace llmctl
