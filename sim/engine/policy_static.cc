// Static batching (TensorRT-LLM's gptSessionBenchmark, FasterTransformer): a batch of up to
// max_num_seqs requests starts together with all their prompts in one step, reserves KV for
// prompt + output up front, and decodes until every member has finished; nothing joins a
// running batch.
#include "sim/engine/policies.h"

namespace capsim {

void StaticBatchPolicy::schedule(Replica& r, StepPlan& plan) {
  auto& running = r.running();
  if (!running.empty()) {
    for (const std::int32_t slot : running) r.plan_item(plan, slot, 1);
    return;
  }
  auto& waiting = r.waiting();
  const SchedulerLimits& lim = r.limits();
  while (!waiting.empty() && static_cast<int>(running.size()) < lim.max_num_seqs) {
    const std::int32_t slot = waiting.front();
    if (!r.schedulable(r.seq(slot))) break;  // not yet seen by this step's scheduler
    Sequence& s = r.seq(slot);
    const std::int64_t whole = s.req.prompt_tokens + s.req.output_tokens;
    if (!r.admit(slot, 0, whole)) break;  // reserves the whole sequence
    waiting.pop_front();
    r.plan_item(plan, slot, s.pending());
  }
}

}  // namespace capsim
