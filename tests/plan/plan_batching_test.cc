// capsim plan's load-share search goes through its candidates in rounds of 4, cheapest per replica
// first; a round's limit (how many replicas are still worth searching) is the `top`-th cheapest
// option found before it. search_plan runs rounds together as one batch when their caps are
// certain before the rounds ahead of them end (PlanSpace::Batching::kWhileCertain): each earlier
// candidate of the batch adds at most one option, costing at least its price per replica, so the
// limit lies between two values computable before the batch runs, and a cap never decreases with
// the limit. This must give exactly the plan of waiting for every round's end.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "sim/plan/planner.h"
#include "sim/plan/prices.h"
#include "sim/scenario/catalogues.h"
#include "tests/plan/plan_scenarios.h"

namespace {

using namespace capsim;

// Everything the plan reports about a candidate that the batching could change.
std::vector<std::string> outcome_lines(const plan::PlanOutcome& o) {
  std::vector<std::string> out;
  for (const plan::Candidate& c : o.candidates) {
    std::string line = plan::label(c) + " | rejected " + std::to_string(c.rejected) + " | " + c.reason +
                       " | max " + std::to_string(c.max_replicas) + " | replicas " +
                       std::to_string(c.search.best.replicas) + " | estimate " + std::to_string(c.estimated_replicas) +
                       " | verified " + std::to_string(c.verified) + " " + c.router;
    for (const plan::Candidate::RouterTried& t : c.router_replicas) {
      line += " | " + t.router + " " + std::to_string(t.replicas) + "/" + std::to_string(t.at_least);
    }
    out.push_back(line);
  }
  for (const std::size_t i : o.ok) out.push_back("option " + plan::label(o.candidates[i]));
  return out;
}

}  // namespace

TEST_CASE("plan: batching the search's rounds while their caps are certain gives the round-by-round plan",
          "[plan][slow]") {
  // Llama-3.1-8B, open loop 20 req/s of 512 in / 128 out for 1 minute, TTFT p95 <= 500 ms, on ten
  // cards x TP 1, 2 x 16-bit and fp8 KV: 37 candidates that fit (10 rounds), so with --top 3 the
  // limit turns finite after the first rounds and the later rounds' caps depend on it.
  const scenario::ScenarioSpec base = plan_test::open_loop_8b("20", "1min", "ttft_p95<=500ms");
  plan::PlanSpace space;
  space.cards = {"t4", "l4", "a10g", "a10", "rtx-3090", "rtx-4090", "l40s", "a100-40gb-pcie", "a100-80gb-pcie",
                 "h100-pcie"};
  space.tps = {1, 2};
  space.max_cards = 8;
  space.top = 3;
  space.try_fp8_kv = true;
  space.routers = plan::routers_to_try(base);
  const PriceBook prices = load_prices(scenario::data_dir() + "/calibration/prices.yaml");

  space.batching = plan::PlanSpace::Batching::kRoundByRound;
  const plan::PlanOutcome one = plan::search_plan(base, space, prices, {});
  space.batching = plan::PlanSpace::Batching::kWhileUnbounded;
  const plan::PlanOutcome unbounded = plan::search_plan(base, space, prices, {});
  space.batching = plan::PlanSpace::Batching::kWhileCertain;
  const plan::PlanOutcome certain = plan::search_plan(base, space, prices, {});

  REQUIRE(one.searched >= 8);
  REQUIRE_FALSE(one.ok.empty());
  CHECK(outcome_lines(unbounded) == outcome_lines(one));
  CHECK(outcome_lines(certain) == outcome_lines(one));
  CHECK(certain.search_evaluations == one.search_evaluations);
  // One batch per round of 4 (skipped rounds included) without batching: 37 candidates, 10. The
  // first round already finds 3 options, so the unbounded rule batches nothing here; certain caps
  // batch rounds with a finite limit (6 batches when measured).
  CHECK(one.search_batches == (one.live.size() + 3) / 4);
  CHECK(unbounded.search_batches == one.search_batches);
  CHECK(certain.search_batches < unbounded.search_batches);
}
