// Parity table rows for Backend::sample (where caps().sampling; the CPU's is the reference): greedy and seeded
// draws against a naive reference of engine/sample/logits_processors.h's stages (edits, greedy arg
// max, softmax at temperature, top-k, top-p, min-p, inverse-CDF draw in ascending id order).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>

#include "backend_ops_util.h"

namespace llmctl::backend_ops {

SampleDraw sample_reference(const std::vector<float>& logits_row, const SampleJob& j) {
  const int V = j.vocab > 0 ? j.vocab : int(logits_row.size());
  std::vector<float> l(logits_row.begin(), logits_row.begin() + V);  // stages 1-4 edit in f32
  for (const LogitEdit& e : j.edits) {
    if (e.id >= V) continue;  // past the drawable ids
    float& x = l[size_t(e.id)];
    if (e.flags & LogitEdit::kBias) x += e.bias;
    if (e.flags & LogitEdit::kSuppress) x = -INFINITY;
    if (e.flags & LogitEdit::kSubtract) x -= e.sub;
    if (e.flags & LogitEdit::kRepeat) x = x > 0 ? x / j.repetition_penalty : x * j.repetition_penalty;
  }
  SampleDraw d;
  if (j.temperature == 0) {  // arg max, lowest id on ties; -1 when everything is suppressed
    for (int i = 0; i < V; ++i)
      if (l[size_t(i)] != -INFINITY && (d.token < 0 || l[size_t(i)] > l[size_t(d.token)])) d.token = i;
    return d;
  }
  std::vector<int> ids;
  for (int i = 0; i < V; ++i)
    if (l[size_t(i)] != -INFINITY) ids.push_back(i);
  if (ids.empty()) return d;
  double mx = -INFINITY;
  for (int i : ids) mx = std::max(mx, double(l[size_t(i)]));
  std::vector<double> p(size_t(V), 0.0);
  for (int i : ids) p[size_t(i)] = std::exp((double(l[size_t(i)]) - mx) / j.temperature);
  // Order by probability desc, id asc.
  auto by_prob = [&](int a, int b) { return p[size_t(a)] != p[size_t(b)] ? p[size_t(a)] > p[size_t(b)] : a < b; };
  std::sort(ids.begin(), ids.end(), by_prob);
  if (j.top_k > 0 && size_t(j.top_k) < ids.size()) ids.resize(size_t(j.top_k));
  auto total = [&] {
    double s = 0;
    for (int i : ids) s += p[size_t(i)];
    return s;
  };
  if (j.top_p < 1) {
    const double sum = total();
    double cum = 0;
    size_t keep = ids.size();
    for (size_t r = 0; r < ids.size(); ++r) {
      const double before = cum / sum;
      cum += p[size_t(ids[r])];
      d.margin = std::min(d.margin, std::fabs(cum / sum - j.top_p));
      if (cum / sum >= j.top_p) {
        d.margin = std::min(d.margin, std::fabs(before - j.top_p));
        keep = r + 1;
        break;
      }
    }
    ids.resize(keep);
  }
  if (j.min_p > 0) {
    const double sum = total(), floor = j.min_p * p[size_t(ids[0])] / sum;
    std::vector<int> kept;
    for (int i : ids) {
      d.margin = std::min(d.margin, std::fabs(p[size_t(i)] / sum - floor));
      if (p[size_t(i)] / sum >= floor) kept.push_back(i);
    }
    ids = kept;
  }
  std::sort(ids.begin(), ids.end());  // the draw walks ascending ids
  const double sum = total();
  double cum = 0;
  for (int i : ids) {
    const double before = cum;
    cum += p[size_t(i)] / sum;
    if (cum > j.u || i == ids.back()) {
      d.token = i;
      d.margin = std::min({d.margin, std::fabs(j.u - before), std::fabs(cum - j.u)});
      return d;
    }
  }
  return d;
}

namespace {

void sample_case(Ctx& c, int V) {
  std::normal_distribution<float> n(0.f, 2.5f);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  std::uniform_int_distribution<int> any_id(0, V - 1);
  std::vector<SampleJob> jobs;
  // Greedy: whole row; a padded row whose largest logit lies past `vocab`; edits that move the arg max.
  jobs.push_back({});
  jobs.push_back({.vocab = V - 100, .edits = {}});
  {
    SampleJob e;
    e.repetition_penalty = 1.3f;
    e.edits = {{any_id(c.rng), LogitEdit::kBias, 40.f, 0.f}};  // a random id becomes the largest
    jobs.push_back(e);
  }
  jobs.push_back({.vocab = 4, .edits = {{0, LogitEdit::kSuppress}, {1, LogitEdit::kSuppress},
                                        {2, LogitEdit::kSuppress}, {3, LogitEdit::kSuppress}}});  // -> -1
  // Seeded draws over temperatures and truncations.
  const float temps[] = {0.5f, 1.0f, 1.5f};
  for (int rep = 0; rep < 4; ++rep)
    for (float temp : temps) {
      SampleJob j;
      j.temperature = temp;
      j.u = u01(c.rng);
      jobs.push_back(j);                       // plain
      j.u = u01(c.rng), j.top_k = 5;
      jobs.push_back(j);                       // top-k
      j.u = u01(c.rng), j.top_k = 0, j.top_p = 0.9f;
      jobs.push_back(j);                       // top-p
      j.u = u01(c.rng), j.top_p = 1, j.min_p = 0.05f;
      jobs.push_back(j);                       // min-p
      j.u = u01(c.rng), j.top_k = 40, j.top_p = 0.95f, j.min_p = 0.02f, j.vocab = V - 37;
      j.repetition_penalty = 1.2f;
      j.edits = {{any_id(c.rng), LogitEdit::kBias, 3.f, 0.f},
                 {any_id(c.rng), LogitEdit::kSubtract | LogitEdit::kRepeat, 0.f, 0.8f}};
      jobs.push_back(j);                       // everything at once, on a padded row
    }
  const int R = int(jobs.size());
  Tensor h = Tensor::empty_host(DType::F32, {R, V});
  std::vector<float> rows(size_t(R) * V);
  for (int r = 0; r < R; ++r) {
    float* row = &rows[size_t(r) * V];
    for (int i = 0; i < V; ++i) row[i] = n(c.rng);
    for (int i = 0; i < 5; ++i) row[any_id(c.rng)] = 9.f + float(i);  // a few large, a long tail
    jobs[size_t(r)].row = r;
  }
  rows[size_t(1) * V + size_t(V - 50)] = 1e4f;  // job 1: the largest logit is a padded id
  rows[size_t(2) * V + 7] = 30.f;               // job 2: beaten by the bias of +40
  std::copy(rows.begin(), rows.end(), h.ptr<float>());
  Tensor logits = c.be.upload(h, DType::F32);
  const std::vector<int32_t> got = c.be.sample(logits, jobs);
  c.expect("V=" + std::to_string(V) + ": one token per job", got.size() == jobs.size());
  if (got.size() != jobs.size()) return;
  int greedy_bad = 0, drawn_bad = 0, near_boundary = 0;
  std::string detail;
  for (int r = 0; r < R; ++r) {
    const SampleJob& j = jobs[size_t(r)];
    const SampleDraw want = sample_reference(std::vector<float>(rows.begin() + long(r) * V, rows.begin() + long(r + 1) * V), j);
    if (got[size_t(r)] == want.token) continue;
    if (j.temperature > 0 && want.margin < 1e-4) {
      ++near_boundary;  // f32 on the device vs double here, a hair from a boundary
      continue;
    }
    (j.temperature == 0 ? greedy_bad : drawn_bad)++;
    detail += " job " + std::to_string(r) + ": got " + std::to_string(got[size_t(r)]) + " want " +
              std::to_string(want.token) + ";";
  }
  c.expect("V=" + std::to_string(V) + ": greedy jobs equal the reference (padded ids never drawn, -1 when all suppressed)",
           greedy_bad == 0, detail);
  c.expect("V=" + std::to_string(V) + ": seeded draws equal the reference", drawn_bad == 0 && near_boundary <= 1,
           detail + " near a boundary: " + std::to_string(near_boundary));
  c.expect("V=" + std::to_string(V) + ": the padded arg max is not drawn", got[1] != V - 50 && got[1] >= 0 && got[1] < V - 100);
  c.expect("V=" + std::to_string(V) + ": all suppressed gives -1", got[3] == -1);
}

}  // namespace

void add_sample_cases(std::vector<OpCase>& t) {
  t.push_back({"sample", "greedy and seeded draws", [](Ctx& c) {
                 sample_case(c, 1000);
                 sample_case(c, 32000);
               }});
}

}  // namespace llmctl::backend_ops
