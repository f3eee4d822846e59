// plan::drop_run_details (sim/plan/search.h): the planner keeps every reported option's runs
// without their per-request records and per-step distributions; everything a plan answer reads
// of a run must be what it was before.
#include <catch2/catch.hpp>

#include "sim/plan/search.h"
#include "sim/answers/simulate_report.h"

namespace {

using namespace capsim;

void same_percentiles(const Percentiles& a, const Percentiles& b) {
  CHECK(a.mean == b.mean);
  CHECK(a.median == b.median);
  CHECK(a.p90 == b.p90);
  CHECK(a.p95 == b.p95);
  CHECK(a.p99 == b.p99);
  CHECK(a.count == b.count);
}

}  // namespace

TEST_CASE("plan: a run without its details decides and reads as before", "[plan]") {
  scenario::ScenarioSpec s;
  s.deployment.model = "llama-3.1-8b";
  s.deployment.card = "l4";
  s.users = 40;
  s.think_time = "exponential:5s";
  s.turns = "geometric:3";
  s.system_prompt_tokens = 200;
  s.duration = "2min";
  s.warmup = "20s";
  s.slos = {scenario::parse_slo_expression("ttft_p95<=1s", "test"),
            scenario::parse_slo_expression("tpot_p95<=100ms", "test")};
  const plan::Evaluation full = plan::evaluate(s, 2, std::nullopt);
  REQUIRE(full.result.records.size() > 100);
  REQUIRE(full.result.replicas.size() == 2);
  REQUIRE_FALSE(full.result.replicas[0].stats.step_ms_distribution.empty());
  REQUIRE_FALSE(full.result.timeline.empty());

  SimulationResult r = full.result;
  plan::drop_run_details(r);
  CHECK(r.records.empty());
  CHECK(r.timeline.empty());
  // Their memory is given back too (capacity --replications keeps every run of its searches).
  CHECK(r.records.capacity() == 0);
  CHECK(r.timeline.capacity() == 0);
  for (const ReplicaSummary& x : r.replicas) {
    CHECK(x.stats.step_ms_distribution.empty());
    CHECK(x.stats.batch_sequences_distribution.empty());
    CHECK(x.stats.timeline.empty());
    CHECK(x.stats.timeline.capacity() == 0);
  }
  // What check_slos, binding_resource and the plan's JSON read.
  const plan::SloVerdict a = plan::check_slos(s, full.result, std::nullopt);
  const plan::SloVerdict b = plan::check_slos(s, r, std::nullopt);
  CHECK(a.decision == b.decision);
  CHECK(a.worst == b.worst);
  CHECK(a.worst_ratio == b.worst_ratio);
  REQUIRE(a.slos.size() == b.slos.size());
  for (std::size_t i = 0; i < a.slos.size(); ++i) {
    CHECK(a.slos[i].value == b.slos[i].value);
    CHECK(a.slos[i].low == b.slos[i].low);
    CHECK(a.slos[i].high == b.slos[i].high);
    CHECK(a.slos[i].why == b.slos[i].why);
  }
  CHECK(plan::binding_resource(full.result) == plan::binding_resource(r));
  same_percentiles(full.result.ttft, r.ttft);
  same_percentiles(full.result.tpot, r.tpot);
  same_percentiles(full.result.e2el, r.e2el);
  CHECK(full.result.goodput_fraction == r.goodput_fraction);
  CHECK(full.result.output_throughput == r.output_throughput);
  CHECK(full.result.steps == r.steps);
  CHECK(full.result.steady.settled == r.steady.settled);
  CHECK(full.result.steady.ttft.p95.estimate == r.steady.ttft.p95.estimate);
  for (std::size_t i = 0; i < r.replicas.size(); ++i) {
    CHECK(r.replicas[i].stats.busy_seconds == full.result.replicas[i].stats.busy_seconds);
    CHECK(r.replicas[i].stats.kv_used_fraction.peak() == full.result.replicas[i].stats.kv_used_fraction.peak());
  }
}
