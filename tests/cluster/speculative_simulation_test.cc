// Speculative decoding end to end (sim/cluster/simulation.cc with the real roofline): one request
// at a time, so every step after the prompt is one verify step, and TPOT follows from the step
// costs worked out with the same cost objects: TPOT_spec / TPOT_plain = t_verify / (t_decode x
// E[A]). Also: features off leave a run unchanged.
#include "sim/cluster/simulation.h"

#include <catch2/catch.hpp>

#include "sim/cost/roofline_cost.h"
#include "sim/cost/serving_cost.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using namespace capsim::test;

SimulationResult run_one_at_a_time(const Deployment& d) {
  std::vector<Request> rs;
  // Requests 10 s apart: each runs alone (prompt 100, output 400).
  for (int i = 0; i < 5; ++i) rs.push_back(request(static_cast<std::uint64_t>(i), static_cast<SimTime>(i) * 10'000 * kMs, 100, 400));
  ScriptedWorkload w(rs);
  SimulationConfig c;
  c.groups = {ReplicaGroup{d, 1}};
  return simulate(c, w);
}

}  // namespace

TEST_CASE("speculative simulation: batch-1 TPOT falls by E[A] x t_decode / t_verify", "[speculative][cluster]") {
  Deployment plain = deployment("llama-3.1-8b", "h100-sxm");
  Deployment spec = plain;
  SpeculativeConfig c;
  c.method = "eagle3";
  c.num_speculative_tokens = 3;
  c.acceptance = {0.7, 0.7, 0.7};  // E[A] = 1 + 0.7 + 0.49 + 0.343 = 2.533
  c.seed = 5;
  spec.speculative = c;
  spec.validate();
  const SimulationResult a = run_one_at_a_time(plain);
  const SimulationResult b = run_one_at_a_time(spec);
  REQUIRE(a.completed == 5);
  REQUIRE(b.completed == 5);
  // Step costs at a mid-answer context of 300 tokens.
  BatchShape d1, v1;
  d1.add_decode(300);
  v1.add_speculative_decode(300, 3);
  const double t_decode = RooflineCost(plain).seconds(d1);
  const double t_verify = make_serving_cost(spec)->seconds(v1);
  const double want = t_verify / (t_decode * 2.533);
  // 5 x 399 tokens after the first: ~790 draws of A (sd 1.2): E[A] within ~3% at 2 sigma.
  CHECK(b.tpot.mean / a.tpot.mean == Approx(want).epsilon(0.06));
  CHECK(b.tpot.mean < 0.6 * a.tpot.mean);
  // Every request still gets exactly its 400 tokens.
  CHECK(b.total_output_tokens == a.total_output_tokens);
  // Same seed, same result; the plain run is the run without the feature.
  const SimulationResult again = run_one_at_a_time(spec);
  CHECK(again.tpot.mean == b.tpot.mean);
  CHECK(again.e2el.p99 == b.e2el.p99);
}
