// calibration/model-error.yaml's reader, the class lookup with its fallback, and plan's margin
// rule (latency x (1 + p90) <= bound), on the hand-written tests/data/model-error-tiny.yaml.
#include <catch2/catch.hpp>

#include <string>

#include "sim/core/error.h"
#include "sim/plan/model_error_margin.h"
#include "sim/scenario/model_error.h"

using capsim::Error;
using capsim::scenario::ErrorClass;
using capsim::scenario::ModelErrorTable;

namespace {

const std::string kTiny = std::string(CAPSIM_DATA_DIR) + "/tests/data/model-error-tiny.yaml";

std::string parse_error(const std::string& text) {
  try {
    ModelErrorTable::parse(text, "bad.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

capsim::plan::SloVerdict passing_ttft(double high, double bound) {
  capsim::plan::SloVerdict v;
  v.met = true;
  v.decision = capsim::plan::Decision::kPass;
  capsim::plan::SloDecision d;
  d.slo = "ttft_p95";
  d.bound = bound;
  d.value = d.estimate = high * 0.95;
  d.low = high * 0.9;
  d.high = high;
  d.has_interval = true;
  d.decision = capsim::plan::Decision::kPass;
  v.slos.push_back(d);
  return v;
}

}  // namespace

TEST_CASE("model error: a class with enough runs is its own", "[model_error]") {
  const ModelErrorTable t = ModelErrorTable::load(kTiny);
  CHECK(t.min_runs() == 5);
  CHECK(t.date() == "2026-01-01");
  const auto e = t.find({"roofline", "vllm", "dense"}, "ttft");
  REQUIRE(e);
  CHECK_FALSE(e->fallback());
  CHECK(e->stat.runs == 12);
  CHECK(e->stat.p90 == Approx(0.15));
  CHECK(e->stat.bias == Approx(-0.02));
  CHECK(e->wanted.label() == "cards without kernel tables, vllm, dense");
  CHECK(e->text() == "+-15% (p90, 12 runs out of fold)");
}

TEST_CASE("model error: under min_runs the wider class's pooled error, level by level", "[model_error]") {
  const ModelErrorTable t = ModelErrorTable::load(kTiny);
  // tpot: (roofline, vllm, dense) has 3 runs and (roofline, vllm, any) 4, both under 5; the
  // next level, (roofline, any, any), has 9: its p90 12%.
  const auto tpot = t.find({"roofline", "vllm", "dense"}, "tpot");
  REQUIRE(tpot);
  CHECK(tpot->fallback());
  CHECK(tpot->used.label() == "cards without kernel tables, any engine, any model");
  CHECK(tpot->stat.runs == 9);
  CHECK(tpot->stat.p90 == Approx(0.12));
  CHECK(tpot->text() == "+-12% (p90, 9 runs out of fold; too few for this class, pooled over cards "
                        "without kernel tables, any engine, any model)");
  // e2e: nothing below the pool of every run.
  const auto e2e = t.find({"roofline", "vllm", "dense"}, "e2e");
  REQUIRE(e2e);
  CHECK(e2e->used.label() == "any card, any engine, any model");
  CHECK(e2e->stat.p90 == Approx(0.08));
  // An MoE scenario on a measured card: no such class in the file, so the pool's 20%.
  const auto moe = t.find({"measured", "lmdeploy", "moe"}, "ttft");
  REQUIRE(moe);
  CHECK(moe->stat.runs == 40);
  CHECK(moe->stat.p90 == Approx(0.20));
  CHECK(moe->wanted.label() == "cards with kernel tables, lmdeploy, MoE");
}

TEST_CASE("model error: a metric no level has enough runs of is none", "[model_error]") {
  const ModelErrorTable t = ModelErrorTable::parse(
      "generated_by: x\ndate: 2026-01-01\nmin_runs: 5\nclasses:\n"
      "  - {cost_source: any, engine: any, architecture: any, ttft: {runs: 4, p50: 0.1, p90: 0.2, bias: 0}}\n",
      "few.yaml");
  CHECK_FALSE(t.find({"measured", "vllm", "dense"}, "ttft"));
  CHECK_FALSE(t.find({"measured", "vllm", "dense"}, "e2e"));
}

TEST_CASE("model error: a bad file names the file and the field", "[model_error]") {
  const std::string head = "generated_by: x\ndate: 2026-01-01\nmin_runs: 5\nclasses:\n";
  CHECK(parse_error(head + "  - {cost_source: gpu, engine: vllm, architecture: dense}\n") ==
        "bad.yaml: classes[0].cost_source: 'gpu' is not accepted; accepted: measured, roofline, any");
  CHECK(parse_error(head + "  - {cost_source: any, engine: vllm, architecture: sparse}\n") ==
        "bad.yaml: classes[0].architecture: 'sparse' is not accepted; accepted: dense, moe, any");
  CHECK(parse_error(head + "  - {cost_source: any, engine: any, architecture: any, ttft: {runs: 3, p50: 0.1, "
                           "p90: -0.2, bias: 0}}\n") ==
        "bad.yaml: classes[0].ttft.p90: -0.2 is out of range; accepted: a fraction from 0 to 10");
  CHECK(parse_error(head + "  - {cost_source: any, engine: any, architecture: any, ttft: {runs: 3, p50: 0.3, "
                           "p90: 0.2, bias: 0}}\n")
            .rfind("bad.yaml: classes[0].ttft.p90:", 0) == 0);
  CHECK(parse_error(head + "  - {cost_source: any, engine: any, architecture: any, itl: {runs: 3}}\n")
            .find("bad.yaml: classes[0]: unknown field 'itl'") == 0);
  CHECK(parse_error("generated_by: x\ndate: 2026-01-01\nclasses: []\n") ==
        "bad.yaml: min_runs: missing; accepted: a whole number >= 1");
  CHECK_THROWS_WITH(ModelErrorTable::load("/nonexistent/model-error.yaml"),
                    "/nonexistent/model-error.yaml: cannot read file");
}

TEST_CASE("plan's margin: latency x (1 + p90) against the bound", "[model_error][plan]") {
  const ModelErrorTable t = ModelErrorTable::load(kTiny);
  const ErrorClass cls{"measured", "vllm", "dense"};  // ttft p90 15% (6 runs)
  // 0.9 s x 1.15 = 1.035 s > 1 s: meets the SLO, but not at capsim's p90 error.
  const auto at_09 = capsim::plan::model_error_margin(passing_ttft(0.9, 1.0), &t, cls);
  REQUIRE(at_09.holds);
  CHECK_FALSE(*at_09.holds);
  REQUIRE(at_09.slos.size() == 1);
  CHECK(at_09.slos[0].with_error == Approx(1.035));
  CHECK(at_09.text().rfind("fails: ttft_p95 ", 0) == 0);
  CHECK(at_09.text().find(" x 1.15 = ") != std::string::npos);
  // 0.8 s x 1.15 = 0.92 s <= 1 s.
  const auto at_08 = capsim::plan::model_error_margin(passing_ttft(0.8, 1.0), &t, cls);
  REQUIRE(at_08.holds);
  CHECK(*at_08.holds);
  CHECK(at_08.slos[0].with_error == Approx(0.92));
  CHECK(at_08.text() == "holds");
  // Without a table, or for an option that did not pass, there is nothing to say.
  CHECK_FALSE(capsim::plan::model_error_margin(passing_ttft(0.8, 1.0), nullptr, cls).holds);
  auto failed = passing_ttft(0.8, 1.0);
  failed.met = false;
  CHECK_FALSE(capsim::plan::model_error_margin(failed, &t, cls).holds);
}

TEST_CASE("model error: the SLO metrics it judges", "[model_error]") {
  CHECK(capsim::scenario::error_metric_of_slo("ttft") == std::optional<std::string>("ttft"));
  CHECK(capsim::scenario::error_metric_of_slo("tpot") == std::optional<std::string>("tpot"));
  CHECK(capsim::scenario::error_metric_of_slo("itl") == std::optional<std::string>("tpot"));
  CHECK(capsim::scenario::error_metric_of_slo("e2el") == std::optional<std::string>("e2e"));
  CHECK_FALSE(capsim::scenario::error_metric_of_slo("queue"));
}

TEST_CASE("model error: the shipped file reads and its pool answers every metric", "[model_error]") {
  // Every lookup ends at (any, any, any): it must hold all three metrics with enough runs, or
  // some scenario would get no model error at all.
  const ModelErrorTable t = ModelErrorTable::load(std::string(CAPSIM_DATA_DIR) + "/calibration/model-error.yaml");
  for (const char* m : {"ttft", "tpot", "e2e"}) {
    const auto e = t.find({"any", "any", "any"}, m);
    REQUIRE(e);
    CHECK(e->used.label() == "any card, any engine, any model");
    CHECK(e->stat.runs >= t.min_runs());
    CHECK(e->stat.p90 >= e->stat.p50);
  }
}
