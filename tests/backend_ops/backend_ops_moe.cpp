// Parity table rows for the mixture-of-experts row ops (caps().moe): gather_token_rows,
// scatter_add_rows (weighted, repeated rows added in order) and fill_zero.
#include <cstdio>
#include <string>
#include <tuple>

#include "backend_ops_util.h"

namespace llmctl::backend_ops {

namespace {

std::string shape(int T, int C, size_t n) {
  char buf[80];
  std::snprintf(buf, sizeof buf, "x [%d, %d], %zu rows", T, C, n);
  return buf;
}

// Rows in any order, repeated: a token routed to an expert twice cannot happen, but the op must
// not assume it.
std::vector<int32_t> some_rows(Ctx& c, int T, size_t n) {
  std::vector<int32_t> rows(n);
  for (size_t i = 0; i < n; ++i) rows[i] = int32_t(c.rng() % uint32_t(T));
  rows[0] = T - 1;
  return rows;
}

void gather_case(Ctx& c, int T, int C, size_t n) {
  Rand x = random_tensor(c, c.act(), {T, C});
  const std::vector<int32_t> rows = some_rows(c, T, n);
  Tensor out = poisoned(c, c.act(), {int64_t(n) + 2, C});  // only the first n rows are written
  c.be.gather_token_rows(x.dev, rows, out);
  std::vector<float> got = to_vec(c, out), ref;
  for (int32_t r : rows) ref.insert(ref.end(), x.f.begin() + size_t(r) * C, x.f.begin() + size_t(r + 1) * C);
  got.resize(n * size_t(C));
  c.exact(shape(T, C, n), got, ref);
}

void scatter_case(Ctx& c, int T, int C, size_t n) {
  Rand out = random_tensor(c, c.act(), {T, C});
  Rand y = random_tensor(c, c.act(), {int64_t(n), C});
  const std::vector<int32_t> rows = some_rows(c, T, n);
  std::vector<float> w(n);
  std::uniform_real_distribution<float> u(0.05f, 1.f);
  for (float& x : w) x = u(c.rng);
  c.be.scatter_add_rows(y.dev, rows, w, out.dev);
  std::vector<double> ref(out.f.begin(), out.f.end());
  for (size_t i = 0; i < n; ++i)
    for (int k = 0; k < C; ++k) ref[size_t(rows[i]) * C + size_t(k)] += double(w[i]) * y.f[i * size_t(C) + size_t(k)];
  c.close(shape(T, C, n) + " weighted", to_vec(c, out.dev), ref);
}

void zero_case(Ctx& c, int T, int C) {
  Tensor t = poisoned(c, c.act(), {T, C});
  c.be.fill_zero(t);
  c.exact(shape(T, C, 0) + " zeroed", to_vec(c, t), std::vector<float>(size_t(T) * size_t(C), 0.f));
}

}  // namespace

void add_moe_cases(std::vector<OpCase>& t) {
  for (auto [T, C, n] : {std::tuple{1, 64, size_t(1)}, {9, 96, 5}, {33, 576, 40}}) {
    t.push_back({"gather_token_rows", shape(T, C, n), [=](Ctx& c) { gather_case(c, T, C, n); }});
    t.push_back({"scatter_add_rows", shape(T, C, n), [=](Ctx& c) { scatter_case(c, T, C, n); }});
    t.push_back({"fill_zero", shape(T, C, 0), [=](Ctx& c) { zero_case(c, T, C); }});
  }
}

}  // namespace llmctl::backend_ops
