// `check`'s require_model_error: p90 (sim/check/model_error_requirement.h), with the hand-written
// tests/data/model-error-tiny.yaml: Llama-3.1-8B on an H100 SXM under vLLM is "cards with kernel
// tables, vllm, dense", whose TTFT p90 error there is 15%.
#include <catch2/catch.hpp>
#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>

#include "sim/check/model_error_requirement.h"
#include "sim/core/error.h"
#include "tests/check/cli_run.h"

using capsim::check::AssertionOutcome;
using capsim::check::Row;

namespace {

const std::string kTiny = std::string(CAPSIM_DATA_DIR) + "/tests/data/model-error-tiny.yaml";

// An assertion whose simulation "ran" and whose ttft_p95 row passed with its interval's upper
// end at `high` against a 1 s bound (the numbers are set, not simulated).
AssertionOutcome passed_ttft(double high) {
  capsim::scenario::ScenarioSpec s;
  s.deployment.model = "llama-3.1-8b";
  s.deployment.card = "h100-sxm";
  s.rate = "1";
  s.requests = 10;
  AssertionOutcome o;
  o.name = "chat";
  o.built = std::make_shared<capsim::scenario::BuiltScenario>(capsim::scenario::build_scenario(s));
  o.result = std::make_shared<capsim::SimulationResult>();
  Row r;
  r.assertion = "chat";
  r.kind = "slo";
  r.item = "ttft_p95";
  r.unit = "s";
  r.measured = high - 0.05;
  r.limit = 1.0;
  r.high = high;
  r.passed = true;
  o.rows.push_back(r);
  return o;
}

}  // namespace

TEST_CASE("check: require_model_error fails 0.9 s against 1 s at a 15% p90, passes 0.8 s", "[check][model_error]") {
  const auto table = capsim::scenario::ModelErrorTable::load(kTiny);
  AssertionOutcome at_09 = passed_ttft(0.9);
  capsim::check::apply_model_error(at_09, true, &table);
  CHECK_FALSE(at_09.rows[0].passed);  // 0.9 x 1.15 = 1.035 > 1
  CHECK(capsim_test::has(at_09.rows[0].message, "not at capsim's model error (require_model_error: p90)"));
  CHECK(capsim_test::has(at_09.rows[0].message, " x 1.15 = "));
  CHECK(capsim_test::has(at_09.rows[0].message, "cards with kernel tables, vllm, dense +-15% (p90, 6 runs out of fold)"));
  AssertionOutcome at_08 = passed_ttft(0.8);
  capsim::check::apply_model_error(at_08, true, &table);
  CHECK(at_08.rows[0].passed);  // 0.8 x 1.15 = 0.92 <= 1
  CHECK(at_08.rows[0].message.empty());
  // Not required: the row stays as the simulation decided it; the class is still reported.
  AssertionOutcome free = passed_ttft(0.9);
  capsim::check::apply_model_error(free, false, &table);
  CHECK(free.rows[0].passed);
  CHECK(free.model_error_json["class"]["label"] == "cards with kernel tables, vllm, dense");
  CHECK(free.model_error_json["required"] == false);
  // Required with no table: no margin can be shown, so no PASS.
  AssertionOutcome none = passed_ttft(0.5);
  capsim::check::apply_model_error(none, true, nullptr);
  CHECK_FALSE(none.rows[0].passed);
  CHECK(capsim_test::has(none.rows[0].message, "no model error for ttft_p95"));
}

TEST_CASE("check: require_model_error accepts p90 only", "[check][model_error]") {
  CHECK(capsim::check::parse_require_model_error(YAML::Load("require_model_error: p90"), "a.yaml"));
  CHECK_FALSE(capsim::check::parse_require_model_error(YAML::Load("description: x"), "a.yaml"));
  CHECK_THROWS_WITH(capsim::check::parse_require_model_error(YAML::Load("require_model_error: p95"), "a.yaml"),
                    Catch::StartsWith("a.yaml: require_model_error: 'p95' is not accepted; accepted: p90"));
}

TEST_CASE("check: a bad require_model_error is bad input (exit 2)", "[check][model_error][cli]") {
  capsim_test::Scratch tmp("moderr");
  const std::string file = tmp.file("a.yaml");
  std::ofstream(file) << "require_model_error: yes\nassertions:\n  - name: x\n    model: llama-3.1-8b\n"
                         "    card: h100-sxm\n    rate: 1\n    requests: 10\n    expect: {slo: {ttft_p95: 1s}}\n";
  const auto r = capsim_test::run_capsim("check '" + file + "'");
  CHECK(r.status == 2);
  CHECK(capsim_test::has(r.err, file + ": require_model_error: 'yes' is not accepted; accepted: p90"));
}
