// `capsim calibrate runs`: fit one deployment's engine overheads to serving runs its team measured
// with `vllm bench serve` or GuideLLM (docs/calibration.md#your-own-runs). Each run is simulated
// with its own load and lengths; overhead.step and the request path's per-prompt-token and
// per-sequence terms are fitted as scripts/fit_engine_constants.py fits them on the dev runs,
// cross-validated leaving one run out, and kept only where their out-of-fold error beats the base
// profile's value. The library writes no file: the profile is answer.profile_yaml.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/calibration/bench_runs.h"
#include "sim/core/cancel.h"
#include "sim/llm/deployment.h"
#include "sim/scenario/deployment_spec.h"

namespace capsim::answers {

struct CalibrateRunsRequest {
  std::vector<std::string> files;              // result files, read with load_bench_runs
  std::vector<calibration::BenchRun> runs;     // or the runs already read (then files is unused)
  scenario::DeploymentSpec deployment;                   // the deployment the runs measured; engine = the base profile
  std::string date;                            // YYYY-MM-DD for the sources; empty: today (UTC)
  std::string command_line;                    // recorded in the profile's header
  std::uint64_t seed = 1;
  CancelFlag cancel;  // set by a front end to stop the replays (HTTP: the client went away)
};

// One constant's verdict: fitted on every run, and the out-of-fold error of its target metrics
// (mean absolute percentage error over the held-out runs) with it fitted and at the base value.
struct ConstantFit {
  std::string field;   // "overhead.step" or "request_path" (its two per-unit terms together)
  std::string target;  // the metrics that decide it: "TPOT, E2E" or "TTFT"
  bool kept = false;
  double oof_fitted = 0, oof_base = 0;
};

// Mean absolute percentage error over the runs (fractions), per metric.
struct MetricErrors {
  std::string metric;  // TTFT, TPOT, E2E
  int runs = 0;        // runs that measured it
  double base = 0, in_sample = 0, out_of_fold = 0;
};

struct RunRow {
  calibration::BenchRun run;
  // Predicted means (ms) with the base profile and with the written profile.
  double base_ttft = 0, base_tpot = 0, base_e2e = 0;
  double ttft = 0, tpot = 0, e2e = 0;
};

struct CalibrateRunsAnswer {
  Deployment deployment;         // as resolved, with the base engine profile
  std::vector<RunRow> rows;
  std::vector<ConstantFit> constants;
  std::vector<MetricErrors> errors;
  // The written profile's values (seconds): the fitted ones where kept, else the base's.
  double step_s = 0, frontend_per_prompt_token_s = 0, return_per_sequence_s = 0;
  std::string date;
  std::vector<std::string> warnings;  // e.g. a file's model_id that does not name the model
  std::string profile_yaml;           // calibration/engines schema, loadable by --engine PATH
};

// Throws capsim::Error for bad input: a malformed file (naming it and the field), fewer than two
// runs (nothing can be cross-validated, so nothing is fitted), an unknown model/card/engine.
CalibrateRunsAnswer answer_calibrate_runs(const CalibrateRunsRequest& request);
nlohmann::json calibrate_runs_json(const CalibrateRunsAnswer& a, const std::optional<std::string>& out);
void print_calibrate_runs(std::ostream& os, const CalibrateRunsAnswer& a);

}  // namespace capsim::answers
