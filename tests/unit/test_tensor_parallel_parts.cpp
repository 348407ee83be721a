// The parts of tensor parallelism that need no second process: the BatchPlan wire format, the
// mpirun command line and the single-rank communicator (several ranks: tests/e2e/test_tensor_parallel.py).
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>

#include "engine/core/error.h"
#include "engine/executor/plan_codec.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/launcher.h"

using namespace llmctl;

TEST_CASE("plan_codec: a plan round-trips; short, long or lying buffers are refused") {
  BatchPlan p;
  p.token_ids = {5, 7, 9, 11};
  p.positions = {0, 1, 2, 40};
  p.slot_mapping = {16, 17, 18, 99};
  p.query_start = {0, 3, 4};
  p.context_len = {3, 41};
  p.max_blocks_per_seq = 3;
  p.block_table = {1, -1, -1, 4, 5, 6};
  p.logits_rows = {2, 3};
  p.graph_context = 48;
  const std::vector<uint8_t> bytes = encode_plan(p);
  const BatchPlan q = decode_plan(bytes);
  CHECK(q.token_ids == p.token_ids);
  CHECK(q.positions == p.positions);
  CHECK(q.slot_mapping == p.slot_mapping);
  CHECK(q.query_start == p.query_start);
  CHECK(q.context_len == p.context_len);
  CHECK(q.block_table == p.block_table);
  CHECK(q.logits_rows == p.logits_rows);
  CHECK(q.max_blocks_per_seq == 3);
  CHECK(q.graph_context == 48);
  std::vector<uint8_t> shorter(bytes.begin(), bytes.end() - 1), longer = bytes;
  longer.push_back(0);
  CHECK_THROWS_AS(decode_plan(shorter), Error);
  CHECK_THROWS_AS(decode_plan(longer), Error);
  std::vector<uint8_t> lying = bytes;
  const int64_t huge = int64_t(1) << 40;  // the first array's count
  std::copy_n(reinterpret_cast<const uint8_t*>(&huge), sizeof huge, lying.begin());
  CHECK_THROWS_AS(decode_plan(lying), Error);
}

TEST_CASE("launcher: mpirun_command starts N copies of this executable with the same arguments") {
  const std::vector<std::string> cmd = mpirun_command(3, {"llmctl", "serve", "-tp", "3", "--port", "0"});
  REQUIRE(cmd.size() >= 6);
  CHECK(cmd[0] == "mpirun");
  CHECK(cmd[1] == "-np");
  CHECK(cmd[2] == "3");
  CHECK(std::find(cmd.begin(), cmd.end(), "--oversubscribe") != cmd.end());
  CHECK((std::find(cmd.begin(), cmd.end(), "--allow-run-as-root") != cmd.end()) == (geteuid() == 0));
  const std::vector<std::string> tail(cmd.end() - 5, cmd.end());
  CHECK(tail == std::vector<std::string>{"serve", "-tp", "3", "--port", "0"});
  CHECK(cmd[cmd.size() - 6].find("llmctl_unit_tests") != std::string::npos);  // /proc/self/exe, not argv[0]
}

TEST_CASE("single-rank comm: all_gather_cols copies, reductions are identities, no peers") {
  auto c = make_single_rank_comm();
  CHECK(c->world() == 1);
  CHECK(c->rank() == 0);
  Tensor x = Tensor::empty_host(DType::F32, {2, 3}), out = Tensor::zeros_host(DType::F32, {2, 3});
  for (int i = 0; i < 6; ++i) x.ptr<float>()[i] = 0.5f + float(i);
  c->all_reduce_sum(x);
  c->all_gather_cols(x, out);
  for (int i = 0; i < 6; ++i) CHECK(out.ptr<float>()[i] == 0.5f + float(i));
  CHECK(c->all_reduce_min(42) == 42);
  int b = 0;
  CHECK_THROWS_AS(c->send(&b, sizeof b, 1), Error);
  CHECK_THROWS_AS(c->recv(&b, sizeof b, 1), Error);
}
