#include "sim/cost/serving_cost.h"

#include "sim/cost/lora_cost.h"
#include "sim/cost/registry.h"
#include "sim/cost/roofline_cost.h"
#include "sim/cost/speculative_cost.h"

namespace capsim {

std::shared_ptr<const StepCost> make_serving_cost(const Deployment& d) {
  std::shared_ptr<const StepCost> cost = make_step_cost(d);  // roofline, expert-parallel or pipeline
  if (d.speculative) cost = std::make_shared<SpeculativeCost>(cost, d);
  if (d.lora) cost = std::make_shared<LoraCost>(cost, d);
  return cost;
}

}  // namespace capsim
