// `fit`'s answer as every front end gives it: the memory plan of one deployment per GPU (weights,
// activations, runtime, KV cache), its KV capacity and, when it does not fit, the changes that
// would make it fit. `json` is exactly what `capsim fit --json -` prints
// (docs/json-output.md#fit).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/llm/deployment.h"
#include "sim/llm/memory_plan.h"
#include "sim/scenario/deployment_spec.h"

namespace capsim::answers {

struct FitAnswer {
  Deployment deployment;
  long long context = 0;  // tokens (prompt + output) of the concurrency figure
  MemoryPlan plan;
  // When it does not fit: (the change, as flags: "--kv-cache fp8", "--card h100-sxm"; its plan).
  std::vector<std::pair<std::string, MemoryPlan>> alternatives;
  nlohmann::json json;
};

// `context` unset: the deployment's max_model_len when set, else 4096 tokens. Throws
// capsim::Error for bad input.
FitAnswer answer_fit(const scenario::DeploymentSpec& spec, std::optional<long long> context);

}  // namespace capsim::answers
