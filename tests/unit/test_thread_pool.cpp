// ThreadPool::parallel_for: every index of [0, n) handled once, in pieces that depend only on n, the
// thread count and `balanced` (never on which thread claims them, or when), balanced pieces falling
// in size from a quarter of [0, n) (two threads), a thread held up leaving its pieces to others, and
// an exception thrown in a piece on any thread reaching the caller; and loops of every kind back to
// back, with workers asleep, late or descheduled, each index handled once.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/core/thread_pool.h"

using namespace llmctl;

namespace {

// The pieces one parallel_for ran, sorted, after checking each index was handled exactly once.
std::vector<std::pair<int64_t, int64_t>> pieces_of(ThreadPool& pool, int64_t n, bool balanced) {
  std::vector<std::atomic<int>> hits(size_t(std::max<int64_t>(n, 1)));
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> pieces;
  pool.parallel_for(n, [&](int64_t b, int64_t e) {
    REQUIRE(0 <= b);
    REQUIRE(b < e);
    REQUIRE(e <= n);
    for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
    std::lock_guard<std::mutex> lk(mu);
    pieces.emplace_back(b, e);
  }, balanced);
  for (int64_t i = 0; i < n; ++i) REQUIRE(hits[size_t(i)].load() == 1);
  std::sort(pieces.begin(), pieces.end());
  return pieces;
}

}  // namespace

TEST_CASE("thread pool: pieces cover [0, n) once, the same pieces every run, balanced ones falling in size") {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 2, 7, 15, 16, 17, 40, 100, 1000, 12345})
      for (bool balanced : {false, true}) {
        CAPTURE(threads);
        CAPTURE(n);
        CAPTURE(balanced);
        const auto first = pieces_of(pool, n, balanced);
        for (int run = 0; run < 5; ++run) CHECK(pieces_of(pool, n, balanced) == first);
        if (threads == 1 || n < 2) continue;  // run whole on the caller
        const bool split = balanced && n >= int64_t(threads) << kBalanceRounds;
        if (!split) {  // one piece a thread (fewer when n is): n / threads each, give or take one
          CHECK(first.size() == size_t(std::min<int64_t>(n, threads)));
          for (const auto& [b, e] : first) CHECK(e - b >= n / threads);
          continue;
        }
        CHECK(first.size() == size_t(threads * (kBalanceRounds + 1)));
        // in order: the first `threads` pieces n / (2 threads) each, and no piece longer than one before it
        for (int i = 0; i < threads; ++i) CHECK(first[size_t(i)].second - first[size_t(i)].first <= n / (2 * threads) + 1);
        CHECK(first[0].second - first[0].first >= n / (2 * threads) - 1);
        for (size_t i = 1; i < first.size(); ++i)
          CHECK(first[i].second - first[i].first <= first[i - 1].second - first[i - 1].first + 1);
        CHECK(first.back().second - first.back().first <= n / (threads << kBalanceRounds) + 1);
      }
  }
}

TEST_CASE("thread pool: a thread held up leaves its pieces to the others") {
  ThreadPool pool(2);
  // The first piece claimed sleeps; the other thread takes every other piece meanwhile.
  std::atomic<int> claimed{0};
  std::mutex mu;
  std::vector<std::pair<std::thread::id, int64_t>> ran;  // (thread, piece start)
  pool.parallel_for(1024, [&](int64_t b, int64_t) {
    if (claimed.fetch_add(1) == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::lock_guard<std::mutex> lk(mu);
    ran.emplace_back(std::this_thread::get_id(), b);
  }, /*balanced=*/true);
  REQUIRE(ran.size() == size_t(2 * (kBalanceRounds + 1)));
  const std::thread::id slow = ran.back().first;  // the sleeper finishes last
  int64_t slow_pieces = 0;
  for (const auto& [id, b] : ran) slow_pieces += id == slow;
  CHECK(slow_pieces == 1);
}

TEST_CASE("thread pool: an exception in any piece reaches the caller, and the pool runs on") {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (bool balanced : {false, true})
      for (int64_t bad : {int64_t(0), int64_t(511), int64_t(1023)}) {  // the first, a middle, the last piece's
        CAPTURE(threads);
        CAPTURE(balanced);
        CAPTURE(bad);
        std::atomic<int> calls{0};
        CHECK_THROWS_WITH_AS(pool.parallel_for(1024, [&](int64_t b, int64_t e) {
          calls.fetch_add(1);
          if (b <= bad && bad < e) throw std::runtime_error("piece " + std::to_string(b));
        }, balanced), doctest::Contains("piece"), std::runtime_error);
        CHECK(calls.load() >= 1);
        CHECK(pieces_of(pool, 1000, balanced).size() >= 1);  // and the next loop covers its indices
      }
  }
}

TEST_CASE("thread pool: many loops of every kind back to back, workers asleep or late, each index once") {
  // Loops of one piece a thread and balanced ones, of 0-3,000 indices, pieces that take no time or
  // up to 50 us, pauses that let the workers fall asleep, throwing pieces: each loop's indices are
  // handled once (at most once where a piece threw).
  std::mt19937 rng(1234);
  for (int threads : {2, 3, 4, 8}) {
    ThreadPool pool(threads);
    for (int loop = 0; loop < 400; ++loop) {
      CAPTURE(threads);
      CAPTURE(loop);
      const int64_t n = std::uniform_int_distribution<int64_t>(0, 3000)(rng);
      const bool balanced = rng() % 2 == 0, throws = rng() % 16 == 0;
      const int slow_us = rng() % 4 == 0 ? int(rng() % 50) : 0;
      if (rng() % 32 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // workers asleep
      std::vector<std::atomic<int>> hits(size_t(std::max<int64_t>(n, 1)));
      const int64_t bad = n > 0 ? int64_t(rng() % uint64_t(n)) : 0;
      auto body = [&](int64_t b, int64_t e) {
        if (slow_us && b == 0) std::this_thread::sleep_for(std::chrono::microseconds(slow_us));
        for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
        if (throws && b <= bad && bad < e) throw std::runtime_error("piece");
      };
      if (throws && n > 0) {
        CHECK_THROWS_AS(pool.parallel_for(n, body, balanced), std::runtime_error);
        for (int64_t i = 0; i < n; ++i) REQUIRE(hits[size_t(i)].load() <= 1);
      } else {
        pool.parallel_for(n, body, balanced);
        for (int64_t i = 0; i < n; ++i) REQUIRE(hits[size_t(i)].load() == 1);
      }
    }
  }
}

TEST_CASE("thread pool: tiny loops back to back with more threads than cores, each index once") {
  // Workers descheduled at any point (8 threads, a second of loops of a few hundred nanoseconds): some
  // wake on a job that finished without them, and must not claim a piece of a later one (a claim
  // made that way ran an old loop's function or left the caller waiting forever, in 4 runs of 4).
  ThreadPool pool(8);
  std::vector<std::atomic<int>> hits(64);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  int64_t loops = 0, wrong = 0;
  while (std::chrono::steady_clock::now() < end) {
    const int64_t n = 8 + loops % 56;
    for (int64_t i = 0; i < n; ++i) hits[size_t(i)].store(0, std::memory_order_relaxed);
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
    }, /*balanced=*/loops % 3 == 0);
    for (int64_t i = 0; i < n; ++i) wrong += hits[size_t(i)].load() != 1;
    ++loops;
  }
  CHECK(loops > 1000);
  CHECK(wrong == 0);
}

TEST_CASE("thread pool, modelled: the real pool's pieces, all on the caller, and the loops' account") {
  for (int threads : {2, 3, 16})
    for (int64_t n : {2, 7, 16, 17, 100, 1000, 12345})
      for (bool balanced : {false, true}) {
        CAPTURE(threads);
        CAPTURE(n);
        CAPTURE(balanced);
        ThreadPool real(threads), modelled(threads, ThreadPool::Model::Simulated);
        CHECK(modelled.simulated());
        CHECK(modelled.size() == threads);
        CHECK(pieces_of(modelled, n, balanced) == pieces_of(real, n, balanced));
        const auto caller = std::this_thread::get_id();
        std::atomic<double> sink{0};
        modelled.parallel_for(n, [&](int64_t b, int64_t e) {
          CHECK(std::this_thread::get_id() == caller);
          double x = 0;
          for (int64_t i = b; i < e; ++i)
            for (int k = 0; k < 200; ++k) x += double(i ^ k) * 1e-9;
          sink.store(sink.load() + x);
        }, balanced);
        const LoopAccount& a = modelled.account();
        CHECK(a.loops == 2);
        CHECK(a.work_s > 0);
        CHECK(a.critical_s <= a.work_s);
        CHECK(a.work_s <= a.inside_s);
        CHECK(a.critical_s >= a.work_s / threads * (1 - 1e-9));
        CHECK(real.account().loops == 0);
      }
}

TEST_CASE("thread pool, modelled: a loop takes its busiest thread's time as the pool hands pieces out") {
  const double one[] = {3, 1, 1};  // one piece a thread: the longest piece
  CHECK(modelled_loop_seconds(one, 3) == 3);
  CHECK(modelled_loop_seconds(one, 4) == 3);
  // balanced, 2 threads: 5 | 1, then 2 -> thread 1 (3), 2 -> thread 1 (5), 1 -> thread 0 (the lower
  // index of a tie: 6), 1 -> 1 (6), 1 -> 0 (7), 1 -> 1 (7)
  const double balanced[] = {5, 1, 2, 2, 1, 1, 1, 1};
  CHECK(modelled_loop_seconds(balanced, 2) == 7);
  const double late[] = {1, 1, 4, 1, 1, 1};  // 1 | 1, 4 -> 0 (5), 1 -> 1, 1 -> 1, 1 -> 1 (4)
  CHECK(modelled_loop_seconds(late, 2) == 5);
  CHECK(modelled_loop_seconds(late, 1) == 9);
}
