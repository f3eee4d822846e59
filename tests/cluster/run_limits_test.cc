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
