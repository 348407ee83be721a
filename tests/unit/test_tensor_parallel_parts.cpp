// The parts of tensor parallelism that need no second process: the BatchPlan wire format, the
// mpirun command line, the single-rank communicator and the pipeline micro-batch cut of a plan
// (several ranks: tests/e2e/test_tensor_parallel.py).
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>

#include "engine/core/error.h"
#include "engine/executor/plan_codec.h"
#include "engine/parallel/comm.h"
#include "engine/parallel/launcher.h"
#include "engine/parallel/loopback_comm.h"

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
  p.exact_slot = {3, -1};
  p.exact_copies = {0, 3};
  p.graph_context = 48;
  p.window_slot_mapping = {8, 9, 10, 3};
  p.window_block_table = {2, -1, -1, -1, -1, 0};
  p.window_max_blocks_per_seq = 3;
  const std::vector<uint8_t> bytes = encode_plan(p);
  const BatchPlan q = decode_plan(bytes);
  CHECK(q.token_ids == p.token_ids);
  CHECK(q.positions == p.positions);
  CHECK(q.slot_mapping == p.slot_mapping);
  CHECK(q.query_start == p.query_start);
  CHECK(q.context_len == p.context_len);
  CHECK(q.block_table == p.block_table);
  CHECK(q.logits_rows == p.logits_rows);
  CHECK(q.exact_slot == p.exact_slot);
  CHECK(q.exact_copies == p.exact_copies);
  CHECK(q.max_blocks_per_seq == 3);
  CHECK(q.graph_context == 48);
  CHECK(q.window_slot_mapping == p.window_slot_mapping);
  CHECK(q.window_block_table == p.window_block_table);
  CHECK(q.window_max_blocks_per_seq == 3);
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

TEST_CASE("loopback comm: stages run in turn hand their messages on in order, sizes checked") {
  LoopbackComm comm(3);
  CHECK(comm.world() == 3);
  const float a[2] = {1.5f, -2.0f}, b[3] = {4, 5, 6};
  comm.set_rank(0);
  comm.send(a, sizeof a, 1);
  comm.send(b, sizeof b, 1);
  CHECK(comm.pending() == 2);
  comm.set_rank(1);
  float got_a[2], got_b[3];
  CHECK_THROWS(comm.recv(got_b, sizeof got_b, 0));  // the next message is a's 8 bytes
  comm.recv(got_a, sizeof got_a, 0);
  comm.recv(got_b, sizeof got_b, 0);
  CHECK(got_a[1] == -2.0f);
  CHECK(got_b[2] == 6.0f);
  CHECK_THROWS(comm.recv(got_a, sizeof got_a, 0));  // nothing left
  CHECK_THROWS(comm.send(a, sizeof a, 1));          // not to itself
  CHECK_THROWS(comm.set_rank(3));
  Tensor x = Tensor::empty_host(DType::F32, {2});
  CHECK_THROWS(comm.all_reduce_sum(x));  // no collectives in one process
}

TEST_CASE("loopback comm: a replayed stage reads its input again and hands nothing on") {
  LoopbackComm comm(3);
  const float a[2] = {1.5f, -2.0f}, out[2] = {7, 8};
  comm.set_rank(0);
  comm.send(a, sizeof a, 1);
  comm.set_rank(1);
  for (int run = 0; run < 2; ++run) {  // stage 1 probed twice
    comm.set_replay(true);
    float got[2] = {0, 0};
    comm.recv(got, sizeof got, 0);
    CHECK(got[0] == 1.5f);
    CHECK_THROWS(comm.recv(got, sizeof got, 0));  // one message to read
    comm.send(out, sizeof out, 2);                // dropped
    comm.set_replay(false);
    CHECK(comm.pending() == 1);
  }
  float got[2] = {0, 0};  // then run for real: the input taken, the output handed on
  comm.recv(got, sizeof got, 0);
  comm.send(out, sizeof out, 2);
  CHECK(comm.pending() == 1);
  comm.set_rank(2);
  comm.recv(got, sizeof got, 1);
  CHECK(got[1] == 8.0f);
}

TEST_CASE("slice_plan: sequences [s0, s1) as their own plan, logits rows rebased") {
  // Three sequences: 3 prompt tokens (logits at its last), 1 decode token, 2 tokens (logits at both).
  BatchPlan p;
  p.token_ids = {10, 11, 12, 20, 30, 31};
  p.positions = {0, 1, 2, 7, 4, 5};
  p.slot_mapping = {16, 17, 18, 39, 52, 53};
  p.query_start = {0, 3, 4, 6};
  p.context_len = {3, 8, 6};
  p.max_blocks_per_seq = 2;
  p.block_table = {1, -1, 2, -1, 3, -1};
  p.logits_rows = {2, 3, 4, 5};
  p.exact_slot = {0, 2, -1};
  p.exact_copies = {1, 2};
  p.validate(16, 8);
  const BatchPlan a = slice_plan(p, 0, 1), b = slice_plan(p, 1, 3);
  a.validate(16, 8);
  b.validate(16, 8);
  CHECK(a.token_ids == std::vector<int32_t>{10, 11, 12});
  CHECK(a.logits_rows == std::vector<int32_t>{2});
  CHECK(b.token_ids == std::vector<int32_t>{20, 30, 31});
  CHECK(b.query_start == std::vector<int32_t>{0, 1, 3});
  CHECK(b.context_len == std::vector<int32_t>{8, 6});
  CHECK(b.block_table == std::vector<int32_t>{2, -1, 3, -1});
  CHECK(b.slot_mapping == std::vector<int32_t>{39, 52, 53});
  CHECK(b.logits_rows == std::vector<int32_t>{0, 1, 2});  // rows 3, 4, 5 of the whole step
  CHECK(a.exact_slot == std::vector<int32_t>{0});
  CHECK(b.exact_slot == std::vector<int32_t>{2, -1});
  CHECK((a.exact_copies.empty() && b.exact_copies.empty()));  // made once by the runner, before the slices
  BatchPlan bad = p;
  bad.exact_slot = {0, 1};
  CHECK_THROWS_AS(bad.validate(16, 8), Error);
  bad.exact_slot = {0, -2, 1};
  CHECK_THROWS_AS(bad.validate(16, 8), Error);
  bad = p;
  bad.exact_copies = {1};
  CHECK_THROWS_AS(bad.validate(16, 8), Error);
  CHECK_THROWS_AS(slice_plan(p, 2, 2), Error);
  CHECK_THROWS_AS(slice_plan(p, 0, 4), Error);
  BatchPlan unsorted = p;
  unsorted.logits_rows = {3, 2};
  CHECK_THROWS_AS(slice_plan(unsorted, 0, 2), Error);
}
