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
#include <utility>
#include <vector>

#include "engine/core/error.h"

namespace llmctl {

namespace {

// The live mappings, by start address: their lengths, and the page ranges released so far.
struct Mapping {
  size_t length = 0;
  std::vector<std::pair<uintptr_t, uintptr_t>> released;  // [from, to), page-aligned from
};
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}
std::map<uintptr_t, Mapping>& registry() {
  static std::map<uintptr_t, Mapping> r;
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
  const uintptr_t base = it->first, end = base + it->second.length;
  if (a >= end) return;  // not inside a mapping
  static const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  // Whole pages only, inside the mapping: a page shared with a neighbouring tensor is dropped too,
  // which costs that tensor a page fault at most.
  const uintptr_t from = a / page * page, to = std::min(end, a + bytes);
  if (to <= from) return;
  ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
  auto& r = it->second.released;
  if (!r.empty() && r.back().second >= from && r.back().first <= from)  // loaders go through a file in order
    r.back().second = std::max(r.back().second, to);
  else
    r.emplace_back(from, to);
}

void release_mapped_pages_again() {
  std::lock_guard<std::mutex> lock(registry_mutex());
  for (const auto& [base, m] : registry())
    for (const auto& [from, to] : m.released) ::madvise(reinterpret_cast<void*>(from), to - from, MADV_DONTNEED);
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
    registry()[reinterpret_cast<uintptr_t>(p)] = Mapping{f->size_, {}};
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
