// plan --pd-search (sim/answers/pd_plan_answer.h): the prefill:decode split of a disaggregated
// deployment, why each split misses, and the aggregated deployment it is weighed against.
#include <catch2/catch.hpp>

#include <string>

#include "sim/core/error.h"
#include "sim/answers/pd_plan_answer.h"

namespace {

using namespace capsim;
using namespace capsim::scenario;
using namespace capsim::answers;

// Llama-3.1-8B, 8000-token prompts and 300-token answers at 3 requests/s on H100 SXM, KV over
// InfiniBand NDR, TTFT p95 <= 2 s and TPOT p95 <= 15 ms (docs/deployment-options.md).
PdPlanRequest long_prompts() {
  PdPlanRequest r;
  ScenarioSpec& s = r.base;
  s.deployment.model = "llama-3.1-8b";
  s.deployment.card = "h100-sxm";
  s.serving = "pd-disaggregated";
  s.decode_pool = ScenarioSpec::ExtraGroup{"h100-sxm", 1, 1, "auto", ""};
  s.kv_link = "ib-ndr-400";
  s.rate = "3";
  s.duration = "3min";
  s.warmup = "30s";
  s.input_tokens = "8000";
  s.output_tokens = "300";
  s.slos = {parse_slo_expression("ttft_p95<=2s", "--slo"), parse_slo_expression("tpot_p95<=15ms", "--slo")};
  r.max_cards = 4;
  return r;
}

}  // namespace

TEST_CASE("plan --pd-search: the cheapest split, against aggregated serving on the same cards", "[pd]") {
  const PdPlanAnswer a = answer_pd_plan(long_prompts());
  // The smallest total, 2 GPUs, has one split (1 prefill + 1 decode), and it meets both SLOs,
  // so the search stops there: one split run, and it is the answer.
  REQUIRE(a.splits.size() == 1);
  REQUIRE(a.best == 0);
  CHECK(a.splits[0].prefill == 1);
  CHECK(a.splits[0].decode == 1);
  CHECK(a.splits[0].cards == 2);
  CHECK(a.splits[0].why == "meets every SLO");
  // Aggregated, every 8000-token prompt stalls the replica's running decodes for a ~0.2 s step,
  // so TPOT p95 holds 15 ms only with the load spread over 3 replicas: 3 GPUs against 2.
  REQUIRE(a.aggregated);
  CHECK(a.aggregated_label == "3x h100-sxm");
  CHECK(a.aggregated_usd_per_hour == Approx(1.5 * a.splits[0].usd_per_hour));
  CHECK(a.text.find("disaggregation is cheaper by 33%") != std::string::npos);
  // The answer's launch lines: one per pool, each with the NIXL connector.
  REQUIRE(a.json["launch"].size() == 2);
  CHECK(a.json["launch"][0]["line"].get<std::string>().find("--kv-transfer-config") != std::string::npos);
}

TEST_CASE("plan --pd-search: a split short of prefill says so", "[pd]") {
  // At 6 requests/s one prefill replica cannot keep up with 8000-token prompts (each ~0.2 s of
  // compute, 6 a second > 1 s of work per second): TTFT grows without bound, the split is
  // prefill-bound, and the next total adds prefill replicas.
  PdPlanRequest r = long_prompts();
  r.base.rate = "6";
  r.max_cards = 3;
  const PdPlanAnswer a = answer_pd_plan(r);
  REQUIRE(!a.splits.empty());
  CHECK(a.splits[0].prefill == 1);
  CHECK(a.splits[0].why.find("misses ttft_p95") == 0);
  CHECK(a.splits[0].why.find("prefill-bound, add prefill") != std::string::npos);
}

TEST_CASE("plan --pd-search: bad input is refused before any simulation", "[pd]") {
  PdPlanRequest r = long_prompts();
  r.base.serving = "aggregated";
  r.base.decode_pool.reset();
  CHECK_THROWS_WITH(answer_pd_plan(r), Catch::StartsWith("--pd-search: give the pools' cards and TP"));
  r = long_prompts();
  r.base.slos.clear();
  CHECK_THROWS_WITH(answer_pd_plan(r), Catch::StartsWith("--slo: plan --pd-search needs at least one SLO"));
  r = long_prompts();
  r.total_cards = 1;
  CHECK_THROWS_WITH(answer_pd_plan(r), Catch::StartsWith("--pd-total: 1 GPUs cannot hold one prefill"));
}
