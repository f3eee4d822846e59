// `capsim check` decides SLOs with the run's 95% interval: PASS inside the bound, FAIL outside,
// INCONCLUSIVE (exit 3) when the interval straddles it. The bounds here are derived from the
// interval a first run reports, so the test holds whatever the cost model's latencies are.
#include <catch2/catch.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/check/cli_run.h"

namespace {

using capsim_test::has;
using capsim_test::run_capsim;
using capsim_test::Scratch;

// 20 requests/s of 512/128 tokens on one H100 for 3 minutes (30 s warm-up): ~3,000 measured
// requests, a stable load (about a third of what the card decodes) whose TTFT still varies from
// batch to batch with the Poisson arrivals.
std::string scenario(const std::string& slo, const std::string& duration = "3min") {
  return "name: inconclusive-test\n"
         "model: llama-3.1-8b\n"
         "deployment: {card: h100-sxm, tp: 1, replicas: 1}\n"
         "workload: {rate: 20, duration: " + duration + ", warmup: 30s, prompt_tokens: 512, output_tokens: 128}\n"
         "slo: {" + slo + "}\n"
         "seed: 3\n";
}

std::string ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3fms", v);
  return buf;
}

}  // namespace

TEST_CASE("check: PASS, FAIL and INCONCLUSIVE follow the 95% interval", "[check][cli][steady]") {
  Scratch tmp("inconclusive");
  const std::string probe = tmp.write("probe.yaml", scenario("ttft_p95: 10s"));
  const auto sim = run_capsim("simulate " + probe + " -q --json -");
  INFO(sim.err);
  REQUIRE(sim.status == 0);
  const auto j = nlohmann::json::parse(sim.out);
  const auto& steady = j["capsim"]["steady_state"];
  REQUIRE(steady["analysed"].get<bool>());
  const auto& iv = steady["ttft"]["p95"];
  REQUIRE(iv["valid"].get<bool>());
  const double low = iv["low_ms"], high = iv["high_ms"];
  REQUIRE(low < high);

  // A bound in the middle of the interval: INCONCLUSIVE, exit 3, never PASS.
  const auto mid = run_capsim("check " + tmp.write("mid.yaml", scenario("ttft_p95: " + ms((low + high) / 2))) + " -q");
  CHECK(mid.status == 3);
  CHECK(has(mid.out, "INCONCLUSIVE"));
  CHECK_FALSE(has(mid.out, " PASS"));
  // Below the interval: FAIL, exit 1.
  const auto below = run_capsim("check " + tmp.write("low.yaml", scenario("ttft_p95: " + ms(low * 0.5))) + " -q");
  CHECK(below.status == 1);
  CHECK(has(below.out, "FAIL"));
  // Above it: PASS when the run settled (MSER-5), else INCONCLUSIVE.
  const auto above = run_capsim("check " + tmp.write("high.yaml", scenario("ttft_p95: " + ms(high * 1.5))) + " -q");
  CHECK(above.status == (steady["at_steady_state"].get<bool>() ? 0 : 3));

  // --until-conclusive doubles the run (3 -> 6 -> 12 min) while it stays inconclusive.
  const auto longer = run_capsim("check " + tmp.write("mid2.yaml", scenario("ttft_p95: " + ms((low + high) / 2))) +
                                 " -q --until-conclusive 12min --json -");
  REQUIRE((longer.status == 0 || longer.status == 1 || longer.status == 3));
  const auto lj = nlohmann::json::parse(longer.out);
  const int extended = lj["assertions"][0]["runs_extended"];
  CHECK((longer.status == 3 ? extended == 2 : extended >= 1));
}
