// Helpers for the checkpoint-format tests: a scratch directory, file I/O, and a tiny GGUF writer
// that can also write deliberately broken files.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace llmctl::test {

using Bytes = std::vector<uint8_t>;

// A fresh directory under the system temp dir, removed when the object goes away.
struct ScratchDir {
  std::filesystem::path path;
  explicit ScratchDir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() / ("llmctl_" + tag + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline void write_bytes(const std::string& path, const Bytes& b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}

inline void write_text(const std::string& path, const std::string& s) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << s;
}

inline Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

template <class T>
void put(Bytes& b, T v) {
  size_t at = b.size();
  b.resize(at + sizeof(T));
  std::memcpy(b.data() + at, &v, sizeof(T));
}

inline void put_str(Bytes& b, const std::string& s) {
  put<uint64_t>(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

// Builds GGUF files. Tensor data is laid out in order at aligned offsets unless an explicit offset
// is given (to build overlapping or out-of-range tensors). The last tensor ends the file.
struct GgufBuilder {
  uint32_t magic = 0x46554747u;
  uint32_t version = 3;
  uint64_t alignment = 32;
  uint64_t n_kv = 0, n_tensors = 0;
  int64_t kv_count_override = -1, tensor_count_override = -1;
  Bytes kv, info, data;

  void kv_u32(const std::string& k, uint32_t v) { key(k, 4), put(kv, v); }
  void kv_i32(const std::string& k, int32_t v) { key(k, 5), put(kv, v); }
  void kv_f32(const std::string& k, float v) { key(k, 6), put(kv, v); }
  void kv_bool(const std::string& k, bool v) { key(k, 7), put<uint8_t>(kv, v); }
  void kv_str(const std::string& k, const std::string& v) { key(k, 8), put_str(kv, v); }
  void kv_str_array(const std::string& k, const std::vector<std::string>& v) {
    key(k, 9), put<uint32_t>(kv, 8), put<uint64_t>(kv, v.size());
    for (auto& s : v) put_str(kv, s);
  }
  void kv_i32_array(const std::string& k, const std::vector<int32_t>& v) {
    key(k, 9), put<uint32_t>(kv, 5), put<uint64_t>(kv, v.size());
    for (int32_t x : v) put(kv, x);
  }
  // Raw value bytes after the key and type (for malformed values).
  void kv_raw(const std::string& k, uint32_t type, const Bytes& raw) {
    key(k, type), kv.insert(kv.end(), raw.begin(), raw.end());
  }

  // Appends a tensor; bytes are its data (offset chosen) unless offset >= 0 is forced.
  void tensor(const std::string& name, uint32_t type, const std::vector<uint64_t>& ne, const Bytes& bytes,
              int64_t offset = -1) {
    uint64_t off;
    if (offset >= 0) {
      off = uint64_t(offset);
    } else {
      while (data.size() % alignment) data.push_back(0);
      off = data.size();
      data.insert(data.end(), bytes.begin(), bytes.end());
    }
    put_str(info, name);
    put<uint32_t>(info, uint32_t(ne.size()));
    for (uint64_t d : ne) put(info, d);
    put<uint32_t>(info, type);
    put<uint64_t>(info, off);
    ++n_tensors;
  }

  Bytes build() const {
    Bytes b;
    put(b, magic);
    put(b, version);
    put<uint64_t>(b, tensor_count_override >= 0 ? uint64_t(tensor_count_override) : n_tensors);
    put<uint64_t>(b, kv_count_override >= 0 ? uint64_t(kv_count_override) : n_kv);
    b.insert(b.end(), kv.begin(), kv.end());
    b.insert(b.end(), info.begin(), info.end());
    while (b.size() % alignment) b.push_back(0);
    b.insert(b.end(), data.begin(), data.end());
    return b;
  }

 private:
  void key(const std::string& k, uint32_t type) {
    put_str(kv, k);
    put<uint32_t>(kv, type);
    ++n_kv;
  }
};

inline Bytes f32_bytes(const std::vector<float>& v) {
  Bytes b(v.size() * 4);
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());  // memcpy from null is UB, even of 0 bytes
  return b;
}

}  // namespace llmctl::test
