// `capsim calibrate runs` as a library call (sim/answers/calibrate_runs_answer.h): it recovers the
// step overhead that made tests/data/calibrate-runs/ (capsim's own runs with overhead.step 1.5 ms,
// make_runs.py), keeps it by cross-validation, and refuses to move a constant that the runs
// cannot improve on (runs made with the base profile itself).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "sim/answers/calibrate_runs_answer.h"
#include "sim/cluster/simulation.h"
#include "sim/core/error.h"
#include "sim/report/table.h"
#include "sim/scenario/scenario.h"

using capsim::calibration::BenchRun;
using capsim::answers::answer_calibrate_runs;
using capsim::answers::CalibrateRunsAnswer;
using capsim::answers::CalibrateRunsRequest;

namespace {

const std::string kDir = std::string(CAPSIM_DATA_DIR) + "/tests/data/calibrate-runs/";

CalibrateRunsRequest llama_on_h100() {
  CalibrateRunsRequest r;
  r.deployment.model = "llama-3.1-8b";
  r.deployment.card = "h100-sxm";
  r.date = "2026-12-06";
  return r;
}

// A run as capsim itself serves it with the shipped vllm profile, seed 1 (calibrate's own seed).
BenchRun base_profile_run(int concurrency, int prompt, int output) {
  capsim::scenario::ScenarioSpec s;
  s.deployment.model = "llama-3.1-8b";
  s.deployment.card = "h100-sxm";
  s.concurrency = concurrency;
  s.requests = 48;
  s.input_tokens = std::to_string(prompt);
  s.output_tokens = std::to_string(output);
  s.seed = 1;
  capsim::scenario::BuiltScenario b = capsim::scenario::build_scenario(s);
  const capsim::SimulationResult res = capsim::simulate(b.config, *b.workload);
  BenchRun r;
  r.file = r.label = "conc" + std::to_string(concurrency) + ".json";
  r.format = "vllm-bench";
  r.concurrency = concurrency;
  r.requests = r.completed = res.completed;
  r.mean_input_tokens = prompt;
  r.mean_output_tokens = output;
  r.ttft_ms = res.ttft.mean * 1e3;
  r.tpot_ms = res.tpot.mean * 1e3;
  r.e2e_ms = res.e2el.mean * 1e3;
  return r;
}

}  // namespace

TEST_CASE("calibrate runs recovers the step overhead that made the runs", "[calibrate-runs]") {
  CalibrateRunsRequest req = llama_on_h100();
  req.files = {kDir + "conc4.json", kDir + "conc16.json", kDir + "rate6.json", kDir + "guidellm.json"};
  const CalibrateRunsAnswer a = answer_calibrate_runs(req);
  REQUIRE(a.rows.size() == 5);
  REQUIRE(a.constants.size() == 2);
  const auto& step = a.constants[0];
  CHECK(step.field == "overhead.step");
  CHECK(step.kept);
  CHECK(step.oof_fitted < step.oof_base);
  // The files were made with 1.5 ms (the base profile says 0.6 ms); the grid is 50 us, the
  // replay's seed differs from the files' (1 vs 7) and the request path is fitted linearly.
  CHECK(a.step_s == Approx(1.5e-3).margin(0.1e-3));
  CHECK(a.warnings.empty());  // model_id meta-llama/Llama-3.1-8B-Instruct is llama-3.1-8b
  // The written profile's TPOT error is the replay's noise, not the 0.9 ms of step missing.
  for (const auto& m : a.errors) {
    if (m.metric == "TPOT") {
      CHECK(m.base > 0.05);
      CHECK(m.in_sample < 0.02);
      CHECK(m.out_of_fold < 0.02);
    }
  }
  CHECK(a.profile_yaml.find("step: {value: " + capsim::fmt("%.3f", a.step_s * 1e3) + "ms" + ", source: own-runs-step}") !=
        std::string::npos);
  CHECK(a.profile_yaml.find("own-runs-step: \"capsim calibrate runs, 2026-12-06, on conc4.json, conc16.json, "
                            "rate6.json, guidellm.json (5 runs of llama-3.1-8b on h100-sxm TP1, base profile vllm)") !=
        std::string::npos);
}

TEST_CASE("calibrate runs refuses a step overhead that does not beat the base profile out of fold",
          "[calibrate-runs]") {
  CalibrateRunsRequest req = llama_on_h100();
  req.runs = {base_profile_run(2, 512, 64), base_profile_run(8, 1024, 96), base_profile_run(24, 256, 128)};
  const CalibrateRunsAnswer a = answer_calibrate_runs(req);
  const auto& step = a.constants[0];
  CHECK_FALSE(step.kept);
  CHECK(step.oof_fitted >= step.oof_base);
  CHECK(a.step_s == 0.6e-3);  // calibration/engines/vllm.yaml's
  CHECK(a.profile_yaml.find("own-runs-step") == std::string::npos);
  CHECK(a.warnings.empty());  // the runs name no model
}

TEST_CASE("calibrate runs warns when a file's model_id is not the model it fits", "[calibrate-runs]") {
  CalibrateRunsRequest req = llama_on_h100();
  req.runs = {base_profile_run(2, 512, 64), base_profile_run(8, 1024, 96)};
  req.runs[0].model = "meta-llama/Llama-3.1-8B-Instruct";
  req.runs[1].model = "Qwen/Qwen2.5-7B-Instruct";
  const CalibrateRunsAnswer a = answer_calibrate_runs(req);
  REQUIRE(a.warnings.size() == 1);
  CHECK(a.warnings[0] == "conc8.json: the run served 'Qwen/Qwen2.5-7B-Instruct', not --model llama-3.1-8b "
                         "(meta-llama/Llama-3.1-8B); fitted as llama-3.1-8b");
  CHECK(a.profile_yaml.find("step: {value: 0.6ms, source: capsim-fit}") != std::string::npos);
}

TEST_CASE("calibrate runs fits nothing from one run: it cannot be cross-validated", "[calibrate-runs]") {
  CalibrateRunsRequest req = llama_on_h100();
  req.files = {kDir + "conc4.json"};
  CHECK_THROWS_WITH(answer_calibrate_runs(req),
                    "calibrate runs: 1 run given; leaving one run out needs at least 2, so nothing can be "
                    "cross-validated and nothing is fitted (give more result files, e.g. the same deployment at "
                    "other rates)");
}
