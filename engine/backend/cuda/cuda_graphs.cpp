// CUDA graphs for decode steps: the first run of a key is eager (it allocates and sizes every
// workspace the body needs), the second enqueue of the same body is captured and instantiated, and
// later runs replay the graph: one launch instead of a few hundred.
#include "engine/backend/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"

namespace llmctl {

void CudaBackend::run_graph(uint64_t key, const std::function<void()>& body) {
  if (!options_.graphs) {
    body();
    return;
  }
  if (auto it = graphs_.find(key); it != graphs_.end()) {
    CUDA_CHECK(cudaGraphLaunch(it->second, stream_));
    return;
  }
  body();  // eager: this step's results, and every buffer at its final address
  cudaGraph_t graph = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
  try {
    body();  // recorded, not run
  } catch (...) {
    cudaStreamEndCapture(stream_, &graph);
    if (graph) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_CHECK(err);
  graphs_[key] = exec;
}

void CudaBackend::step_timer_begin() {
  if (!step_begin_) {
    CUDA_CHECK(cudaEventCreate(&step_begin_));
    CUDA_CHECK(cudaEventCreate(&step_end_));
  }
  CUDA_CHECK(cudaEventRecord(step_begin_, stream_));
}

double CudaBackend::step_timer_end() {
  if (!step_begin_) return 0;
  CUDA_CHECK(cudaEventRecord(step_end_, stream_));
  CUDA_CHECK(cudaEventSynchronize(step_end_));
  float ms = 0;
  CUDA_CHECK(cudaEventElapsedTime(&ms, step_begin_, step_end_));
  return ms * 1e-3;
}

void CudaBackend::clear_graphs() {
  if (graphs_.empty()) return;
  CUDA_CHECK(cudaStreamSynchronize(stream_));
  for (auto& [key, exec] : graphs_) CUDA_CHECK(cudaGraphExecDestroy(exec));
  graphs_.clear();
}

}  // namespace llmctl
