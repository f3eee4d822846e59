// `diff`'s answer as every front end gives it: what moved between two results of the same
// command (simulate, plan, capacity or compare --json) and the configuration changes that likely
// moved it. `json` is exactly what `capsim diff A B --json -` prints (docs/json-output.md#diff);
// `text` what it prints without --json.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "sim/report/diff.h"

namespace capsim::answers {

struct DiffAnswer {
  nlohmann::json json;
  std::string text;
};

// `min_percent` (>= 0, finite) hides metrics that moved less. Throws capsim::Error for a negative
// or non-finite min_percent ("--min-change: ...") and when the two results are of different
// commands.
DiffAnswer answer_diff(const diff::Input& a, const diff::Input& b, double min_percent);

}  // namespace capsim::answers
