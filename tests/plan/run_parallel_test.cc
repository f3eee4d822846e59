// run_parallel (sim/plan/search.h): plan's verification runs each option's routers in a
// run_parallel nested inside the options' own; with 2 threads that used to start 2 x 2 threads on
// 2 cores. Threads still working for any run_parallel now count against a call's `threads`.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "sim/plan/search.h"

namespace {

// The most jobs seen running at once.
struct Overlap {
  std::atomic<int> running{0}, most{0};
  void job() {
    const int now = ++running;
    int seen = most.load();
    while (now > seen && !most.compare_exchange_weak(seen, now)) {
    }
    // Long enough for every thread a run_parallel started to be inside a job at once.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    --running;
  }
};

// Waits (up to 10 s) until `n` callers have arrived: true when they were all inside at once.
bool all_arrive(std::atomic<int>& arrived, int n) {
  ++arrived;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (arrived.load() < n) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

TEST_CASE("run_parallel: nested calls never run more than `threads` jobs at once, each job once", "[plan][threads]") {
  Overlap overlap;
  std::vector<std::atomic<int>> ran(6);
  capsim::plan::run_parallel(
      2, 2,
      [&](std::size_t outer) {
        capsim::plan::run_parallel(
            3, 2,
            [&](std::size_t inner) {
              overlap.job();
              ++ran[outer * 3 + inner];
            },
            {});
      },
      {});
  // Before: each of the 2 outer threads started another for its inner jobs, 4 at once.
  CHECK(overlap.most.load() <= 2);
  for (const auto& r : ran) CHECK(r.load() == 1);
}

TEST_CASE("run_parallel: the outermost call still runs `threads` jobs at once", "[plan][threads]") {
  std::atomic<int> arrived{0};
  std::vector<int> together(2, 0);
  capsim::plan::run_parallel(2, 2, [&](std::size_t k) { together[k] = all_arrive(arrived, 2); }, {});
  CHECK(together == std::vector<int>{1, 1});
  // Once a call has ended its threads are free again for the next one.
  std::atomic<int> again{0};
  std::vector<int> next(2, 0);
  capsim::plan::run_parallel(2, 2, [&](std::size_t k) { next[k] = all_arrive(again, 2); }, {});
  CHECK(next == std::vector<int>{1, 1});
}

TEST_CASE("run_parallel: a job's error is rethrown after every other job ran", "[plan][threads]") {
  std::vector<std::atomic<int>> ran(5);
  CHECK_THROWS_WITH(capsim::plan::run_parallel(
                        5, 2,
                        [&](std::size_t k) {
                          ++ran[k];
                          if (k == 1) throw std::runtime_error("job 1 failed");
                        },
                        {}),
                    "job 1 failed");
  for (const auto& r : ran) CHECK(r.load() == 1);
  // The failed call gave its threads back.
  std::atomic<int> arrived{0};
  std::vector<int> together(2, 0);
  capsim::plan::run_parallel(2, 2, [&](std::size_t k) { together[k] = all_arrive(arrived, 2); }, {});
  CHECK(together == std::vector<int>{1, 1});
}
