// `capsim check` decides SLOs with the run's 95% interval: PASS inside the bound, FAIL outside,
// INCONCLUSIVE (exit 3) when the interval straddles it. The bounds here are derived from the
// interval a first run reports, so the test holds whatever the cost model's latencies are.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/check/cli_run.h"
#include "tests/check/xml_mini.h"

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
  const std::string mid_junit = tmp.file("mid.xml");
  const auto mid = run_capsim("check " + tmp.write("mid.yaml", scenario("ttft_p95: " + ms((low + high) / 2))) +
                              " -q --junit " + mid_junit);
  CHECK(mid.status == 3);
  CHECK(has(mid.out, "INCONCLUSIVE"));
  CHECK_FALSE(has(mid.out, " PASS"));
  // In JUnit the undecided row is an <error type="inconclusive">, counted as one error (not a
  // failure) by both the <testsuites> root and its <testsuite> (before, the root counted no
  // failure while the suite counted one).
  std::ifstream xml_in(mid_junit);
  const std::string xml((std::istreambuf_iterator<char>(xml_in)), std::istreambuf_iterator<char>());
  const auto root = capsim_test::XmlReader::parse(xml);
  CHECK(root->attr("failures") == "0");
  CHECK(root->attr("errors") == "1");
  const auto suites = root->all("testsuite");
  REQUIRE(suites.size() == 1);
  CHECK(suites[0]->attr("failures") == "0");
  CHECK(suites[0]->attr("errors") == "1");
  const auto cases = suites[0]->all("testcase");
  REQUIRE(cases.size() == 1);
  CHECK(cases[0]->all("failure").empty());
  REQUIRE(cases[0]->all("error").size() == 1);
  CHECK(cases[0]->all("error")[0]->attr("type") == "inconclusive");
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

TEST_CASE("check --replications: the interval over seeds worked from the seeds' own runs", "[check][cli][steady]") {
  // Four seeds (3, 4, 5, 6) of the same scenario: the interval is mean +/- t(3, 0.975) x sd / 2 of
  // the four runs' steady-state TTFT p95 estimates, each read from `simulate --seed S --json`.
  Scratch tmp("replications");
  const std::string file = tmp.write("rep.yaml", scenario("ttft_p95: 10s"));
  std::vector<double> est;
  for (int seed = 3; seed <= 6; ++seed) {
    const auto sim = run_capsim("simulate " + file + " -q --json - --seed " + std::to_string(seed));
    REQUIRE(sim.status == 0);
    est.push_back(nlohmann::json::parse(sim.out)["capsim"]["slos"][0]["estimate_ms"].get<double>() / 1e3);
  }
  double mean = 0, var = 0;
  for (double x : est) mean += x;
  mean /= 4;
  for (double x : est) var += (x - mean) * (x - mean);
  const double half = 3.182446305284263 * std::sqrt(var / 3 / 4);  // t(3, 0.975)
  const auto r = run_capsim("check " + file + " -q --replications 4 --json -");
  INFO(r.err);
  REQUIRE((r.status == 0 || r.status == 3));
  const auto out = nlohmann::json::parse(r.out);
  const auto& row = out["assertions"][0]["checks"][0];
  CHECK(row["low"].get<double>() == Approx(std::max(0.0, mean - half)).epsilon(1e-9));
  CHECK(row["high"].get<double>() == Approx(mean + half).epsilon(1e-9));
  CHECK(has(row["measured_text"].get<std::string>(), "over 4 seeds"));
}
