// `capsim diff A.json B.json`: the metrics that moved, by how much, and the configuration
// changes that likely moved them; bad or foreign JSON exits 2 with a message naming the file.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/core/error.h"
#include "sim/report/diff.h"
#include "tests/check/cli_run.h"

using capsim_test::run_capsim;
using capsim_test::has;
using capsim_test::read_all;
using capsim_test::Run;
using capsim_test::Scratch;

namespace {

const char* kSmall =
    "simulate -q --model llama-3.1-8b --rate 4 --requests 200 --input-tokens 256 --output-tokens 64 "
    "--slo 'ttft_p95<=1s'";

std::string q(const std::string& path) { return "'" + path + "'"; }

}  // namespace

TEST_CASE("diff: another card moves the latencies, and the diff says the deployment changed", "[diff]") {
  Scratch tmp("diff");
  const std::string a = tmp.file("a.json"), b = tmp.file("b.json"), d = tmp.file("d.json");
  REQUIRE(run_capsim(std::string(kSmall) + " --card h100-sxm --json " + q(a)).status == 0);
  REQUIRE(run_capsim(std::string(kSmall) + " --card a100-80gb-sxm --json " + q(b)).status == 0);
  const Run r = run_capsim("diff " + q(a) + " " + q(b) + " --json " + q(d));
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(has(r.out, "configuration changed (the likely reasons):"));
  CHECK(has(r.out, "deployment[0].card: h100-sxm -> a100-80gb-sxm (the deployment changed)"));
  CHECK(has(r.out, "p95_ttft_ms"));
  CHECK(has(r.out, "change %"));
  const auto ja = nlohmann::json::parse(read_all(a)), jb = nlohmann::json::parse(read_all(b));
  const auto j = nlohmann::json::parse(read_all(d));
  CHECK(j.at("kind") == "simulate");
  bool found = false;
  for (const auto& m : j.at("metrics")) {
    if (m.at("path") != "p95_ttft_ms") continue;
    found = true;
    const double x = ja.at("p95_ttft_ms"), y = jb.at("p95_ttft_ms");
    CHECK(m.at("a").get<double>() == x);
    CHECK(m.at("b").get<double>() == y);
    CHECK(m.at("change").get<double>() == Approx(y - x));
    CHECK(m.at("change_percent").get<double>() == Approx(100 * (y - x) / x));
  }
  CHECK(found);
  // Configuration fields are not metrics: the card is listed once, as a configuration change.
  for (const auto& m : j.at("metrics")) CHECK(m.at("path").get<std::string>().rfind("deployment", 0) != 0);
}

TEST_CASE("diff: only the seed changed: sampling noise, the same file: identical", "[diff]") {
  Scratch tmp("diff_seed");
  const std::string a = tmp.file("a.json"), b = tmp.file("b.json");
  REQUIRE(run_capsim(std::string(kSmall) + " --seed 1 --json " + q(a)).status == 0);
  REQUIRE(run_capsim(std::string(kSmall) + " --seed 2 --json " + q(b)).status == 0);
  const Run r = run_capsim("diff " + q(a) + " " + q(b));
  REQUIRE(r.status == 0);
  CHECK(has(r.out, "seed: 1 -> 2 (another random workload: metrics move by sampling noise alone)"));
  CHECK(has(r.out, "only the seed changed: the moves are sampling noise, not a change of capacity"));
  const Run same = run_capsim("diff " + q(a) + " " + q(a));
  REQUIRE(same.status == 0);
  CHECK(has(same.out, "identical: no metric moved and the configuration is the same"));
  CHECK(has(same.out, "0 metrics moved"));
}

TEST_CASE("diff: no configuration change but moved metrics points at capsim itself", "[diff]") {
  capsim::diff::Input a{"a.json", nlohmann::json::parse(R"({"scenario": "s", "deployment": [{"card": "h100-sxm"}],
      "capsim": {"preemptions": 0}, "seed": 1, "p95_ttft_ms": 100.0, "output_throughput": 50.0})"), "simulate"};
  capsim::diff::Input b = a;
  b.path = "b.json";
  b.json["p95_ttft_ms"] = 110.0;
  const auto d = capsim::diff::compare(a, b);
  REQUIRE(d.metrics.size() == 1);
  CHECK(d.metrics[0].path == "p95_ttft_ms");
  CHECK(d.metrics[0].change == Approx(10));
  CHECK(*d.metrics[0].change_percent == Approx(10));
  CHECK(d.unchanged == 2);  // output_throughput and capsim.preemptions (seed is configuration)
  const auto causes = capsim::diff::likely_causes(d);
  REQUIRE(causes.size() == 1);
  CHECK(has(causes[0], "the configuration is identical"));
  CHECK(has(causes[0], "capsim itself"));
}

TEST_CASE("diff: plan options are matched by deployment, not by rank", "[diff]") {
  const auto plan = [](double h100, bool with_4090) {
    nlohmann::json j = {{"scenario", "s"}, {"model", "m"}, {"slos", {"ttft_p95<=1s"}}, {"rejected", nlohmann::json::array()}};
    nlohmann::json opts = nlohmann::json::array();
    if (with_4090) opts.push_back({{"card", "rtx-4090"}, {"tp", 1}, {"weights", "bf16"}, {"kv_cache", "bf16"}, {"usd_per_hour", 0.7}});
    opts.push_back({{"card", "h100-sxm"}, {"tp", 1}, {"weights", "bf16"}, {"kv_cache", "bf16"}, {"usd_per_hour", h100}});
    j["options"] = opts;
    return j;
  };
  capsim::diff::Input a{"a.json", plan(2.0, false), "plan"};
  capsim::diff::Input b{"b.json", plan(2.5, true), "plan"};
  const auto d = capsim::diff::compare(a, b);
  REQUIRE(d.metrics.size() == 1);
  CHECK(d.metrics[0].path == "options[h100-sxm tp1 bf16/kv bf16].usd_per_hour");
  CHECK(*d.metrics[0].change_percent == Approx(25));
  REQUIRE(d.only_b.size() == 1);
  CHECK(d.only_b[0] == "options[rtx-4090 tp1 bf16/kv bf16]");
}

TEST_CASE("diff: compare and capacity answers from another seed are sampling noise, not capsim", "[diff]") {
  // Before, compare's JSON had no seed and capacity's first_seed was not configuration: a rerun
  // with --seed 2 was blamed on "capsim itself".
  Scratch tmp("diff_seed_kinds");
  for (const std::string& cmd : {std::string("compare --model llama-3.1-8b --rate 2 --requests 40 -d '1x h100-sxm' -q"),
                                std::string("capacity --model llama-3.1-8b --card h100-sxm --rate 2 --duration 60s "
                                            "--slo 'ttft_p95<=1s' -q")}) {
    INFO(cmd);
    const std::string a = tmp.file("a.json"), b = tmp.file("b.json");
    REQUIRE(run_capsim(cmd + " --seed 1 --json " + q(a)).status <= 1);
    REQUIRE(run_capsim(cmd + " --seed 2 --json " + q(b)).status <= 1);
    const Run r = run_capsim("diff " + q(a) + " " + q(b));
    REQUIRE(r.status == 0);
    CHECK(has(r.out, "seed: 1 -> 2 (another random workload: metrics move by sampling noise alone)"));
    CHECK(has(r.out, "only the seed changed: the moves are sampling noise, not a change of capacity"));
    CHECK_FALSE(has(r.out, "capsim itself"));
  }
}

TEST_CASE("diff: bad or foreign JSON exits 2 naming the file", "[diff][errors]") {
  Scratch tmp("diff_bad");
  const std::string good = tmp.file("good.json");
  REQUIRE(run_capsim(std::string(kSmall) + " --json " + q(good)).status == 0);
  const std::string broken = tmp.write("broken.json", "{\"scenario\": ");
  const std::string foreign = tmp.write("foreign.json", "{\"name\": \"not capsim\"}");
  const std::string plan = tmp.write("plan.json", R"({"scenario": "s", "options": [], "rejected": []})");
  Run r = run_capsim("diff " + q(good) + " " + q(broken));
  CHECK(r.status == 2);
  CHECK(r.err.rfind("capsim: error: " + broken + ": not JSON (", 0) == 0);
  r = run_capsim("diff " + q(foreign) + " " + q(good));
  CHECK(r.status == 2);
  CHECK(r.err == "capsim: error: " + foreign +
                     ": not a capsim result: expected the JSON of `capsim simulate --json` (or plan, capacity, "
                     "compare), an object with 'scenario' and 'deployment', 'options', 'curve' or 'deployments'\n");
  r = run_capsim("diff " + q(good) + " " + q(plan));
  CHECK(r.status == 2);
  CHECK(r.err == "capsim: error: " + plan + ": a plan result, and " + good +
                     " a simulate result; diff compares two results of the same command\n");
  r = run_capsim("diff " + q(good) + " " + q(tmp.file("missing.json")));
  CHECK(r.status == 2);
  CHECK(r.err == "capsim: error: " + tmp.file("missing.json") + ": cannot read file\n");
  CHECK(r.out.empty());
}

TEST_CASE("diff: a number beyond double's range, or nesting 100k deep, is an error naming the file",
          "[diff][errors]") {
  // Found by fuzz_json_results (crash-202f7b90...): nlohmann's out_of_range escaped as "number
  // overflow" without a file; a deep value overflowed the stack while its message was built.
  Scratch tmp("diff_bad");
  const std::string big = tmp.write("big.json", "{\"capsim\": {\"arrived\": 0.113046972e021331}}");
  try {
    capsim::diff::load_result(big);
    FAIL("no error");
  } catch (const capsim::Error& e) {
    CHECK(std::string(e.what()) ==
          big + ": not JSON ([json.exception.out_of_range.406] number overflow parsing "
                "'0.113046972e021331'); diff reads `capsim simulate --json FILE` (or plan, capacity, "
                "compare) results");
  }
  const std::string deep = tmp.write("deep.json", "{\"scenario\":\n" + std::string(100'000, '[') +
                                                      std::string(100'000, ']') + "}");
  const Run r = run_capsim("diff " + deep + " " + deep);
  CHECK(r.status == 2);
  CHECK(r.err == "capsim: error: " + deep + ":2: JSON nested deeper than 128 levels; capsim's JSON "
                 "inputs nest a few levels\n");
}
