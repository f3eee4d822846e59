// capsim plan's search — candidates by cost with branch and bound, replica counts estimated on
// load shares whose runs may stop early once they decisively miss an SLO (EarlyStop), then
// verified as the whole cluster from the estimate — against an exhaustive search that runs every
// candidate that fits as the whole cluster at 1, 2, ... replicas behind every router until it
// meets the SLOs. On small scenarios both must name the same cheapest option; and the plan must
// give the same options with its search runs stopping early or not (while some did stop), and with
// its search rounds batched or run one at a time (plan_batching_test.cc).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "sim/core/error.h"
#include "sim/llm/memory_plan.h"
#include "sim/plan/planner.h"
#include "sim/plan/prices.h"
#include "sim/scenario/catalogues.h"
#include "tests/plan/plan_scenarios.h"

namespace {

using namespace capsim;

struct Cheapest {
  double usd_per_hour = std::numeric_limits<double>::infinity();
  std::string card;
  int tp = 0, replicas = 0;
};

Cheapest exhaustive(const scenario::ScenarioSpec& base, const plan::PlanSpace& space, const PriceBook& prices,
                    const std::vector<std::string>& routers) {
  Cheapest best;
  for (const std::string& card : space.cards) {
    for (const int tp : space.tps) {
      scenario::ScenarioSpec s = base;
      s.deployment.card = card;
      s.deployment.tp = tp;
      double per_replica = 0;
      try {
        const Deployment d = s.deployment.resolve();
        if (!plan_memory(d, 1).fits) continue;
        per_replica = prices.usd_per_hour(d.card) * tp;
      } catch (const Error&) {
        continue;
      }
      for (int n = 1; n <= space.max_cards / tp; ++n) {
        bool met = false;
        for (const std::string& router : routers) {
          s.router = router;
          met = met || plan::evaluate(s, n, std::nullopt).verdict.met;
        }
        if (!met) continue;
        if (per_replica * n < best.usd_per_hour - 0.005) best = {per_replica * n, card, tp, n};
        break;
      }
    }
  }
  return best;
}

struct Listed {
  std::string label, router;
  int replicas;
  bool operator==(const Listed& o) const { return label == o.label && router == o.router && replicas == o.replicas; }
};

std::vector<Listed> listed(const plan::PlanOutcome& o) {
  std::vector<Listed> out;
  for (const std::size_t i : o.ok) {
    const plan::Candidate& c = o.candidates[i];
    out.push_back({plan::label(c), c.router, c.search.best.replicas});
  }
  return out;
}

void compare(const scenario::ScenarioSpec& base, plan::PlanSpace space) {
  const PriceBook prices = load_prices(scenario::data_dir() + "/calibration/prices.yaml");
  space.routers = plan::routers_to_try(base);
  const plan::PlanOutcome fast = plan::search_plan(base, space, prices, {});
  plan::PlanSpace full_space = space;
  full_space.early_stop = false;
  const plan::PlanOutcome full = plan::search_plan(base, full_space, prices, {});
  // Early stopping happened, and changed no option.
  CHECK(fast.stopped_early > 0);
  CHECK(full.stopped_early == 0);
  CHECK(listed(fast) == listed(full));
  // Search rounds batched while their caps are certain (the default) or each round alone: the same.
  plan::PlanSpace round_by_round = space;
  round_by_round.batching = plan::PlanSpace::Batching::kRoundByRound;
  CHECK(listed(plan::search_plan(base, round_by_round, prices, {})) == listed(fast));
  const Cheapest truth = exhaustive(base, space, prices, space.routers);
  REQUIRE(std::isfinite(truth.usd_per_hour));
  REQUIRE_FALSE(fast.ok.empty());
  const plan::Candidate& top = fast.candidates[fast.ok.front()];
  INFO("plan: " << plan::label(top) << " x" << top.search.best.replicas << "; exhaustive: " << truth.card << " tp"
                << truth.tp << " x" << truth.replicas);
  CHECK(top.option_usd_per_hour() == Approx(truth.usd_per_hour).margin(0.005));
}

}  // namespace

TEST_CASE("plan: the cheapest option of an exhaustive search, early stops or not (open loop)",
          "[plan][exhaustive][slow]") {
  const scenario::ScenarioSpec base = plan_test::open_loop_8b("6", "2min", "ttft_p95<=500ms");
  plan::PlanSpace space;
  space.cards = {"l4", "a10g", "rtx-4090", "l40s"};
  space.tps = {1, 2};
  space.max_cards = 6;
  space.top = 3;
  compare(base, space);
}

TEST_CASE("plan: the cheapest option of an exhaustive search, early stops or not (chat users)",
          "[plan][exhaustive][slow]") {
  scenario::ScenarioSpec base;
  base.deployment.model = "mistral-7b";
  base.users = 120;
  base.think_time = "exponential:10s";
  base.turns = "geometric:3";
  base.system_prompt_tokens = 200;
  base.duration = "3min";
  base.warmup = "30s";
  base.slos = {scenario::parse_slo_expression("ttft_p95<=1s", "test"),
               scenario::parse_slo_expression("tpot_p95<=100ms", "test")};
  plan::PlanSpace space;
  space.cards = {"l4", "a10g", "rtx-4090"};
  space.tps = {1, 2};
  space.max_cards = 6;
  space.top = 3;
  compare(base, space);
}
