#include "engine/model/weights/shard.h"

#include <algorithm>
#include <cstring>

#include "engine/core/error.h"

namespace llmctl {

namespace {

void check_rank(const ShardSpec& spec) {
  LLM_CHECK(spec.world >= 1 && spec.rank >= 0 && spec.rank < spec.world)
      << "shard rank " << spec.rank << " of world " << spec.world;
  LLM_CHECK(spec.head_size >= 1) << "shard head size " << spec.head_size;
}

// The parts of spec, or one part covering the whole dimension when it names none.
std::vector<ShardPart> parts_of(int64_t size, const ShardSpec& spec) {
  if (!spec.parts.empty()) return spec.parts;
  LLM_REQUIRE(size % spec.head_size == 0) << "a split dimension of " << size << " is not a multiple of the head size "
                                          << spec.head_size;
  return {ShardPart{size / spec.head_size, spec.kind == ShardKind::Vocab ? "vocabulary rows" : "rows", false}};
}

int64_t sum_lengths(const std::vector<ShardSegment>& segs) {
  int64_t n = 0;
  for (const ShardSegment& s : segs) n += s.length;
  return n;
}

// Rows of `parts` concatenated along dim 0, each `row_bytes` wide: copies rows [begin, begin + n)
// to dst.
void copy_fused_rows(const std::vector<Tensor>& parts, int64_t row_bytes, int64_t begin, int64_t n, char* dst) {
  int64_t part_begin = 0;
  for (const Tensor& p : parts) {
    const int64_t rows = p.dim(0), lo = std::max(begin, part_begin), hi = std::min(begin + n, part_begin + rows);
    if (lo < hi) {
      std::memcpy(dst + (lo - begin) * row_bytes, static_cast<const char*>(p.data) + (lo - part_begin) * row_bytes,
                  size_t((hi - lo) * row_bytes));
    }
    part_begin += rows;
  }
}

}  // namespace

int shard_split_dim(const ShardSpec& spec, int tensor_rank) {
  LLM_CHECK(tensor_rank >= 1) << "cannot shard a scalar";
  return spec.kind == ShardKind::Row ? tensor_rank - 1 : 0;
}

std::vector<ShardSegment> shard_segments(int64_t size, const ShardSpec& spec) {
  check_rank(spec);
  if (spec.kind == ShardKind::Replicated) return {{0, size}};
  const std::vector<ShardPart> parts = parts_of(size, spec);
  int64_t total = 0;
  for (const ShardPart& p : parts) total += p.heads * spec.head_size;
  LLM_REQUIRE(total == size) << shard_kind_name(spec.kind) << " split: the parts add up to " << total
                             << " but the split dimension has " << size;
  const int64_t W = spec.world, r = spec.rank, hs = spec.head_size;
  std::vector<ShardSegment> segs;
  int64_t offset = 0;
  for (const ShardPart& p : parts) {
    LLM_REQUIRE(p.heads > 0) << "cannot split 0 " << p.what << " over " << W << " ranks";
    if (p.replicate_if_fewer && p.heads < W) {
      LLM_REQUIRE(W % p.heads == 0) << "cannot replicate " << p.heads << " " << p.what << " over " << W
                                    << " tensor-parallel ranks: " << W << " is not a multiple of " << p.heads;
      segs.push_back({offset + (r * p.heads / W) * hs, hs});
    } else {
      LLM_REQUIRE(p.heads % W == 0) << "cannot split " << p.heads << " " << p.what << " over " << W
                                    << " tensor-parallel ranks: " << p.heads << " is not a multiple of " << W;
      const int64_t per = p.heads / W;
      segs.push_back({offset + r * per * hs, per * hs});
    }
    offset += p.heads * hs;
  }
  return segs;
}

Tensor shard_slice(const std::vector<Tensor>& parts, const ShardSpec& spec) {
  LLM_CHECK(!parts.empty()) << "shard_slice of no tensors";
  const Tensor& first = parts[0];
  LLM_CHECK(first.rank() >= 1) << "cannot shard a scalar";
  std::vector<int64_t> shape = first.shape;
  shape[0] = 0;
  for (const Tensor& p : parts) {
    const bool same_row_shape =
        p.rank() == first.rank() && std::equal(p.shape.begin() + 1, p.shape.end(), first.shape.begin() + 1);
    LLM_CHECK(p.dtype == first.dtype && same_row_shape && p.device == Device::CPU)
        << "fused parts differ: " << dtype_name(p.dtype) << " " << p.shape_str() << " vs "
        << dtype_name(first.dtype) << " " << first.shape_str();
    shape[0] += p.dim(0);
  }
  if (spec.kind == ShardKind::Replicated && parts.size() == 1) return first;

  const int d = shard_split_dim(spec, int(shape.size()));
  const std::vector<ShardSegment> segs = shard_segments(shape[d], spec);
  std::vector<int64_t> out_shape = shape;
  out_shape[d] = sum_lengths(segs);
  Tensor out = Tensor::empty_host(first.dtype, out_shape);
  const int64_t esize = int64_t(dtype_size(first.dtype));
  char* dst = static_cast<char*>(out.data);
  if (d == 0) {  // whole rows (of everything after dim 0)
    int64_t row_bytes = esize;
    for (size_t i = 1; i < shape.size(); ++i) row_bytes *= shape[i];
    for (const ShardSegment& s : segs) {
      copy_fused_rows(parts, row_bytes, s.begin, s.length, dst);
      dst += s.length * row_bytes;
    }
    return out;
  }
  // Row split: column ranges of every row of the [rows, cols] view.
  const int64_t cols = shape[d];
  for (const Tensor& p : parts) {
    const int64_t prow = cols ? p.numel() / cols : 0;
    const char* src = static_cast<const char*>(p.data);
    for (int64_t i = 0; i < prow; ++i) {
      for (const ShardSegment& s : segs) {
        std::memcpy(dst, src + (i * cols + s.begin) * esize, size_t(s.length * esize));
        dst += s.length * esize;
      }
    }
  }
  return out;
}

Tensor shard_reassemble(const std::vector<Tensor>& slices, const ShardSpec& spec) {
  LLM_CHECK(!slices.empty() && int(slices.size()) == spec.world)
      << "reassembling " << slices.size() << " slices for world " << spec.world;
  const Tensor& first = slices[0];
  for (const Tensor& s : slices)
    LLM_CHECK(s.dtype == first.dtype && s.rank() == first.rank() && s.device == Device::CPU)
        << "slices differ: " << dtype_name(s.dtype) << " " << s.shape_str() << " vs " << dtype_name(first.dtype)
        << " " << first.shape_str();
  if (spec.kind == ShardKind::Replicated) {
    for (const Tensor& s : slices)
      LLM_CHECK(s.shape == first.shape && std::memcmp(s.data, first.data, first.nbytes()) == 0)
          << "replicated tensor differs between ranks";
    return first;
  }
  const int d = shard_split_dim(spec, first.rank());
  int64_t size = 0;  // of the full split dimension
  if (spec.parts.empty()) {
    size = first.dim(d) * spec.world;
  } else {
    for (const ShardPart& p : spec.parts) size += p.heads * spec.head_size;
  }
  LLM_CHECK(size > 0) << "reassembling an empty split dimension";
  std::vector<int64_t> shape = first.shape;
  shape[d] = size;
  Tensor full = Tensor::empty_host(first.dtype, shape);
  const int64_t esize = int64_t(dtype_size(first.dtype));
  // Elements per index of the split dim: the row width when d == 0, the rows of the
  // [other, size] view when d is the last dim.
  const int64_t other = size ? int64_t(full.numel() / size) : 0;
  std::vector<char> written(size_t(size), 0);
  char* base = static_cast<char*>(full.data);
  for (int r = 0; r < spec.world; ++r) {
    ShardSpec sr = spec;
    sr.rank = r;
    const std::vector<ShardSegment> segs = shard_segments(size, sr);
    LLM_CHECK(slices[r].dim(d) == sum_lengths(segs)) << "rank " << r << "'s slice " << slices[r].shape_str()
                                                     << " does not match its " << sum_lengths(segs) << " indices";
    const char* src = static_cast<const char*>(slices[r].data);
    int64_t local = 0;  // offset along the split dim inside the slice
    for (const ShardSegment& s : segs) {
      const bool seen = written[size_t(s.begin)] != 0;  // a replicated head already taken from a lower rank
      for (int64_t i = 0; i < s.length; ++i)
        LLM_CHECK((written[size_t(s.begin + i)] != 0) == seen) << "overlapping shard segments";
      if (d == 0) {
        char* to = base + s.begin * other * esize;
        const char* from = src + local * other * esize;
        const size_t bytes = size_t(s.length * other * esize);
        if (seen)
          LLM_CHECK(std::memcmp(to, from, bytes) == 0) << "replicated rows " << s.begin << ".. differ on rank " << r;
        else
          std::memcpy(to, from, bytes);
      } else {
        const int64_t local_cols = slices[r].dim(d);
        for (int64_t o = 0; o < other; ++o) {
          char* to = base + (o * size + s.begin) * esize;
          const char* from = src + (o * local_cols + local) * esize;
          if (seen)
            LLM_CHECK(std::memcmp(to, from, size_t(s.length * esize)) == 0)
                << "replicated columns " << s.begin << ".. differ on rank " << r;
          else
            std::memcpy(to, from, size_t(s.length * esize));
        }
      }
      for (int64_t i = 0; i < s.length; ++i) written[size_t(s.begin + i)] = 1;
      local += s.length;
    }
  }
  for (int64_t i = 0; i < size; ++i) LLM_CHECK(written[size_t(i)]) << "index " << i << " held by no rank";
  return full;
}

bool shard_is_whole(int64_t size, const ShardSpec& spec) {
  int64_t next = 0;
  for (const ShardSegment& s : shard_segments(size, spec)) {
    if (s.begin != next) return false;
    next += s.length;
  }
  return next == size;
}

quant::GroupAffineWeight shard_quantized(quant::GroupAffineWeight&& w, const ShardSpec& spec) {
  if (shard_is_whole(spec.kind != ShardKind::Row ? w.n : w.k, spec)) return std::move(w);
  return shard_quantized(static_cast<const quant::GroupAffineWeight&>(w), spec);
}

quant::GroupAffineWeight shard_quantized(const quant::GroupAffineWeight& w, const ShardSpec& spec) {
  if (spec.kind == ShardKind::Replicated) return w;
  const bool rows = spec.kind != ShardKind::Row;
  const int64_t size = rows ? w.n : w.k;
  std::vector<quant::IndexRange> ranges;
  for (const ShardSegment& s : shard_segments(size, spec)) ranges.emplace_back(s.begin, s.length);
  return rows ? quant::select_rows(w, ranges) : quant::select_columns(w, ranges);
}

}  // namespace llmctl
