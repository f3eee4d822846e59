// Prefill-first (vLLM V0's default without chunked prefill, and Orca-style iteration batching):
// when waiting requests fit, a step runs only their whole prompts; otherwise it decodes every
// running request, preempting the most recently admitted when blocks run out.
#include "sim/engine/policies.h"

namespace capsim {

void PrefillFirstPolicy::schedule(Replica& r, StepPlan& plan) {
  const SchedulerLimits& lim = r.limits();
  auto& running = r.running();
  auto& waiting = r.waiting();
  std::int64_t budget = lim.max_num_batched_tokens;
  while (!waiting.empty() && static_cast<int>(running.size()) < lim.max_num_seqs) {
    const std::int32_t slot = waiting.front();
    if (!r.schedulable(r.seq(slot))) break;  // not yet seen by this step's scheduler
    Sequence& s = r.seq(slot);
    const std::int64_t hits = r.lookup_hits(s);
    const std::int64_t want = s.tokens() - r.ready_tokens(s, hits);
    // A prompt longer than the whole budget still runs, alone, as V0 allowed up to max_model_len.
    if (want > budget && !plan.items.empty()) break;
    if (!r.admit(slot, hits, want)) break;
    waiting.pop_front();
    r.plan_item(plan, slot, want);
    budget -= want;
  }
  if (!plan.items.empty()) return;
  for (std::size_t i = 0; i < running.size();) {
    const std::int32_t slot = running[i];
    Sequence& s = r.seq(slot);
    bool self_preempted = false;
    while (!r.grow(s, s.computed + 1)) {
      const std::int32_t victim = running.back();
      running.pop_back();
      r.preempt(victim);
      ++plan.preempted;
      if (victim == slot) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    r.plan_item(plan, slot, s.pending());
    ++i;
  }
}

}  // namespace capsim
