// A read-only memory mapping of a whole file (RAII). Checkpoint tensors are views into it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace llmctl {

class MappedFile {
 public:
  // Throws InputError naming the path when the file cannot be opened or mapped.
  static std::shared_ptr<MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

// Drops the pages of [p, p + bytes) that lie inside a live MappedFile from this process's
// resident memory (madvise MADV_DONTNEED; the pages stay in the page cache, shared and
// reclaimable). The mappings are read-only, so nothing is lost: a later read faults the pages back
// in. Memory that is not a file mapping (owned buffers) is left alone. The loader calls it once a
// weight has been copied out of the checkpoint (a tensor-parallel slice, a converted dtype, a
// dequantized or repacked quantized weight), so a rank's resident memory is what it holds, about
// 1/N of the weights, not every page it read.
void release_mapped_pages(const void* p, size_t bytes);

// Drops again every range release_mapped_pages has dropped in the live mappings. Reading one
// tensor can map a released neighbour's pages back in (seen on the default GGUF: 60 MB back, in
// runs of about 2 MiB, most likely large page-cache folios mapped whole), so the runtime calls
// this once the model is built.
void release_mapped_pages_again();

}  // namespace llmctl
