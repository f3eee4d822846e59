// SimulationConfig::early_stop: a run that has missed a percentile SLO decisively ends at the
// first measured completion where, among at least 200 measured completions, more than
// 2 x (1 - q) of them took over 3x the bound; the plan then fails it (plan::check_slos).
#include <catch2/catch.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "sim/plan/search.h"
#include "sim/scenario/scenario.h"
#include "tests/cluster/result_fingerprint.h"

namespace {

using namespace capsim;

// Llama-3.1-8B on one L4 under 12 req/s of 512-in/256-out requests: several times what it
// serves, so TTFT grows through the run; SLO TTFT p95 <= 0.5 s.
scenario::ScenarioSpec overloaded() {
  scenario::ScenarioSpec s;
  s.name = "early-stop";
  s.deployment.model = "llama-3.1-8b";
  s.deployment.card = "l4";
  s.rate = "12";
  s.input_tokens = "512";
  s.output_tokens = "256";
  s.requests = 3000;
  s.slos = {scenario::parse_slo_expression("ttft_p95<=500ms", "test")};
  return s;
}

SimulationResult run(const scenario::ScenarioSpec& s, bool early) {
  scenario::BuiltScenario b = scenario::build_scenario(s);
  if (early) b.config.early_stop = plan::early_stop_rules(s);
  return simulate(b.config, *b.workload);
}

}  // namespace

TEST_CASE("early stop: rules from the SLOs", "[cluster][early-stop]") {
  scenario::ScenarioSpec s = overloaded();
  s.slos.push_back(scenario::parse_slo_expression("tpot_p99<=100ms", "test"));
  s.slos.push_back(scenario::parse_slo_expression("itl_p95<=100ms", "test"));   // pooled: none
  s.slos.push_back(scenario::parse_slo_expression("e2el_mean<=20s", "test"));   // a mean: none
  const std::vector<EarlyStop> r = plan::early_stop_rules(s);
  REQUIRE(r.size() == 2);
  CHECK(r[0].slo == "ttft_p95");
  CHECK(r[0].metric == EarlyStop::kTtft);
  CHECK(r[0].quantile == Approx(0.95));
  CHECK(r[0].bound_s == Approx(0.5));
  CHECK(r[1].slo == "tpot_p99");
  CHECK(r[1].quantile == Approx(0.99));
}

TEST_CASE("early stop: an overloaded run stops at the first completion the rule names", "[cluster][early-stop]") {
  const scenario::ScenarioSpec s = overloaded();
  const SimulationResult full = run(s, false);
  const SimulationResult early = run(s, true);
  CHECK(full.stopped_early.empty());
  CHECK(full.completed == 3000);
  CHECK(full.ttft.p95 > 1.5);  // the full run misses the bound too, by more than 3x
  REQUIRE_FALSE(early.stopped_early.empty());
  CHECK(early.stopped_slo == "ttft_p95");
  CHECK(early.stopped_early.rfind("ttft_p95: ", 0) == 0);
  const auto n = static_cast<std::size_t>(early.completed);
  CHECK(n >= 200);
  CHECK(n < 3000);
  // Replay the rule on the records in completion order (arrival + E2E): the run ended at the
  // first completion k >= 200 with more than 10% of the first k over 1.5 s (requests finishing
  // in that same step are recorded too).
  std::vector<std::pair<double, double>> done;  // (completion time, TTFT)
  for (const RequestRecord& r : early.records) done.push_back({r.arrival_s + r.e2el_s, r.ttft_s});
  std::stable_sort(done.begin(), done.end());
  std::size_t over = 0, first = 0;
  for (std::size_t k = 1; k <= done.size(); ++k) {
    over += done[k - 1].second > 1.5 ? 1 : 0;
    if (k >= 200 && static_cast<double>(over) > 0.1 * static_cast<double>(k)) {
      first = k;
      break;
    }
  }
  REQUIRE(first >= 200);
  CHECK(done.back().first == Approx(done[first - 1].first).margin(1e-9));
  CHECK(n - first < 256);  // at most one step's batch of other completions (max_num_seqs)
  // Until then both runs are the same run: every request the early run completed has the same
  // timings in the full run.
  std::size_t same = 0;
  for (const RequestRecord& r : early.records) {
    const auto it = std::lower_bound(full.records.begin(), full.records.end(), r.id,
                                     [](const RequestRecord& a, std::uint64_t id) { return a.id < id; });
    if (it != full.records.end() && it->id == r.id && it->ttft_s == r.ttft_s && it->e2el_s == r.e2el_s) ++same;
  }
  CHECK(same == n);
  // The plan's verdict: FAIL, saying why.
  const plan::SloVerdict v = plan::check_slos(s, early, std::nullopt);
  CHECK(v.decision == plan::Decision::kFail);
  REQUIRE(v.slos.size() == 1);
  CHECK(v.slos[0].why.rfind("missed decisively, ttft_p95: ", 0) == 0);
}

TEST_CASE("early stop: a run that meets its SLO runs to its end, unchanged", "[cluster][early-stop]") {
  scenario::ScenarioSpec s = overloaded();
  s.rate = "1";  // about a tenth of what one L4 serves
  s.requests = 400;
  const SimulationResult full = run(s, false);
  const SimulationResult early = run(s, true);
  CHECK(early.stopped_early.empty());
  CHECK(early.completed == 400);
  CHECK(early.ttft.p95 == full.ttft.p95);
  CHECK(early.e2el.mean == full.e2el.mean);
  CHECK(early.steps == full.steps);
  CHECK(full.ttft.p95 < 0.5);
}

// A run stopped early ends at the completion that stopped it. Skip-ahead must not run the
// replicas' steps past that instant (stepping one by one would not have run them): before, it
// did, and the run closed its statistics at the stop while a replica had recorded later steps
// (a negative last interval in the time-weighted statistics; an assertion in checked builds).
// Here every request misses a TPOT bound of 1 ms, so the run stops at its 200th measured
// completion, while the replica decodes an idle-queue batch that skip-ahead would step through.
TEST_CASE("early stop: skip-ahead stops where stepping one by one stops", "[cluster][early-stop]") {
  scenario::ScenarioSpec s = overloaded();
  s.rate = "1";
  s.requests = 400;
  s.slos = {scenario::parse_slo_expression("tpot_p95<=1ms", "test")};
  scenario::BuiltScenario b1 = scenario::build_scenario(s);
  b1.config.early_stop = plan::early_stop_rules(s);
  b1.config.skip_ahead = false;
  const SimulationResult stepped = simulate(b1.config, *b1.workload);
  scenario::BuiltScenario b2 = scenario::build_scenario(s);
  b2.config.early_stop = plan::early_stop_rules(s);
  b2.config.skip_ahead = true;
  const SimulationResult skipping = simulate(b2.config, *b2.workload);
  REQUIRE_FALSE(stepped.stopped_early.empty());
  CHECK(skipping.stopped_early == stepped.stopped_early);
  CHECK(stepped.completed >= 200);
  CHECK(stepped.completed < 400);
  CHECK(skipping.steps == stepped.steps);
  const std::string a = test::fingerprint(stepped), b = test::fingerprint(skipping);
  if (a != b) FAIL(test::first_difference(a, "stepped", b, "skipping"));
}
