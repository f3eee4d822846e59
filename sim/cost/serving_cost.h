// The step cost a replica of a deployment runs with: the model its parallelism needs
// (sim/cost/registry.h: roofline, expert-parallel or pipeline), wrapped by speculative
// decoding's and multi-LoRA's costs when the deployment enables them. With neither it is that
// model alone, so runs without them are unchanged.
#pragma once

#include <memory>

#include "sim/cost/step_cost.h"
#include "sim/llm/deployment.h"

namespace capsim {

// REQUIRES: d.validate() passed.
std::shared_ptr<const StepCost> make_serving_cost(const Deployment& d);

}  // namespace capsim
