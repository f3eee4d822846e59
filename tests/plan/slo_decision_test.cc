// plan::decide_slo (sim/plan/slo_verdict.cc): the reason given for an INCONCLUSIVE SLO states what
// decided it.
#include <catch2/catch.hpp>

#include "sim/plan/search.h"

namespace {

using namespace capsim;

// A settled run whose TTFT p95 over the whole measured window is `window_s`, with a steady-state
// estimate `estimate_s` in [low_s, high_s].
SimulationResult run(double window_s, double estimate_s, double low_s, double high_s) {
  SimulationResult r;
  r.completed = 1000;
  r.ttft.count = 1000;
  r.ttft.p95 = window_s;
  r.steady.analysed = true;
  r.steady.settled = true;
  r.steady.ttft.p95.estimate = estimate_s;
  r.steady.ttft.p95.low = low_s;
  r.steady.ttft.p95.high = high_s;
  r.steady.ttft.p95.valid = true;
  return r;
}

}  // namespace

TEST_CASE("decide_slo: a window over the bound with its steady state inside is inconclusive, and says so",
          "[answers][plan]") {
  const scenario::SloSpec slo{"ttft", "p95", 1.0};
  // Before, the reason read "the interval straddles the bound" of an interval wholly inside it.
  const plan::SloDecision inside = plan::decide_slo(slo, run(1.2, 0.8, 0.7, 0.9));
  CHECK(inside.decision == plan::Decision::kInconclusive);
  CHECK(inside.estimate == 0.8);
  CHECK(inside.why ==
        "ttft_p95 is 800.00 ms (95% interval 700.00 ms - 900.00 ms), inside its bound of 1.00 s, but 1.20 s over "
        "the whole measured window: its start, cut as warm-up by MSER-5, was over the bound; lengthen --warmup or "
        "run longer to decide");
  // An interval that does straddle the bound still says so.
  const plan::SloDecision straddles = plan::decide_slo(slo, run(1.2, 0.95, 0.8, 1.1));
  CHECK(straddles.decision == plan::Decision::kInconclusive);
  CHECK(straddles.why ==
        "ttft_p95 is 950.00 ms (95% interval 800.00 ms - 1.10 s): the interval straddles the bound of 1.00 s; "
        "run longer to decide");
  CHECK(plan::decide_slo(slo, run(0.9, 0.8, 0.7, 0.9)).decision == plan::Decision::kPass);
}

namespace {

// A run of `measured` requests after warm-up, too few for an interval (analyse_steady_state
// leaves analysed false below kMinSteadyStateObservations), whose TTFT p95 is `p95_s`.
SimulationResult short_run(std::size_t measured, double p95_s) {
  SimulationResult r;
  r.completed = static_cast<std::int64_t>(measured);
  r.ttft.count = measured;
  r.ttft.p95 = p95_s;
  r.steady.observations = measured;
  r.steady.analysed = false;
  return r;
}

}  // namespace

TEST_CASE("decide_slo: a run too short for an interval is no PASS, and a search may still steer by it",
          "[answers][plan]") {
  const scenario::SloSpec slo{"ttft", "p95", 1.0};
  // 150 measured requests, p95 0.4 s under a 1 s bound: before, PASS in simulate, compare and plan
  // while check said INCONCLUSIVE.
  const plan::SloDecision d = plan::decide_slo(slo, short_run(150, 0.4));
  CHECK(d.decision == plan::Decision::kInconclusive);
  CHECK(d.too_short);
  CHECK_FALSE(d.has_interval);
  CHECK(d.why ==
        "within its bound, but the run is too short for a 95% interval: 150 measured requests, fewer than the 200 a "
        "PASS needs (about 1.4x the measured window); run longer");
  // Over the bound it fails as before (the statistic alone decides a FAIL).
  const plan::SloDecision over = plan::decide_slo(slo, short_run(150, 1.5));
  CHECK(over.decision == plan::Decision::kFail);
  CHECK_FALSE(over.too_short);

  scenario::ScenarioSpec spec;
  spec.slos = {slo, scenario::SloSpec{"tpot", "p95", 0.1}};
  SimulationResult r = short_run(150, 0.4);
  r.tpot.count = 150;
  r.tpot.p95 = 0.05;
  const plan::SloVerdict v = plan::check_slos(spec, r, std::nullopt);
  CHECK(v.decision == plan::Decision::kInconclusive);
  CHECK(v.only_too_short());
  // The search's reading: both SLOs within their bounds by the statistic.
  const plan::SloVerdict s = plan::search_verdict(v);
  CHECK(s.met);
  CHECK(s.decision == plan::Decision::kPass);
  CHECK(s.slos.at(0).decision == plan::Decision::kPass);
  CHECK(s.slos.at(1).decision == plan::Decision::kPass);
  // A TPOT over its bound: FAIL, which no search reading turns into a pass.
  r.tpot.p95 = 0.2;
  const plan::SloVerdict f = plan::check_slos(spec, r, std::nullopt);
  CHECK(f.decision == plan::Decision::kFail);
  CHECK_FALSE(f.only_too_short());
  CHECK_FALSE(plan::search_verdict(f).met);
  // 200 measured requests are enough: the same run analysed (settled, an interval inside) passes.
  SimulationResult enough = run(0.4, 0.4, 0.3, 0.5);
  enough.steady.observations = 200;
  CHECK(plan::decide_slo(slo, enough).decision == plan::Decision::kPass);
}

TEST_CASE("decide_slo_replicated: seeds too short for an interval are no PASS either, and say how short",
          "[answers][plan]") {
  const scenario::SloSpec slo{"ttft", "p95", 1.0};
  const SimulationResult a = short_run(120, 0.40), b = short_run(90, 0.45), c = short_run(130, 0.42);
  const plan::SloDecision d = plan::decide_slo_replicated(slo, {&a, &b, &c});
  CHECK(d.decision == plan::Decision::kInconclusive);
  CHECK(d.too_short);
  CHECK(d.seeds == 3);
  // The fewest of the three seeds' measured requests is named.
  // 200 / 90 = 2.22: rounded up to a tenth.
  CHECK(d.why.find("but a replication is too short for its steady-state check: 90 measured requests, fewer than "
                   "the 200 a PASS needs (about 2.3x the measured window); run longer") != std::string::npos);
  // None measured: nothing to scale.
  CHECK(plan::too_short_text(0) == "0 measured requests, fewer than the 200 a PASS needs");
}
