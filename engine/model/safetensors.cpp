#include "engine/model/safetensors.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "engine/core/error.h"
#include "engine/core/json_bounded.h"

namespace llmctl {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The reference implementation refuses headers above 100 MB; so do we.
constexpr uint64_t kMaxHeader = 100u << 20;

bool parse_st_dtype(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> table[] = {
      {"F32", DType::F32}, {"F16", DType::F16}, {"BF16", DType::BF16}, {"I32", DType::I32},
      {"I64", DType::I64}, {"I8", DType::I8},   {"U8", DType::U8},
  };
  for (auto& [name, t] : table)
    if (s == name) return *out = t, true;
  return false;
}

// Reads a non-negative JSON integer, or explains why not.
uint64_t json_uint(const json& v, const std::string& path, const std::string& what) {
  LLM_REQUIRE(v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0))
      << path << ": " << what << " must be a non-negative integer, got " << v.dump();
  return v.get<uint64_t>();
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::I8: return "I8";
    case DType::U8: return "U8";
  }
  return "?";
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  auto st = std::shared_ptr<SafetensorsFile>(new SafetensorsFile());
  st->file_ = MappedFile::open(path);
  const uint8_t* base = st->file_->data();
  const uint64_t size = st->file_->size();

  LLM_REQUIRE(size >= 8) << path << ": not a safetensors file (" << size
                         << " bytes, shorter than the 8-byte header length)";
  uint64_t n;
  std::memcpy(&n, base, 8);
  LLM_REQUIRE(n <= size - 8) << path << ": header length " << n << " runs past the end of the file (" << size
                             << " bytes)";
  LLM_REQUIRE(n <= kMaxHeader) << path << ": header length " << n << " is larger than the 100 MB limit";
  LLM_REQUIRE(n >= 2 && base[8] == '{') << path << ": header is not a JSON object";

  // Bounded: depth-limited, and rejects invalid UTF-8.
  json header = parse_json_bounded(std::string_view(reinterpret_cast<const char*>(base + 8), size_t(n)),
                                   kModelJsonLimits, "the safetensors header of '" + path + "'");
  LLM_REQUIRE(header.is_object()) << path << ": header is not a JSON object";

  const uint8_t* data = base + 8 + n;
  const uint64_t data_size = size - 8 - n;
  std::shared_ptr<void> owner(st->file_, nullptr);  // aliasing: keeps the mapping alive
  struct Range {
    uint64_t begin, end;
    const std::string* name;
  };
  std::vector<Range> ranges;

  for (auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      LLM_REQUIRE(entry.is_object()) << path << ": __metadata__ must be an object of strings";
      for (auto& [k, v] : entry.items()) {
        LLM_REQUIRE(v.is_string()) << path << ": __metadata__ value for '" << k << "' is not a string";
        st->metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    LLM_REQUIRE(entry.is_object()) << path << ": entry for tensor '" << name << "' is not an object";
    const std::string where = "tensor '" + name + "'";
    LLM_REQUIRE(entry.contains("dtype") && entry["dtype"].is_string()) << path << ": " << where << " has no dtype";
    LLM_REQUIRE(entry.contains("shape") && entry["shape"].is_array()) << path << ": " << where << " has no shape";
    LLM_REQUIRE(entry.contains("data_offsets") && entry["data_offsets"].is_array() && entry["data_offsets"].size() == 2)
        << path << ": " << where << " needs data_offsets [begin, end]";
    std::string dts = entry["dtype"].get<std::string>();
    DType dt;
    LLM_REQUIRE(parse_st_dtype(dts, &dt)) << path << ": " << where << " has dtype '" << dts
                                          << "', which llmctl does not support (F32, F16, BF16, I32, I64, I8, U8)";
    std::vector<int64_t> shape;
    uint64_t numel = 1;
    bool overflow = false;
    for (const json& d : entry["shape"]) {
      uint64_t v = json_uint(d, path, where + " shape dimension");
      overflow =
          overflow || v > uint64_t(std::numeric_limits<int64_t>::max()) || __builtin_mul_overflow(numel, v, &numel);
      shape.push_back(int64_t(std::min<uint64_t>(v, uint64_t(std::numeric_limits<int64_t>::max()))));
    }
    uint64_t nbytes = 0;
    overflow = overflow || __builtin_mul_overflow(numel, uint64_t(dtype_size(dt)), &nbytes);
    LLM_REQUIRE(!overflow) << path << ": " << where << " shape overflows (its element count is too large)";
    uint64_t begin = json_uint(entry["data_offsets"][0], path, where + " data_offsets");
    uint64_t end = json_uint(entry["data_offsets"][1], path, where + " data_offsets");
    LLM_REQUIRE(begin <= end && end <= data_size) << path << ": " << where << " data_offsets [" << begin << ", " << end
                                                  << "] lie outside the data section (" << data_size << " bytes)";
    LLM_REQUIRE(end - begin == nbytes) << path << ": " << where << " has shape and dtype " << dts << " needing "
                                       << nbytes << " bytes, but data_offsets span " << end - begin;
    const uint8_t* p = data + begin;
    Tensor t;
    if (reinterpret_cast<uintptr_t>(p) % dtype_size(dt) == 0) {
      t = Tensor::view(const_cast<uint8_t*>(p), dt, std::move(shape), owner);
    } else {  // misaligned for its element type: copy rather than hand out a misaligned pointer
      t = Tensor::empty_host(dt, std::move(shape));
      std::memcpy(t.data, p, nbytes);
    }
    auto it = st->tensors_.emplace(name, std::move(t)).first;
    ranges.push_back({begin, end, &it->first});
  }

  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  const Range* prev = nullptr;
  for (const Range& r : ranges) {
    if (r.begin == r.end) continue;
    LLM_REQUIRE(!prev || prev->end <= r.begin)
        << path << ": tensors '" << *prev->name << "' and '" << *r.name << "' overlap in the data section";
    if (!prev || r.end > prev->end) prev = &r;
  }
  return st;
}

const Tensor& SafetensorsFile::get(const std::string& name) const {
  auto it = tensors_.find(name);
  LLM_REQUIRE(it != tensors_.end()) << path() << ": no tensor named '" << name << "'";
  return it->second;
}

void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    LLM_REQUIRE(!name.empty() && name != "__metadata__") << "write_safetensors: invalid tensor name '" << name << "'";
    LLM_REQUIRE(!header.contains(name)) << "write_safetensors: duplicate tensor name '" << name << "'";
    LLM_REQUIRE(t.device == Device::CPU) << "write_safetensors: tensor '" << name << "' is not on the host";
    LLM_REQUIRE(t.data || t.numel() == 0) << "write_safetensors: tensor '" << name << "' has no data";
    uint64_t nbytes = t.nbytes();
    header[name] = {
        {"dtype", safetensors_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned

  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    LLM_REQUIRE(out) << "cannot write '" << tmp << "'";
    uint64_t n = text.size();
    out.write(reinterpret_cast<const char*>(&n), 8);
    out.write(text.data(), std::streamsize(text.size()));
    for (const auto& [name, t] : tensors) out.write(static_cast<const char*>(t.data), std::streamsize(t.nbytes()));
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      LLM_THROW() << "error writing '" << tmp << "' (disk full?)";
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  LLM_REQUIRE(!ec) << "cannot rename '" << tmp << "' to '" << path << "': " << ec.message();
}

namespace {

void add_all(std::map<std::string, Tensor>& out, const SafetensorsFile& f) {
  for (const auto& [name, t] : f.tensors())
    LLM_REQUIRE(out.emplace(name, t).second) << f.path() << ": tensor '" << name << "' also appears in another shard";
}

}  // namespace

std::map<std::string, Tensor> load_safetensors_dir(const std::string& dir) {
  std::map<std::string, Tensor> out;
  fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::exists(index)) {
    json j = read_json_file_bounded(index.string(), kModelJsonLimits);
    LLM_REQUIRE(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object())
        << index.string() << ": no weight_map object";
    std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;
    for (auto& [name, file] : j["weight_map"].items()) {
      LLM_REQUIRE(file.is_string()) << index.string() << ": weight_map entry for '" << name << "' is not a file name";
      std::string fname = file.get<std::string>();
      // Shards live beside the index: no directories, no way out of the checkpoint folder.
      LLM_REQUIRE(!fname.empty() && fname.find('/') == std::string::npos && fname != "." && fname != "..")
          << index.string() << ": shard name '" << fname << "' is not a plain file name";
      auto& shard = shards[fname];
      if (!shard) shard = SafetensorsFile::open((fs::path(dir) / fname).string());
      LLM_REQUIRE(shard->has(name)) << index.string() << ": tensor '" << name << "' is not in shard '" << fname << "'";
    }
    LLM_REQUIRE(!shards.empty()) << index.string() << ": weight_map is empty";
    for (auto& [fname, shard] : shards) add_all(out, *shard);
    return out;
  }
  fs::path single = fs::path(dir) / "model.safetensors";
  if (!fs::exists(single)) {
    std::vector<fs::path> found;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.path().extension() == ".safetensors") found.push_back(e.path());
    LLM_REQUIRE(!found.empty()) << "'" << dir << "' holds no model.safetensors, no model.safetensors.index.json "
                                << "and no other *.safetensors file";
    LLM_REQUIRE(found.size() == 1) << "'" << dir << "' holds several *.safetensors files but no "
                                   << "model.safetensors.index.json saying how they fit together";
    single = found[0];
  }
  add_all(out, *SafetensorsFile::open(single.string()));
  return out;
}


ShardedWrite write_sharded_safetensors(const std::string& dir, const std::vector<std::pair<std::string, Tensor>>& tensors,
                                       uint64_t max_shard_bytes) {
  namespace fs = std::filesystem;
  const fs::path out(dir);
  std::vector<std::vector<size_t>> shards(1);
  uint64_t cur = 0, total = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const uint64_t n = tensors[i].second.nbytes();
    if (cur > 0 && cur + n > max_shard_bytes) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().push_back(i);
    cur += n;
    total += n;
  }
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    char name[64];
    if (shards.size() == 1)
      std::snprintf(name, sizeof name, "model.safetensors");
    else
      std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
    std::vector<std::pair<std::string, Tensor>> part;
    for (size_t i : shards[s]) {
      part.push_back(tensors[i]);
      weight_map[tensors[i].first] = name;
    }
    write_safetensors((out / name).string(), part, meta);
  }
  if (shards.size() > 1) {
    std::ofstream f(out / "model.safetensors.index.json");
    f << nlohmann::json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) << "\n";
    LLM_REQUIRE(f.good()) << "error writing " << (out / "model.safetensors.index.json").string();
  } else {
    fs::remove(out / "model.safetensors.index.json");
  }
  return {shards.size(), total};
}

}  // namespace llmctl
