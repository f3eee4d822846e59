// simulate's engine totals count every data-parallel rank: each rank is a replica of the run, and
// the totals once summed only the first `replicas` of them (rank 0 of a --dp 2 engine).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/check/cli_run.h"

TEST_CASE("simulate --dp 2: the mean step is every rank's busy time over every rank's steps", "[cli][simulate]") {
  const capsim_test::Run r =
      capsim_test::run_capsim("simulate --model llama-3.1-8b --card h100-sxm --dp 2 --rate 4 -n 200 --json -");
  REQUIRE(r.status == 0);
  const nlohmann::json c = nlohmann::json::parse(r.out).at("capsim");
  const nlohmann::json& ranks = c.at("replicas");
  REQUIRE(ranks.size() == 2);
  double busy = 0, steps = 0;
  for (const auto& rank : ranks) {
    busy += rank.at("busy_seconds").get<double>();
    steps += rank.at("steps").get<double>();
  }
  // Both ranks step (requests alternate between them), so rank 0 alone would differ.
  CHECK(ranks[1].at("steps").get<double>() > 0);
  CHECK(c.at("mean_step_ms").get<double>() == Approx(1e3 * busy / steps).epsilon(1e-9));
}
