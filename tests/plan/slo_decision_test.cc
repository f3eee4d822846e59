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
