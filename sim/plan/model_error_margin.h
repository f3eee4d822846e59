// Whether an option still meets its SLOs when capsim is as wrong as it has been for the option's
// class (sim/scenario/model_error.h): each latency SLO's 95% interval upper end (what a PASS
// rests on; the value itself without an interval) times 1 + the class's p90 error of that
// metric must stay at or below the bound. `plan` marks it per option, `check` can require it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/plan/search.h"
#include "sim/scenario/model_error.h"

namespace capsim::plan {

struct SloMargin {
  std::string slo;              // "ttft_p95"
  double bound = 0;             // seconds
  double latency = 0;           // the interval's upper end (seconds)
  std::optional<scenario::ModelError> error;  // none: the table has no error for the metric
  double with_error = 0;        // latency x (1 + p90)
  bool holds = false;
};

struct ModelErrorMargin {
  // true: every latency SLO holds with the error added; false: one does not; nullopt: the option
  // did not pass, or an SLO's metric has no model error (no table, or no runs of it).
  std::optional<bool> holds;
  std::vector<SloMargin> slos;  // the SLOs on ttft, tpot, itl and e2el
  // "holds", "fails: ttft_p95 0.9 s x 1.15 = 1.04 s > 1 s", "unknown: no model error for ...".
  std::string text() const;
};

// `table` may be null (no calibration/model-error.yaml): every SLO's error is then unknown.
ModelErrorMargin model_error_margin(const SloVerdict& verdict, const scenario::ModelErrorTable* table,
                                    const scenario::ErrorClass& cls);

}  // namespace capsim::plan
