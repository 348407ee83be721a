#include "engine/core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>

#include "engine/core/error.h"

namespace llmctl {

namespace {

// The live mappings, by start address: their lengths.
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<uintptr_t, size_t>& registry() {
  static std::map<uintptr_t, size_t> r;
  return r;
}

}  // namespace

void release_mapped_pages(const void* p, size_t bytes) {
  if (!p || bytes == 0) return;
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().upper_bound(a);
  if (it == registry().begin()) return;
  --it;
  const uintptr_t base = it->first, end = base + it->second;
  if (a >= end) return;  // not inside a mapping
  static const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  // Whole pages only, inside the mapping: a page shared with a neighbouring tensor is dropped too,
  // which costs that tensor a page fault at most.
  const uintptr_t from = a / page * page, to = std::min(end, a + bytes);
  if (to > from) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
}

std::shared_ptr<MappedFile> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  LLM_REQUIRE(fd >= 0) << "cannot open '" << path << "': " << std::strerror(errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    LLM_THROW() << "'" << path << "' is not a regular file";
  }
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = size_t(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      LLM_THROW() << "cannot map '" << path << "': " << std::strerror(err);
    }
    f->data_ = static_cast<const uint8_t*>(p);
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry()[reinterpret_cast<uintptr_t>(p)] = f->size_;
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (!data_) return;
  {
    std::lock_guard<std::mutex> lock(registry_mutex());
    registry().erase(reinterpret_cast<uintptr_t>(data_));
  }
  ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace llmctl
