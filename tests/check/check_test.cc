// `capsim check` as CI runs it: the built binary on assumptions files written here, its exit
// status (0 all hold, 1 one fails, 2 bad input), its table, its JUnit XML (parsed and checked
// against the structure CI viewers read) and JSON; baselines with hand-computed margins; and the
// messages for bad input, pinned from sim/check/assumptions.cc.
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <set>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/check/assumptions.h"
#include "tests/check/cli_run.h"
#include "tests/check/xml_mini.h"

using capsim_test::run_capsim;
using capsim_test::has;
using capsim_test::read_all;
using capsim_test::Run;
using capsim_test::Scratch;
using capsim_test::XmlElement;
using capsim_test::XmlReader;

namespace {

// A small open-loop scenario: 4 requests/s for a minute on one H100 (a fraction of a second to
// run). A duration, not a request count: the capacity search needs a load that grows with the rate.
const char* kScenario =
    "name: check-test\n"
    "model: llama-3.1-8b\n"
    "deployment: {card: h100-sxm, tp: 1, replicas: 1}\n"
    "workload:\n"
    "  rate: 4\n"
    "  duration: 60s\n"
    "  prompt_tokens: 256\n"
    "  output_tokens: 64\n"
    "slo: {ttft_p95: 2s, tpot_p95: 200ms}\n"
    "seed: 7\n";

const char* kOnePassOneFail =
    "description: one assertion that holds, one that cannot\n"
    "assertions:\n"
    "  - name: holds\n"
    "    scenario: s.yaml\n"
    "    expect:\n"
    "      slo: {ttft_p95: 10s}\n"
    "      no_preemption: true\n"
    "      max_cost_usd_per_hour: 100\n"
    "  - name: cannot-hold\n"
    "    scenario: s.yaml\n"
    "    expect:\n"
    "      slo: {tpot_p95: 1us}\n";

std::string q(const std::string& path) { return "'" + path + "'"; }

// Checks the JUnit structure GitHub Actions and GitLab read: <testsuites> root with tests and
// failures totals; <testsuite name tests failures> whose counts match its <testcase>s; every
// <testcase> has name, classname and time; a failing one has <failure message=...>.
void check_junit(const XmlElement& root, int tests, int failures) {
  REQUIRE(root.name == "testsuites");
  CHECK(root.attr("tests") == std::to_string(tests));
  CHECK(root.attr("failures") == std::to_string(failures));
  int all = 0, failed = 0;
  for (const XmlElement* suite : root.all("testsuite")) {
    CHECK_FALSE(suite->attr("name").empty());
    const auto cases = suite->all("testcase");
    int suite_failed = 0;
    for (const XmlElement* c : cases) {
      CHECK_FALSE(c->attr("name").empty());
      CHECK_FALSE(c->attr("classname").empty());
      REQUIRE(c->has("time"));
      CHECK(std::stod(c->attr("time")) >= 0);
      const auto f = c->all("failure");
      CHECK(f.size() <= 1);
      if (!f.empty()) {
        ++suite_failed;
        CHECK_FALSE(f[0]->attr("message").empty());
      }
    }
    CHECK(suite->attr("tests") == std::to_string(cases.size()));
    CHECK(suite->attr("failures") == std::to_string(suite_failed));
    all += static_cast<int>(cases.size());
    failed += suite_failed;
  }
  CHECK(all == tests);
  CHECK(failed == failures);
}

}  // namespace

TEST_CASE("check: one assertion holds, one fails: exit 1, a table, JUnit XML and JSON", "[check]") {
  Scratch tmp("check");
  tmp.write("s.yaml", kScenario);
  const std::string file = tmp.write("a.yaml", kOnePassOneFail);
  const std::string junit = tmp.file("junit.xml"), json = tmp.file("check.json");
  const Run r = run_capsim("check " + q(file) + " -q --junit " + q(junit) + " --json " + q(json));
  INFO(r.out << r.err);
  REQUIRE(r.status == 1);
  CHECK(r.err.empty());
  CHECK(has(r.out, "assertion"));
  CHECK(has(r.out, "margin"));
  CHECK(has(r.out, "PASS"));
  CHECK(has(r.out, "FAIL"));
  CHECK(has(r.out, "1 of 4 checks fail"));
  CHECK(has(r.out, "FAIL cannot-hold / slo tpot_p95: tpot_p95 is "));

  // JUnit: well-formed, and the structure CI viewers read.
  const std::string xml = read_all(junit);
  REQUIRE_FALSE(xml.empty());
  CHECK(xml.rfind("<?xml version=\"1.0\" encoding=\"UTF-8\"?>", 0) == 0);
  std::unique_ptr<XmlElement> root;
  REQUIRE_NOTHROW(root = XmlReader::parse(xml));
  check_junit(*root, 4, 1);
  const auto suites = root->all("testsuite");
  REQUIRE(suites.size() == 2);
  CHECK(suites[0]->attr("name") == "holds");
  CHECK(suites[0]->attr("failures") == "0");
  CHECK(suites[1]->attr("name") == "cannot-hold");
  const auto cases = suites[1]->all("testcase");
  REQUIRE(cases.size() == 1);
  CHECK(cases[0]->attr("name") == "slo tpot_p95");
  CHECK(cases[0]->attr("classname") == "capsim.check.cannot-hold");
  const auto failure = cases[0]->all("failure");
  REQUIRE(failure.size() == 1);
  CHECK(failure[0]->attr("message").rfind("tpot_p95 is ", 0) == 0);
  CHECK(has(failure[0]->attr("message"), ", over its bound of 1.0 us by "));
  CHECK(failure[0]->attr("type") == "slo");

  // JSON: the same verdicts, numbers in SI units.
  const auto j = nlohmann::json::parse(read_all(json));
  CHECK(j.at("passed") == false);
  CHECK(j.at("tests") == 4);
  CHECK(j.at("failures") == 1);
  REQUIRE(j.at("assertions").size() == 2);
  const auto& holds = j["assertions"][0];
  CHECK(holds.at("passed") == true);
  REQUIRE(holds.at("checks").size() == 3);
  const auto& slo = holds["checks"][0];
  CHECK(slo.at("kind") == "slo");
  CHECK(slo.at("unit") == "s");
  CHECK(slo.at("limit").get<double>() == 10.0);
  // margin = (limit - measured) / limit
  CHECK(slo.at("margin").get<double>() ==
        Approx((10.0 - slo.at("measured").get<double>()) / 10.0).epsilon(1e-12));
  CHECK(holds["checks"][1].at("kind") == "no_preemption");
  CHECK(holds["checks"][1].at("measured").get<double>() == 0);
  const auto& cost = holds["checks"][2];
  CHECK(cost.at("kind") == "max_cost_usd_per_hour");
  CHECK(cost.at("item") == "1x h100-sxm");
  CHECK(cost.at("margin").get<double>() == Approx((100 - cost.at("measured").get<double>()) / 100));
}

TEST_CASE("check: a baseline within the tolerance holds, one outside fails, by hand-computed margins",
          "[check][baseline]") {
  Scratch tmp("baseline");
  const std::string scenario = tmp.write("s.yaml", kScenario);
  // The run the assertions will reproduce (same scenario, same seed: identical numbers).
  const std::string run = tmp.file("run.json");
  REQUIRE(run_capsim("simulate -q " + q(scenario) + " --json " + q(run)).status == 0);
  const nlohmann::json measured = nlohmann::json::parse(read_all(run));
  const double ttft = measured.at("p95_ttft_ms").get<double>();
  const double out = measured.at("output_throughput").get<double>();
  REQUIRE(ttft > 0);
  REQUIRE(out > 0);

  // Within: the run is 5% slower (TTFT) and has 5% less throughput than the baseline.
  nlohmann::json within = measured;
  within["p95_ttft_ms"] = ttft / 1.05;
  within["output_throughput"] = out / 0.95;
  tmp.write("within.json", within.dump(2));
  // Outside: TTFT 20% above the baseline's; throughput exactly at the baseline.
  nlohmann::json outside = measured;
  outside["p95_ttft_ms"] = ttft / 1.2;
  tmp.write("outside.json", outside.dump(2));
  const auto assumptions = [&](const std::string& baseline) {
    return "assertions:\n"
           "  - name: no-regression\n"
           "    scenario: s.yaml\n"
           "    expect:\n"
           "      baseline: {file: " + baseline + ", tolerance: 10%, metrics: [p95_ttft_ms, output_throughput]}\n";
  };

  SECTION("within 10%: exit 0") {
    const std::string file = tmp.write("a.yaml", assumptions("within.json"));
    const std::string json = tmp.file("c.json");
    const Run r = run_capsim("check -q " + q(file) + " --json " + q(json));
    INFO(r.out << r.err);
    REQUIRE(r.status == 0);
    const auto j = nlohmann::json::parse(read_all(json));
    const auto& rows = j["assertions"][0]["checks"];
    REQUIRE(rows.size() == 2);
    // Latency: limit = baseline x 1.10 = ttft x 1.10/1.05; margin = 1 - 1.05/1.10 = 4.545...%.
    CHECK(rows[0].at("item") == "p95_ttft_ms");
    CHECK(rows[0].at("limit").get<double>() == Approx(ttft * 1.10 / 1.05).epsilon(1e-12));
    CHECK(rows[0].at("margin").get<double>() == Approx(1 - 1.05 / 1.10).epsilon(1e-9));
    CHECK(rows[0].at("passed") == true);
    // Throughput: limit = baseline x 0.90 = out x 0.90/0.95; margin = 0.95/0.90 - 1 = 5.556%.
    CHECK(rows[1].at("item") == "output_throughput");
    CHECK(rows[1].at("limit").get<double>() == Approx(out * 0.90 / 0.95).epsilon(1e-12));
    CHECK(rows[1].at("margin").get<double>() == Approx(0.95 / 0.90 - 1).epsilon(1e-9));
    CHECK(rows[1].at("passed") == true);
    CHECK(has(r.out, "+4.5%"));
    CHECK(has(r.out, "+5.6%"));
  }
  SECTION("20% slower than the baseline: exit 1, margin 1 - 1.2/1.1 = -9.09%") {
    const std::string file = tmp.write("a.yaml", assumptions("outside.json"));
    const std::string json = tmp.file("c.json");
    const Run r = run_capsim("check -q " + q(file) + " --json " + q(json));
    INFO(r.out << r.err);
    REQUIRE(r.status == 1);
    const auto j = nlohmann::json::parse(read_all(json));
    const auto& rows = j["assertions"][0]["checks"];
    CHECK(rows[0].at("passed") == false);
    CHECK(rows[0].at("margin").get<double>() == Approx(1 - 1.2 / 1.1).epsilon(1e-9));
    CHECK(rows[1].at("passed") == true);  // throughput equal to the baseline's: 10% headroom
    CHECK(rows[1].at("margin").get<double>() == Approx(1 / 0.9 - 1).epsilon(1e-9));
    CHECK(has(r.out, "-9.1%"));
    CHECK(has(r.out, "FAIL no-regression / baseline p95_ttft_ms: p95_ttft_ms is "));
    CHECK(has(r.out, "20.0% above the baseline's"));
  }
}

TEST_CASE("check: capacity, plan, memory and flag kinds on one small scenario", "[check]") {
  Scratch tmp("kinds");
  tmp.write("s.yaml", kScenario);
  const std::string file = tmp.write(
      "a.yaml",
      "assertions:\n"
      "  - name: kinds\n"
      "    scenario: s.yaml\n"
      "    workload: {duration: 80s}\n"        // an override of the scenario file (>= 200 measured requests)
      "    expect:\n"
      "      min_rate: 2\n"
      "      fits_in_memory: {context: 8192}\n"
      "      plan_cheapest_max_usd_per_hour: {max_usd_per_hour: 50, cards: [h100-sxm, a100-80gb-sxm], tp: [1]}\n"
      "  - name: too-much\n"
      "    model: llama-3.1-70b\n"                // inline scenario fields
      "    deployment: {card: rtx-4090}\n"
      "    workload: {rate: 1, requests: 10}\n"
      "    expect:\n"
      "      fits_in_memory: true\n");
  const std::string json = tmp.file("c.json");
  const Run r = run_capsim("check -q " + q(file) + " --json " + q(json));
  INFO(r.out << r.err);
  REQUIRE(r.status == 1);
  const auto j = nlohmann::json::parse(read_all(json));
  const auto& rows = j["assertions"][0]["checks"];
  REQUIRE(rows.size() == 3);
  CHECK(rows[0].at("kind") == "min_rate");
  CHECK(rows[0].at("unit") == "requests/s");
  CHECK(rows[0].at("passed") == true);
  CHECK(rows[0].at("measured").get<double>() >= 2);
  CHECK(rows[1].at("kind") == "fits_in_memory");
  CHECK(rows[1].at("passed") == true);
  CHECK(rows[1].at("limit").get<double>() == 8192);
  CHECK(rows[2].at("kind") == "plan_cheapest_max_usd_per_hour");
  CHECK(rows[2].at("passed") == true);
  CHECK(rows[2].at("measured").get<double>() <= 50);
  const auto& too_much = j["assertions"][1]["checks"][0];
  CHECK(too_much.at("passed") == false);
  CHECK(has(too_much.at("message").get<std::string>(), "rtx-4090: "));
}

TEST_CASE("check: bad input exits 2 with a message naming file: field, and writes nothing", "[check][errors]") {
  Scratch tmp("bad");
  const std::string scenario = tmp.write("s.yaml", kScenario);
  const std::string run = tmp.file("run.json");
  REQUIRE(run_capsim("simulate -q " + q(scenario) + " --json " + q(run)).status == 0);
  nlohmann::json other = nlohmann::json::parse(read_all(run));
  other["scenario"] = "chatbot-500-users";
  tmp.write("other-scenario.json", other.dump());
  nlohmann::json other_card = nlohmann::json::parse(read_all(run));
  other_card["deployment"][0]["card"] = "a100-80gb-sxm";
  tmp.write("other-card.json", other_card.dump());
  const std::string junit = tmp.file("junit.xml");
  const std::string json = tmp.file("c.json");
  const auto expect_2 = [&](const std::string& name, const std::string& yaml, const std::string& message) {
    const std::string file = tmp.write(name, yaml);
    const Run r = run_capsim("check -q " + q(file) + " --junit " + q(junit) + " --json " + q(json));
    INFO(yaml);
    CHECK(r.status == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "capsim: error: " + file + message + "\n");
    CHECK_FALSE(std::filesystem::exists(junit));
    CHECK_FALSE(std::filesystem::exists(json));
  };
  const std::string head = "assertions:\n  - name: x\n    scenario: s.yaml\n    expect:\n";
  expect_2("kind.yaml", head + "      max_latency: 1s\n",
           ": assertions[0].expect.max_latency: unknown assertion kind 'max_latency'; accepted: slo, min_users, "
           "min_rate, max_cost_usd_per_hour, no_preemption, fits_in_memory, plan_cheapest_max_usd_per_hour, baseline");
  expect_2("other.yaml", head + "      baseline: {file: other-scenario.json, tolerance: 10%}\n",
           ": assertions[0].expect.baseline.file: " + tmp.file("other-scenario.json") +
               " is a baseline of another scenario: its scenario is 'chatbot-500-users', this assertion's is "
               "'check-test'");
  expect_2("card.yaml", head + "      baseline: {file: other-card.json, tolerance: 10%}\n",
           ": assertions[0].expect.baseline.file: " + tmp.file("other-card.json") +
               " is a baseline of another scenario: its deployment[0].card is 'a100-80gb-sxm', this assertion's "
               "is 'h100-sxm'");
  expect_2("tolerance.yaml", head + "      baseline: {file: run.json, tolerance: -5%}\n",
           ": assertions[0].expect.baseline.tolerance: '-5%' is negative; a tolerance is >= 0, e.g. 10%");
  expect_2("metric.yaml", head + "      baseline: {file: run.json, tolerance: 5%, metrics: [mfu_percent]}\n",
           ": assertions[0].expect.baseline.metrics[0]: 'mfu_percent' has no known direction; write "
           "{name: mfu_percent, better: lower} or {name: mfu_percent, better: higher}");
  expect_2("flag.yaml", head + "      no_preemption: false\n",
           ": assertions[0].expect.no_preemption: 'false' asserts nothing; write `no_preemption: true` or leave it out");
  expect_2("users.yaml", head + "      min_users: 100\n",
           ": assertions[0].expect.min_users: the workload has no users or concurrency (it is an open loop at a "
           "rate, a trace or offline); use min_rate for requests/s");
  expect_2("field.yaml", head + "      slo: {ttft_p95: 1s}\n    colour: blue\n",
           ": assertions[0]: unknown field 'colour'; accepted: name, description, model, deployment, engine, "
           "router, workload, slo, seed, references, notes, serving, disaggregation, speculative, lora, scenario, expect");
  expect_2("dup.yaml", head + "      slo: true\n  - name: x\n    scenario: s.yaml\n    expect: {slo: true}\n",
           ": assertions[1].name: 'x' is used by an earlier assertion");
  // Malformed YAML: YamlDoc's file:line:column message.
  const std::string bad = tmp.write("malformed.yaml", "assertions:\n  - name: [unclosed\n");
  const Run r = run_capsim("check -q " + q(bad));
  CHECK(r.status == 2);
  CHECK(r.err.rfind("capsim: error: " + bad + ":", 0) == 0);
  CHECK(has(r.err, ": malformed YAML: "));
}

TEST_CASE("check: tolerance and metric directions", "[check][baseline]") {
  using capsim::check::higher_is_worse;
  using capsim::check::parse_tolerance;
  CHECK(parse_tolerance("10%", "t") == Approx(0.10));
  CHECK(parse_tolerance("0.1", "t") == Approx(0.10));
  CHECK(parse_tolerance("0%", "t") == 0);
  CHECK_THROWS_WITH(parse_tolerance("-1%", "f: t"), "f: t: '-1%' is negative; a tolerance is >= 0, e.g. 10%");
  // A bare number is a fraction up to 1: "10" would be +1000% and let any regression pass.
  CHECK(parse_tolerance("1", "t") == 1);
  CHECK_THROWS_WITH(parse_tolerance("10", "f: t"),
                    "f: t: '10' as a fraction is 1000%; write 10% for a percentage (a bare number is a "
                    "fraction, accepted 0 to 1)");
  CHECK(parse_tolerance("150%", "t") == Approx(1.5));
  CHECK_THROWS_WITH(parse_tolerance("ten", "f: t"),
                    "f: t: 'ten' is not a tolerance; write a percentage like 10% (or a fraction, 0.1)");
  CHECK(higher_is_worse("p95_ttft_ms") == true);
  CHECK(higher_is_worse("capsim.preemptions") == true);
  CHECK(higher_is_worse("output_throughput") == false);
  CHECK(higher_is_worse("request_goodput") == false);
  CHECK(higher_is_worse("capsim.goodput_fraction") == false);
  CHECK_FALSE(higher_is_worse("capsim.mfu").has_value());
}

TEST_CASE("check: workloads/assumptions.yaml (the repository's own CI) is valid", "[check]") {
  // Loading validates every assertion, scenario and baseline without simulating.
  const auto a = capsim::check::load_assumptions(std::string(CAPSIM_DATA_DIR) + "/workloads/assumptions.yaml");
  CHECK(a.assertions.size() >= 4);
  std::set<std::string> kinds;
  for (const auto& x : a.assertions) {
    for (const auto& e : x.expect) kinds.insert(e.kind);
  }
  for (const char* k : {"slo", "no_preemption", "max_cost_usd_per_hour", "fits_in_memory", "baseline"}) {
    CHECK(kinds.count(k) == 1);
  }
}
