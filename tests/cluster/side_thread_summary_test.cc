// A long run's ITL summary is computed on a second thread (sim/cluster/simulation.cc,
// kSideThreadRecords = 50,000 completed requests); CAPSIM_THREADS=1 keeps it on the run's own
// thread. Every number the simulation returns must be the same either way (bit for bit).
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "sim/cluster/simulation.h"
#include "sim/workload/generators.h"
#include "tests/cluster/result_fingerprint.h"
#include "tests/engine/test_support.h"

using namespace capsim;
using namespace capsim::test;

TEST_CASE("end-of-run ITL summary: a second thread gives the same result as one", "[simulation][threads]") {
  // 60,000 short requests (64 in / 6 out) at 400 req/s on one H100: past the 50,000 records
  // that start the side thread, and ~6 tokens each, so ~300,000 inter-token gaps to sort.
  Deployment d = deployment("llama-3.1-8b", "h100-sxm", 1, "vllm", true);
  SimulationConfig c;
  c.groups = {ReplicaGroup{d, 1}};
  OpenLoopConfig o;
  o.stages = {{400.0, 0}};
  o.requests = 60000;
  o.lengths.prompt = Distribution::fixed(64, Distribution::Unit::kTokens);
  o.lengths.output = Distribution::parse("uniform:2:10", Distribution::Unit::kTokens, "test");
  o.seed = 11;
  // (This test process's CAPSIM_THREADS is left unset afterwards: nothing else here reads it.)
  ::setenv("CAPSIM_THREADS", "1", 1);
  auto w1 = make_open_loop(o);
  const SimulationResult one = simulate(c, *w1);
  ::unsetenv("CAPSIM_THREADS");
  auto w2 = make_open_loop(o);
  const SimulationResult two = simulate(c, *w2);
  REQUIRE(one.completed == 60000);
  CHECK(one.itl.count > 200000);
  const std::string a = fingerprint(one), b = fingerprint(two);
  if (a != b) FAIL(first_difference(a, "one thread", b, "two threads"));
}
