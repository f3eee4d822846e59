// The DP ranks of a DP-attention engine (an MoE model with --data-parallel-size and
// --enable-expert-parallel) step together in the simulation (cluster/cluster.cc start_lockstep,
// docs/cost-model.md#dp-lockstep); a dense model's DP ranks step apart, like replicas. Step
// times are worked from the cost model's own pieces (the formula is worked by hand in
// tests/cost/dp_lockstep_test.cc).
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "sim/cluster/simulation.h"
#include "sim/cost/expert_parallel.h"
#include "sim/cost/serving_cost.h"
#include "sim/workload/generators.h"
#include "tests/cluster/result_fingerprint.h"
#include "tests/engine/test_support.h"

namespace {

using namespace capsim;
using namespace capsim::test;

// `model` on two DP ranks of one H100 each (expert parallelism when `ep`), synchronous
// scheduling, no request path, an 8-sequence / 4,096-token budget.
Deployment dp2(const std::string& model, bool ep) {
  Deployment d = deployment(model, "h100-sxm", 1);
  d.dp = 2;
  d.expert_parallel = ep;
  d.limits = limits(8, 4096, false);
  d.validate();
  return d;
}

SimulationConfig one_engine(const Deployment& d) {
  SimulationConfig c;
  c.groups = {ReplicaGroup{d, 1}};
  c.router = "round-robin";
  return c;
}

BatchShape prefill(std::int64_t tokens) {
  BatchShape b;
  b.add_prefill_chunk(0, tokens, true);
  return b;
}

// Seconds as the simulation's clock keeps them (whole nanoseconds).
double on_clock(double seconds) { return to_seconds(from_seconds(seconds)); }

std::map<std::uint64_t, RequestRecord> by_id(const SimulationResult& r) {
  std::map<std::uint64_t, RequestRecord> out;
  for (const RequestRecord& q : r.records) out[q.id] = q;
  return out;
}

}  // namespace

TEST_CASE("DP lockstep: the ranks of a DP-attention engine step at the slower rank's time", "[dp-lockstep]") {
  // DeepSeek-V2-Lite (MLA + 64 routed experts) on DP 2 with expert parallelism. Round robin
  // sends A (2,048-token prompt) to rank 0 and B (16 tokens) to rank 1, both at 0, 4 output
  // tokens each. Step 1 prefills A on rank 0 and B on rank 1: as independent replicas B's first
  // token would come after its own 16-token step; in one engine both ranks end step 1 at
  //   T1 = lockstep_step_seconds(own A, own B)
  // and every later step (both decoding) ends for both at once, so A and B finish together.
  const Deployment d = dp2("deepseek-v2-lite", true);
  const auto cost = make_serving_cost(d);
  const double own_a = cost->totals(prefill(2048)).seconds;
  const double own_b = cost->totals(prefill(16)).seconds;
  const double t1 = lockstep_step_seconds(*cost, {{own_a, 2048}, {own_b, 16}});
  ScriptedWorkload w({request(0, 0, 2048, 4), request(1, 0, 16, 4)});
  const SimulationResult r = simulate(one_engine(d), w);
  const auto q = by_id(r);
  REQUIRE(q.size() == 2);
  CHECK(q.at(0).replica == 0);
  CHECK(q.at(1).replica == 1);
  CHECK(q.at(1).ttft_s == Approx(on_clock(t1)).epsilon(1e-12));
  CHECK(q.at(0).ttft_s == q.at(1).ttft_s);
  CHECK(q.at(1).ttft_s > 2 * on_clock(own_b));  // B waits for A's prefill
  CHECK(q.at(0).e2el_s == q.at(1).e2el_s);
  // Each rank ran its 4 steps (1 prefill + 3 decodes), each as long as the engine's.
  REQUIRE(r.replicas.size() == 2);
  CHECK(r.replicas[0].stats.steps == 4);
  CHECK(r.replicas[1].stats.steps == 4);
  CHECK(r.replicas[0].stats.busy_seconds == Approx(r.replicas[1].stats.busy_seconds));
}

TEST_CASE("DP lockstep: a lone request's rank waits for no one but steps with the idle rank's dummy batch",
          "[dp-lockstep]") {
  // A alone (2,048-token prompt, 1 output token) on rank 0; rank 1 idle runs vLLM's one-token
  // dummy batch: the step is lockstep_step_seconds(own A, dummy), A's TTFT.
  const Deployment d = dp2("deepseek-v2-lite", true);
  const auto cost = make_serving_cost(d);
  const double own_a = cost->totals(prefill(2048)).seconds;
  const double dummy = cost->totals(dummy_batch()).seconds;
  ScriptedWorkload w({request(0, 0, 2048, 1)});
  const SimulationResult r = simulate(one_engine(d), w);
  REQUIRE(r.records.size() == 1);
  CHECK(r.records[0].ttft_s == Approx(on_clock(lockstep_step_seconds(*cost, {{own_a, 2048}, {dummy, 1}}))).epsilon(1e-12));
  CHECK(r.replicas[1].stats.steps == 0);  // a dummy batch is no step of the rank
}

TEST_CASE("DP lockstep: a dense model's DP ranks step apart, like replicas", "[dp-lockstep]") {
  // Llama-3.1-8B on DP 2 (no expert parallelism: no layer is shared): B's first token comes
  // after its own 16-token step, whatever A's 2,048-token prefill on the other rank takes.
  const Deployment d = dp2("llama-3.1-8b", false);
  const auto cost = make_serving_cost(d);
  ScriptedWorkload w({request(0, 0, 2048, 4), request(1, 0, 16, 4)});
  const SimulationResult r = simulate(one_engine(d), w);
  const auto q = by_id(r);
  REQUIRE(q.size() == 2);
  CHECK(q.at(1).replica == 1);
  CHECK(q.at(1).ttft_s == Approx(on_clock(cost->totals(prefill(16)).seconds)).epsilon(1e-12));
  CHECK(q.at(0).ttft_s == Approx(on_clock(cost->totals(prefill(2048)).seconds)).epsilon(1e-12));
}

TEST_CASE("DP lockstep: skip-ahead on or off gives the same run", "[dp-lockstep]") {
  // The lockstep ranks never skip ahead (their steps take every rank's batch); a run with
  // skip-ahead on must still match stepping one by one bit for bit.
  const Deployment d = dp2("deepseek-v2-lite", true);
  SimulationConfig c = one_engine(d);
  c.router = "least-outstanding";
  OpenLoopConfig o;
  o.stages = {{20.0, 0}};
  o.requests = 120;
  o.lengths.prompt = Distribution::parse("lognormal:600:2400", Distribution::Unit::kTokens, "test");
  o.lengths.output = Distribution::parse("lognormal:60:240", Distribution::Unit::kTokens, "test");
  o.seed = 7;
  std::string prints[2];
  for (const bool skip : {false, true}) {
    c.skip_ahead = skip;
    auto w = make_open_loop(o);
    prints[skip ? 1 : 0] = fingerprint(simulate(c, *w));
  }
  CHECK(prints[0].size() > 1000);
  if (prints[0] != prints[1]) FAIL(first_difference(prints[0], "stepped", prints[1], "skipping"));
}
