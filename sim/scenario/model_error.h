// capsim's own error as a model, beside each answer's simulation interval: the out-of-fold
// relative error of TTFT, TPOT and E2E per class of scenario, read from
// calibration/model-error.yaml (written by scripts/fit_model_error.py; format
// docs/data-formats.md#model-error). The simulation's 95% interval says how sure capsim is of its
// own number; this says how far that number has been from real servers of the same class.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sim/llm/deployment.h"

namespace capsim::scenario {

// What a scenario's model error depends on.
struct ErrorClass {
  std::string cost_source;   // "measured" (the card has kernel tables) or "roofline"
  std::string engine;        // the engine profile's name ("vllm", "lmdeploy", ...)
  std::string architecture;  // "dense" or "moe"
  // "cards with kernel tables, vllm, dense"; "any" levels read "any card", "any engine", "any model".
  std::string label() const;
};

// The class of a resolved deployment: its card's measured kernel tables, engine and model.
ErrorClass error_class(const Deployment& d);

struct ModelErrorStat {
  int runs = 0;
  double p50 = 0, p90 = 0;  // of the absolute relative error (0.14 = 14%)
  double bias = 0;          // mean signed error; + = capsim slower than measured
};

// One metric's error for a scenario's class, with the class it was taken from.
struct ModelError {
  std::string metric;   // "ttft", "tpot", "e2e"
  ErrorClass wanted;    // the scenario's class
  ErrorClass used;      // the level the numbers come from (wanted unless it had too few runs)
  ModelErrorStat stat;
  bool fallback() const { return used.label() != wanted.label(); }
  // "+-14% (p90, 12 runs out of fold)", with ", pooled: <used label>" on a fallback.
  std::string text() const;
};

class ModelErrorTable {
 public:
  // Throws capsim::Error naming the file and field for anything docs/data-formats.md refuses.
  static ModelErrorTable load(const std::string& path);
  static ModelErrorTable parse(const std::string& text, const std::string& path);

  // The error of `metric` ("ttft", "tpot", "e2e") for class `c`: the first of (cost source,
  // engine, architecture), (.., .., any), (.., any, any), (any, any, any) whose metric has at
  // least min_runs runs; nullopt when none has.
  std::optional<ModelError> find(const ErrorClass& c, const std::string& metric) const;

  const std::string& path() const { return path_; }
  const std::string& date() const { return date_; }
  int min_runs() const { return min_runs_; }

 private:
  struct Row {
    ErrorClass cls;
    std::map<std::string, ModelErrorStat> metrics;
  };
  std::string path_, date_;
  int min_runs_ = 0;
  std::vector<Row> rows_;
};

// calibration/model-error.yaml of the data root, read once (thread-safe); nullptr when the data
// root has no such file (the answers then say so). Throws capsim::Error for a bad file.
const ModelErrorTable* model_errors();

// The model-error metric an SLO's metric is judged by: ttft -> ttft, tpot and itl -> tpot,
// e2el -> e2e; nullopt for anything else.
std::optional<std::string> error_metric_of_slo(const std::string& slo_metric);

// The errors of ttft, tpot and e2e for `d`'s class, those the table has (empty without a table).
std::vector<ModelError> model_errors_for(const Deployment& d);

// One line for the readable answers: "model error for cards with kernel tables, vllm, dense (p90 of
// |error| out of fold): TTFT +-20% (13 runs), TPOT +-8% (13 runs), E2E +-8% (13 runs);
// calibration/model-error.yaml of 2026-12-06"; a metric taken from a wider class says "pooled
// over <that class>". Without the file, the line says the model error is unknown.
std::string model_error_line(const Deployment& d);

}  // namespace capsim::scenario
