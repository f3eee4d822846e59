#include "sim/engine/policies.h"

#include <stdexcept>

#include "sim/core/error.h"

namespace capsim {

const std::vector<PolicyInfo>& scheduler_policies() {
  static const std::vector<PolicyInfo> table = {
      {"vllm-v1", "vLLM V1: one token budget, decodes first, chunked prefill, FCFS admission",
       [] { return std::make_unique<VllmV1Policy>(); }},
      {"prefill-first", "vLLM V0 / Orca: whole prompts in prefill-only steps, else decode all",
       [] { return std::make_unique<PrefillFirstPolicy>(); }},
      {"sglang", "SGLang: prefill batches first, admission reserves new_token_ratio of running outputs, retraction",
       [] { return std::make_unique<SglangPolicy>(); }},
      {"static", "static batching: a batch starts together and runs until all finish",
       [] { return std::make_unique<StaticBatchPolicy>(); }},
  };
  return table;
}

void SchedulerPolicy::schedule_waiting(Replica&, StepPlan&, std::int64_t) {
  throw std::logic_error("schedule_waiting: only for policies whose decodes_then_admits() is true");
}

std::unique_ptr<SchedulerPolicy> make_policy(const std::string& name) {
  std::vector<std::string> names;
  for (const auto& p : scheduler_policies()) {
    if (p.name == name) return p.make();
    names.push_back(p.name);
  }
  throw Error("--scheduler: " + unknown_name_message("scheduler policy", name, names));
}

}  // namespace capsim
