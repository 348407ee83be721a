// Replays fuzz inputs without libFuzzer: runs LLVMFuzzerTestOneInput once on every file named on
// the command line or found (recursively, in sorted order) under a directory named there. A path
// that does not exist is skipped (regressions/<harness>/ exists only once something was found); a run
// that finds no input at all exits 77 (skipped, not passed).
// An input that crashes, trips a sanitizer or throws an unexpected exception fails the run, as in
// libFuzzer; the input being run is printed first so it can be found.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    fs::path p(argv[i]);
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<fs::path> found;
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file() && e.path().filename().string()[0] != '.') found.push_back(e.path());
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "replay: %s does not exist, skipped\n", argv[i]);
    }
  }
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      std::fprintf(stderr, "replay: cannot read %s\n", f.c_str());
      return 1;
    }
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", f.c_str(), bytes.size());
    // A copy of exactly the input's size on the heap, so ASan sees reads past its end.
    std::vector<uint8_t> input(bytes.begin(), bytes.end());
    auto t0 = std::chrono::steady_clock::now();
    LLVMFuzzerTestOneInput(input.empty() ? nullptr : input.data(), input.size());
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s > 1.0) std::fprintf(stderr, "replay: %s took %.2f s\n", f.c_str(), s);
  }
  std::printf("replay: %zu inputs ran\n", files.size());
  if (files.empty()) {  // a missing corpus ran nothing: skipped (ctest SKIP_RETURN_CODE), not passed
    std::printf("replay: SKIPPED, no input found under the paths given\n");
    return 77;
  }
  return 0;
}
