// The step-cost models, registered by name (docs/cost-model.md#models):
//   roofline         one TP group runs every layer (the original model);
//   expert-parallel  the roofline with MoE layers over an expert-parallel group, DP attention
//                    and the all-to-all (sim/cost/expert_parallel.h);
//   pipeline         layers split over pipeline stages, micro-batches in flight, hand-offs and
//                    the bubble (sim/cost/pipeline_cost.h); its stages use expert parallelism
//                    when the deployment asks for it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sim/cost/step_cost.h"
#include "sim/llm/deployment.h"

namespace capsim {

// The model a deployment needs: pipeline when pp > 1, else expert-parallel with
// --enable-expert-parallel, else roofline.
std::string step_cost_model_name(const Deployment& d);
// REQUIRES: d.validate() passed. Builds the named model; throws capsim::Error for an unknown
// name (listing the accepted ones) or one the deployment does not describe.
std::shared_ptr<const StepCost> make_step_cost(const std::string& name, const Deployment& d);
std::shared_ptr<const StepCost> make_step_cost(const Deployment& d);
std::vector<std::string> step_cost_model_names();

}  // namespace capsim
