// The step cost a replica of a deployment runs with: the roofline, wrapped by speculative
// decoding's and multi-LoRA's costs when the deployment enables them. With neither it is the
// plain RooflineCost, so runs without them are unchanged.
#pragma once

#include <memory>

#include "sim/cost/step_cost.h"
#include "sim/llm/deployment.h"

namespace capsim {

// REQUIRES: d.validate() passed.
std::shared_ptr<const StepCost> make_serving_cost(const Deployment& d);

}  // namespace capsim
