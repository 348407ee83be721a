// release_mapped_pages (engine/core/mapped_file.h): the pages of a mapped checkpoint leave the
// process's resident memory and read back the same, and release_mapped_pages_again drops them once
// more after they were read back; memory that is not a live mapping (an owned
// buffer, a mapping already closed) is left alone.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "engine/core/mapped_file.h"
#include "format_test_util.h"

using namespace llmctl;

namespace {

// Resident pages of this process (/proc/self/statm, second field) in MiB.
double resident_mib() {
  std::ifstream f("/proc/self/statm");
  long size = 0, resident = 0;
  f >> size >> resident;
  return double(resident) * double(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

uint64_t checksum(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i += 64) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

}  // namespace

TEST_CASE("mapped file: released pages leave resident memory and read back the same") {
  test::ScratchDir dir("mapped_release");
  const size_t bytes = size_t(64) << 20;
  const std::string path = dir.file("blob.bin");
  {
    std::vector<uint8_t> data(bytes);
    for (size_t i = 0; i < bytes; ++i) data[i] = uint8_t((i * 2654435761u) >> 13);
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data.data()), std::streamsize(bytes));
  }
  std::shared_ptr<MappedFile> f = MappedFile::open(path);
  REQUIRE(f->size() == bytes);
  const uint64_t before = checksum(f->data(), bytes);  // touches every page
  const double touched = resident_mib();
  release_mapped_pages(f->data() + 100, bytes - 100);  // an unaligned start: whole pages from its page
  const double released = resident_mib();
  INFO("resident " << touched << " MiB after reading, " << released << " MiB after releasing");
  CHECK(touched - released > 56.0);  // 64 MiB mapped, released (noise from the test runner aside)
  CHECK(checksum(f->data(), bytes) == before);  // faulted back in, the same bytes
  // Read back in (as a neighbour's read can map a released page again): dropped again on request.
  const double reread = resident_mib();
  release_mapped_pages_again();
  const double again = resident_mib();
  INFO("resident " << reread << " MiB after reading back, " << again << " MiB after releasing again");
  CHECK(reread - again > 56.0);
  CHECK(checksum(f->data(), bytes) == before);

  // An owned buffer is not a mapping: left as it is (MADV_DONTNEED would zero it).
  std::vector<uint8_t> owned(size_t(1) << 20, 7);
  release_mapped_pages(owned.data(), owned.size());
  CHECK(owned[0] == 7);
  CHECK(owned[owned.size() - 1] == 7);

  // Ranges past the mapping's end are clipped; a closed mapping is forgotten.
  release_mapped_pages(f->data() + bytes - 10, 1000);
  CHECK(f->data()[bytes - 1] == uint8_t(((bytes - 1) * 2654435761u) >> 13));
  const uint8_t* gone = f->data();
  f.reset();
  release_mapped_pages(gone, 4096);  // no longer registered: nothing happens (no crash)
  release_mapped_pages(nullptr, 100);
}
