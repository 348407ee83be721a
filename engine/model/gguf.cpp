// GGUF reader. Layout (little endian): magic "GGUF", u32 version, u64 tensor_count, u64 kv_count,
// kv_count x (string key, u32 type, value), tensor_count x (string name, u32 n_dims, u64 ne[n_dims],
// u32 type, u64 offset), padding to general.alignment, then the data section.
#include "engine/model/gguf.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "engine/core/error.h"
#include "engine/core/thread_pool.h"
#include "engine/core/utf8.h"
#include "quant/format/gguf_blocks.h"

namespace llmctl {

const char* ggml_type_name(GgmlType t) { return quant::ggml_type_label(uint32_t(t)); }

// ---- GgufValue accessors ----------------------------------------------------------------------

const std::string& GgufValue::as_string() const {
  LLM_REQUIRE(is_string()) << "GGUF metadata value is not a string";
  return std::get<std::string>(v);
}

int64_t GgufValue::as_int() const {
  if (auto* u = std::get_if<uint64_t>(&v)) {
    LLM_REQUIRE(*u <= uint64_t(std::numeric_limits<int64_t>::max())) << "GGUF integer " << *u << " is too large";
    return int64_t(*u);
  }
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  if (auto* b = std::get_if<bool>(&v)) return *b ? 1 : 0;
  LLM_THROW() << "GGUF metadata value is not an integer";
}

double GgufValue::as_float() const {
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* u = std::get_if<uint64_t>(&v)) return double(*u);
  if (auto* i = std::get_if<int64_t>(&v)) return double(*i);
  LLM_THROW() << "GGUF metadata value is not a number";
}

bool GgufValue::as_bool() const {
  if (auto* b = std::get_if<bool>(&v)) return *b;
  LLM_THROW() << "GGUF metadata value is not a bool";
}

const GgufValue::Array& GgufValue::as_array() const {
  LLM_REQUIRE(is_array()) << "GGUF metadata value is not an array";
  return *std::get<std::shared_ptr<Array>>(v);
}

// ---- parsing ----------------------------------------------------------------------------------

namespace {

enum ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
constexpr int kMaxArrayDepth = 4;  // arrays of arrays are legal; deeper nesting is not plausible
constexpr uint32_t kMaxDims = 4;   // GGML_MAX_DIMS
// Metadata values held in memory take ~50 bytes each whatever their encoded size (a u8 is one
// byte in the file): the file size alone does not bound the memory. Real files hold a few hundred
// thousand (vocabulary, token types, merges); these caps are ten times the largest.
constexpr uint64_t kMaxArrayLength = uint64_t(1) << 22;
constexpr uint64_t kMaxMetadataValues = uint64_t(1) << 23;
constexpr uint64_t kMaxTensors = uint64_t(1) << 16;  // 405B-parameter models have ~1,100
constexpr uint64_t kMaxTensorName = 256;             // llama.cpp allows 63 bytes

// Smallest encoded size of one value of a type: used to reject counts the file cannot hold
// before allocating anything for them.
uint64_t min_encoded_size(uint32_t type) {
  switch (type) {
    case kU8:
    case kI8:
    case kBool: return 1;
    case kU16:
    case kI16: return 2;
    case kU32:
    case kI32:
    case kF32: return 4;
    case kU64:
    case kI64:
    case kF64: return 8;
    case kString: return 8;
    case kArray: return 12;
  }
  return 1;
}

// Bounds-checked little-endian reader over the mapping; every error names the file and offset.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& path) : p_(data), size_(size), path_(path) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  void need(uint64_t n, const char* what) {
    LLM_REQUIRE(n <= remaining()) << path_ << ": truncated GGUF file: " << what << " at offset " << pos_ << " needs "
                                  << n << " bytes, " << remaining() << " left";
  }
  template <class T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));  // GGUF is little endian, as are the hosts we build for
    pos_ += sizeof(T);
    return v;
  }
  std::string read_string(const char* what) {
    size_t at = pos_;
    uint64_t len = read<uint64_t>(what);
    LLM_REQUIRE(len <= remaining()) << path_ << ": " << what << " at offset " << at << " has length " << len
                                    << ", past the end of the file (" << remaining() << " bytes left)";
    std::string s(reinterpret_cast<const char*>(p_ + pos_), size_t(len));
    pos_ += size_t(len);
    LLM_REQUIRE(utf8_valid(s)) << path_ << ": " << what << " at offset " << at << " is not valid UTF-8";
    return s;
  }
  // A count of items each at least min_size bytes long must fit in what is left of the file.
  void check_count(uint64_t count, uint64_t min_size, const char* what) {
    LLM_REQUIRE(min_size == 0 || count <= remaining() / min_size)
        << path_ << ": " << what << " count " << count << " at offset " << pos_ << " cannot fit in the " << remaining()
        << " bytes left in the file";
  }
  [[noreturn]] void fail(const std::string& msg) { LLM_THROW() << path_ << ": " << msg; }
  // Counts n more metadata values against the per-file cap.
  void take_values(uint64_t n) {
    if (n > values_left_)
      fail("metadata holds more than " + std::to_string(kMaxMetadataValues) + " values in all (array at offset " +
           std::to_string(pos_) + ")");
    values_left_ -= n;
  }

 private:
  const uint8_t* p_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
  uint64_t values_left_ = kMaxMetadataValues;
};

GgufValue read_value(Cursor& c, uint32_t type, int depth) {
  GgufValue out;
  switch (type) {
    case kU8: out.v = uint64_t(c.read<uint8_t>("u8 value")); break;
    case kI8: out.v = int64_t(c.read<int8_t>("i8 value")); break;
    case kU16: out.v = uint64_t(c.read<uint16_t>("u16 value")); break;
    case kI16: out.v = int64_t(c.read<int16_t>("i16 value")); break;
    case kU32: out.v = uint64_t(c.read<uint32_t>("u32 value")); break;
    case kI32: out.v = int64_t(c.read<int32_t>("i32 value")); break;
    case kU64: out.v = c.read<uint64_t>("u64 value"); break;
    case kI64: out.v = c.read<int64_t>("i64 value"); break;
    case kF32: out.v = double(c.read<float>("f32 value")); break;
    case kF64: out.v = c.read<double>("f64 value"); break;
    case kBool: {
      uint8_t b = c.read<uint8_t>("bool value");
      if (b > 1)
        c.fail("bool value " + std::to_string(b) + " at offset " + std::to_string(c.pos() - 1) + " is not 0 or 1");
      out.v = b == 1;
      break;
    }
    case kString: out.v = c.read_string("metadata string"); break;
    case kArray: {
      if (depth >= kMaxArrayDepth) c.fail("metadata arrays nested deeper than " + std::to_string(kMaxArrayDepth));
      uint32_t elem = c.read<uint32_t>("array element type");
      if (elem > kF64) c.fail("unknown array element type " + std::to_string(elem));
      uint64_t n = c.read<uint64_t>("array length");
      c.check_count(n, min_encoded_size(elem), "array");
      if (n > kMaxArrayLength)
        c.fail("metadata array of " + std::to_string(n) + " elements at offset " + std::to_string(c.pos()) +
               " is longer than the limit of " + std::to_string(kMaxArrayLength));
      c.take_values(n);
      auto arr = std::make_shared<GgufValue::Array>();
      arr->reserve(size_t(n));
      for (uint64_t i = 0; i < n; ++i) arr->push_back(read_value(c, elem, depth + 1));
      out.v = std::move(arr);
      break;
    }
    default:
      c.fail("unknown metadata value type " + std::to_string(type) + " at offset " + std::to_string(c.pos() - 4));
  }
  return out;
}

// Bytes of a tensor of type t with dims ne, overflow-checked; throws naming the tensor.
size_t tensor_nbytes(Cursor& c, const std::string& name, uint32_t type, const std::vector<int64_t>& ne) {
  quant::GgmlBlockLayout l;
  if (!quant::ggml_block_layout(type, &l))
    c.fail("tensor '" + name + "' has unknown GGML type " + std::to_string(type));
  if (!ne.empty() && ne[0] % l.block_size != 0)
    c.fail("tensor '" + name + "' row of " + std::to_string(ne[0]) + " elements is not a multiple of the " +
           quant::ggml_type_label(type) + " block size " + std::to_string(l.block_size));
  uint64_t n = ne.empty() ? 1 : uint64_t(ne[0]) / uint64_t(l.block_size);
  uint64_t bytes = 0;
  bool overflow = __builtin_mul_overflow(n, uint64_t(l.type_size), &bytes);
  for (size_t i = 1; i < ne.size() && !overflow; ++i) overflow = __builtin_mul_overflow(bytes, uint64_t(ne[i]), &bytes);
  int64_t elems = 1;
  for (int64_t d : ne) overflow = overflow || __builtin_mul_overflow(elems, d, &elems);
  if (overflow || bytes > std::numeric_limits<size_t>::max())
    c.fail("tensor '" + name + "' dimensions overflow (their product is too large)");
  return size_t(bytes);
}

}  // namespace

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  auto g = std::shared_ptr<GgufFile>(new GgufFile());
  g->file_ = MappedFile::open(path);
  const std::string& fpath = g->file_->path();
  Cursor c(g->file_->data(), g->file_->size(), fpath);

  c.need(4, "magic");
  uint32_t magic = c.read<uint32_t>("magic");
  if (magic != 0x46554747u) c.fail("not a GGUF file (bad magic)");
  g->version_ = c.read<uint32_t>("version");
  if (g->version_ != 2 && g->version_ != 3)
    c.fail("unsupported GGUF version " + std::to_string(g->version_) + " (llmctl reads versions 2 and 3)");
  uint64_t n_tensors = c.read<uint64_t>("tensor count");
  uint64_t n_kv = c.read<uint64_t>("metadata count");
  c.check_count(n_kv, 8 + 4 + 1, "metadata");
  c.check_count(n_tensors, 8 + 4 + 4 + 8, "tensor");
  if (n_tensors > kMaxTensors)
    c.fail("tensor count " + std::to_string(n_tensors) + " is larger than the limit of " + std::to_string(kMaxTensors));

  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = c.read_string("metadata key");
    uint32_t type = c.read<uint32_t>("metadata value type");
    GgufValue v = read_value(c, type, 0);
    if (!g->metadata_.emplace(key, std::move(v)).second) c.fail("duplicate metadata key '" + key + "'");
  }

  uint64_t alignment = 32;
  if (const GgufValue* a = g->find("general.alignment")) {
    if (!std::holds_alternative<uint64_t>(a->v)) c.fail("general.alignment is not an unsigned integer");
    alignment = std::get<uint64_t>(a->v);
    if (alignment == 0 || (alignment & (alignment - 1)) != 0 || alignment > (1u << 20))
      c.fail("general.alignment " + std::to_string(alignment) + " is not a power of two up to 1 MiB");
  }

  g->tensors_.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.name = c.read_string("tensor name");
    if (t.name.empty() || t.name.size() > kMaxTensorName)
      c.fail("tensor " + std::to_string(i) + " has a name of " + std::to_string(t.name.size()) + " bytes (1 to " +
             std::to_string(kMaxTensorName) + " allowed)");
    uint32_t n_dims = c.read<uint32_t>("tensor dimension count");
    if (n_dims < 1 || n_dims > kMaxDims)
      c.fail("tensor '" + t.name + "' has " + std::to_string(n_dims) + " dimensions (1 to 4 allowed)");
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t ne = c.read<uint64_t>("tensor dimension");
      if (ne > uint64_t(std::numeric_limits<int64_t>::max()))
        c.fail("tensor '" + t.name + "' has dimension " + std::to_string(ne) + ", too large");
      t.ne.push_back(int64_t(ne));
    }
    uint32_t type = c.read<uint32_t>("tensor type");
    t.type = GgmlType(type);
    t.offset = c.read<uint64_t>("tensor offset");
    t.nbytes = tensor_nbytes(c, t.name, type, t.ne);
    if (t.offset % alignment != 0)
      c.fail("tensor '" + t.name + "' offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
             std::to_string(alignment));
    g->tensors_.push_back(std::move(t));
  }

  // The data section starts at the next multiple of the alignment.
  uint64_t data_start = (uint64_t(c.pos()) + alignment - 1) / alignment * alignment;
  size_t file_size = g->file_->size();
  if (n_tensors > 0 && data_start > file_size) c.fail("data section starts past the end of the file");
  uint64_t data_size = data_start <= file_size ? file_size - data_start : 0;

  std::vector<const GgufTensorInfo*> by_offset;
  for (GgufTensorInfo& t : g->tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      c.fail("tensor '" + t.name + "' (offset " + std::to_string(t.offset) + ", " + std::to_string(t.nbytes) +
             " bytes) lies past the end of the data section (" + std::to_string(data_size) + " bytes)");
    t.data = g->file_->data() + data_start + t.offset;
    by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  const GgufTensorInfo* prev = nullptr;  // the non-empty tensor reaching furthest so far
  for (const GgufTensorInfo* t : by_offset) {
    if (t->nbytes == 0) continue;
    if (prev && prev->offset + prev->nbytes > t->offset)
      c.fail("tensors '" + prev->name + "' and '" + t->name + "' overlap in the data section");
    if (!prev || t->offset + t->nbytes > prev->offset + prev->nbytes) prev = t;
  }
  std::vector<const std::string*> names;
  for (const GgufTensorInfo& t : g->tensors_) names.push_back(&t.name);
  std::sort(names.begin(), names.end(), [](auto* a, auto* b) { return *a < *b; });
  for (size_t i = 1; i < names.size(); ++i)
    if (*names[i] == *names[i - 1]) c.fail("duplicate tensor name '" + *names[i] + "'");
  return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufValue& GgufFile::at(const std::string& key) const {
  const GgufValue* v = find(key);
  LLM_REQUIRE(v) << path() << ": missing GGUF metadata key '" << key << "'";
  return *v;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  for (const GgufTensorInfo& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

Tensor GgufFile::load(const GgufTensorInfo& t, bool keep_float) const {
  std::vector<int64_t> shape = t.shape();
  const uint32_t type = uint32_t(t.type);
  const bool is_float = t.type == GgmlType::F16 || t.type == GgmlType::BF16 || t.type == GgmlType::F32;
  if (keep_float && is_float) {
    DType dt = t.type == GgmlType::F32 ? DType::F32 : t.type == GgmlType::F16 ? DType::F16 : DType::BF16;
    if (reinterpret_cast<uintptr_t>(t.data) % dtype_size(dt) == 0)  // the mapping is read-only; views are const
      return Tensor::view(const_cast<uint8_t*>(t.data), dt, std::move(shape), std::shared_ptr<void>(file_, nullptr));
    Tensor copy = Tensor::empty_host(dt, std::move(shape));  // general.alignment below the element size
    std::memcpy(copy.data, t.data, t.nbytes);
    return copy;
  }
  LLM_REQUIRE(is_float || quant::ggml_can_dequantize(type))
      << path() << ": tensor '" << t.name << "' has type " << quant::ggml_type_label(type)
      << ", which llmctl cannot dequantize (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, "
         "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS, "
         "MXFP4, TQ1_0, TQ2_0)";
  Tensor out = Tensor::empty_host(DType::F32, shape);
  float* dst = out.ptr<float>();
  quant::GgmlBlockLayout l;
  LLM_CHECK(quant::ggml_block_layout(type, &l));
  const int64_t nblocks = out.numel() / l.block_size;
  // Converts blocks [b0, b1); each block is handled the same way whatever the split. Runs on pool
  // threads, so it must not throw.
  auto convert = [&](int64_t b0, int64_t b1) {
    const uint8_t* src = t.data + size_t(b0) * l.type_size;
    float* d = dst + b0 * l.block_size;
    int64_t n = (b1 - b0) * l.block_size;
    switch (t.type) {
      case GgmlType::F32: std::memcpy(d, src, size_t(n) * 4); break;
      case GgmlType::F16:
      case GgmlType::BF16:
        for (int64_t i = 0; i < n; ++i) {
          uint16_t h;
          std::memcpy(&h, src + 2 * i, 2);
          d[i] = t.type == GgmlType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
        break;
      default: quant::dequantize_row(type, src, d, n);  // cannot fail: type checked above, whole blocks
    }
  };
  if (out.numel() >= (int64_t(1) << 20))
    ThreadPool::global().parallel_for(nblocks, convert);
  else
    convert(0, nblocks);
  return out;
}

}  // namespace llmctl
