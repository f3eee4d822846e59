#include "sim/cost/registry.h"

#include <functional>
#include <map>

#include "sim/core/error.h"
#include "sim/cost/pipeline_cost.h"
#include "sim/cost/roofline_cost.h"

namespace capsim {

namespace {

using Factory = std::function<std::shared_ptr<const StepCost>(const Deployment&)>;

const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> f = {
      {"roofline",
       [](const Deployment& d) -> std::shared_ptr<const StepCost> {
         if (d.pp > 1 || d.expert_parallel) {
           throw Error("cost model roofline: the deployment uses pipeline or expert parallelism; "
                       "use " + step_cost_model_name(d));
         }
         return std::make_shared<RooflineCost>(d);
       }},
      {"expert-parallel",
       [](const Deployment& d) -> std::shared_ptr<const StepCost> {
         if (!d.expert_parallel || d.pp > 1) {
           throw Error("cost model expert-parallel: needs --enable-expert-parallel and "
                       "--pipeline-parallel-size 1; use " + step_cost_model_name(d));
         }
         return std::make_shared<RooflineCost>(d);  // its MoE layers run ExpertParallelMoe
       }},
      {"pipeline",
       [](const Deployment& d) -> std::shared_ptr<const StepCost> {
         return std::make_shared<PipelineCost>(d);
       }},
  };
  return f;
}

}  // namespace

std::string step_cost_model_name(const Deployment& d) {
  if (d.pp > 1) return "pipeline";
  if (d.expert_parallel) return "expert-parallel";
  return "roofline";
}

std::vector<std::string> step_cost_model_names() {
  std::vector<std::string> out;
  for (const auto& [name, f] : factories()) out.push_back(name);
  return out;
}

std::shared_ptr<const StepCost> make_step_cost(const std::string& name, const Deployment& d) {
  const auto it = factories().find(name);
  if (it == factories().end()) {
    std::string accepted;
    for (const auto& n : step_cost_model_names()) accepted += (accepted.empty() ? "" : ", ") + n;
    throw Error("cost model '" + name + "' is unknown; accepted: " + accepted);
  }
  return it->second(d);
}

std::shared_ptr<const StepCost> make_step_cost(const Deployment& d) {
  return make_step_cost(step_cost_model_name(d), d);
}

}  // namespace capsim
