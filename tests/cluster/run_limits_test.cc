// Run limits inside a simulation (sim/core/run_limits.h): a closed loop's size is not known up
// front, so the cluster stops it when arrivals pass the request limit; the cluster refuses too
// many replicas or cards before building any.
#include <catch2/catch.hpp>
#include <string>

#include "sim/cluster/simulation.h"
#include "sim/core/error.h"
#include "sim/core/run_limits.h"
#include "sim/workload/generators.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using Catch::Matchers::Contains;

// Restores a limit at scope exit (limits are process-wide).
struct LimitScope {
  LimitScope(RunLimit k, std::int64_t v) : kind(k), old(run_limit(k)) { set_run_limit(k, v); }
  ~LimitScope() { set_run_limit(kind, old); }
  RunLimit kind;
  std::int64_t old;
};

SimulationConfig one_replica(int replicas = 1) {
  SimulationConfig c;
  c.groups = {ReplicaGroup{capsim::test::deployment(), replicas}};
  return c;
}

}  // namespace

TEST_CASE("run limits: a closed loop stops when its arrivals pass the request limit",
          "[cluster][limits]") {
  ClosedLoopConfig cl;
  cl.users = 4;
  cl.think = Distribution::parse("1s", Distribution::Unit::kSeconds, "--think-time");
  cl.lengths.prompt = Distribution::fixed(64, Distribution::Unit::kTokens);
  cl.lengths.output = Distribution::fixed(8, Distribution::Unit::kTokens);
  cl.max_context = 4096;
  SimulationConfig c = one_replica();
  c.stop_arrivals = from_seconds(3600);  // 4 users for an hour: ~14,000 requests
  {
    const LimitScope scope(RunLimit::kRequests, 50);
    auto w = make_closed_loop(cl);
    try {
      simulate(c, *w);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK_THAT(e.what(), Contains("the workload: 51 requests is more than one run may ask for "
                                    "(at most 50 requests"));
    }
  }
  // Under the default limit the same run completes, every arrival ended.
  auto w = make_closed_loop(cl);
  const SimulationResult r = simulate(c, *w);
  CHECK(r.arrived > 1000);
  CHECK(r.completed + r.rejected == r.arrived);
}

TEST_CASE("run limits: too many replicas or cards are refused before any is built",
          "[cluster][limits]") {
  const LimitScope scope(RunLimit::kReplicas, 3);
  auto w = make_open_loop([] {
    OpenLoopConfig o;
    o.stages = {{1.0, 0}};
    o.requests = 1;
    o.lengths.prompt = Distribution::fixed(16, Distribution::Unit::kTokens);
    o.lengths.output = Distribution::fixed(4, Distribution::Unit::kTokens);
    return o;
  }());
  SimulationConfig c = one_replica(4);
  try {
    simulate(c, *w);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Contains("the cluster: 4 replicas is more than one run may ask for (at most 3"));
  }
  const LimitScope cards(RunLimit::kCards, 2);
  SimulationConfig three = one_replica(3);
  auto w2 = make_open_loop([] {
    OpenLoopConfig o;
    o.stages = {{1.0, 0}};
    o.requests = 1;
    o.lengths.prompt = Distribution::fixed(16, Distribution::Unit::kTokens);
    o.lengths.output = Distribution::fixed(4, Distribution::Unit::kTokens);
    return o;
  }());
  try {
    simulate(three, *w2);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Contains("the cluster: 3 cards is more than one run may ask for (at most 2"));
  }
}

TEST_CASE("run limits: the KV-cache bookkeeping a deployment implies is refused before any replica is built",
          "[cluster][limits][offload]") {
  // Llama-3.1-8B on one H100 with a 1e5 GiB CPU tier: 2 MiB blocks, 51,200,000 of them, whose
  // slots and hash table take 4,296,425,472 B when full (CpuKvTier::bookkeeping_bytes) — past
  // the 2 GiB default with the GPU cache's bookkeeping on top.
  Deployment d = capsim::test::deployment();
  d.limits.kv_offloading_size = 1e5;
  const MemoryPlan plan = plan_memory(d, 1, true);
  REQUIRE(plan.cpu_kv_blocks == 51'200'000);
  const double gpu = KvBlockManager::bookkeeping_bytes(plan.kv_blocks, true);
  CHECK(gpu < 16e6);  // one H100's GPU cache: tens of thousands of blocks, a few MB
  SimulationConfig c;
  c.groups = {ReplicaGroup{d, 1}};
  const std::string size = "100000 GiB is 51200000 CPU KV blocks per replica, x 1 replica: 4.0";
  const std::string over = "GiB of KV-cache bookkeeping is more than one run may ask for (at most 2.00 GiB of "
                           "KV-cache bookkeeping; such a run takes minutes and gigabytes); pass --allow-large";
  try {
    check_kv_bookkeeping(c, "s.yaml: engine.kv_offloading_size");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Contains("s.yaml: engine.kv_offloading_size: " + size));
    CHECK_THAT(e.what(), Contains(over));
  }
  // simulate() refuses it the same way, naming the flag, before building the replica.
  auto w = make_open_loop([] {
    OpenLoopConfig o;
    o.stages = {{1.0, 0}};
    o.requests = 1;
    o.lengths.prompt = Distribution::fixed(16, Distribution::Unit::kTokens);
    o.lengths.output = Distribution::fixed(4, Distribution::Unit::kTokens);
    return o;
  }());
  try {
    simulate(c, *w);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Contains("--kv-offloading-size: " + size));
  }
  // Within the limit: 8 GiB is 4096 blocks, 282,624 B.
  c.groups.front().deployment.limits.kv_offloading_size = 8;
  CHECK_NOTHROW(check_kv_bookkeeping(c));
  // Without a tier the GPU caches count: 3 replicas of 2.5 replicas' worth.
  SimulationConfig three = one_replica(3);
  const LimitScope scope(RunLimit::kKvBookkeepingBytes, static_cast<std::int64_t>(2.5 * gpu));
  try {
    check_kv_bookkeeping(three);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Contains("the cluster: 3 replicas x " + std::to_string(plan.kv_blocks) +
                                  " GPU KV blocks per replica: "));
  }
  CHECK_NOTHROW(check_kv_bookkeeping(one_replica(2)));
  // Past the 32-bit block ids: refused whatever the limits (block size 1: 128 KiB blocks,
  // 1e6 GiB / 128 KiB = 8,192,000,000).
  Deployment tiny = capsim::test::deployment();
  tiny.limits.block_size = 1;
  tiny.limits.kv_offloading_size = 1e6;
  SimulationConfig ids;
  ids.groups = {ReplicaGroup{tiny, 1}};
  const LimitScope lifted(RunLimit::kKvBookkeepingBytes, std::int64_t{1} << 62);
  try {
    check_kv_bookkeeping(ids);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Contains("--kv-offloading-size: 1000000 GiB is 8192000000 CPU KV blocks per replica; a "
                                  "replica's block ids hold at most 2147483647"));
  }
}
