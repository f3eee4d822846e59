// `capsim check` and capsim's model error (sim/scenario/model_error.h): every assertion that ran
// a simulation reports its class's error beside the SLO rows, and an assumptions file with
// `require_model_error: p90` makes an SLO's PASS require that it still holds when the latency
// (its 95% interval's upper end, else its value) is made worse by the class's p90 error:
// latency x (1 + p90) <= bound (docs/ci.md#model-error).
#pragma once

#include <string>
#include <yaml-cpp/yaml.h>

#include "sim/check/assumptions.h"
#include "sim/scenario/model_error.h"

namespace capsim::check {

// The file's `require_model_error` field: absent -> false, "p90" -> true; anything else throws
// capsim::Error naming the file and field with the accepted value.
bool parse_require_model_error(const YAML::Node& root, const std::string& path);

// Fills o.model_error_text and o.model_error_json from the assertion's first deployment group
// and, when `required`, turns each passing slo row that does not hold at `table`'s p90 error for
// that class (or whose metric has no model error there, or with no table) into a FAIL saying
// why. Does nothing to an assertion that ran no simulation. run_checks passes
// scenario::model_errors().
void apply_model_error(AssertionOutcome& o, bool required, const scenario::ModelErrorTable* table);

}  // namespace capsim::check
