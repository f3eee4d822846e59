// vLLM V1's scheduler (vllm/v1/core/sched/scheduler.py, Scheduler.schedule; vllm-v1-notes.md
// section 1): one token budget for decodes and prefill chunks; running requests first, in
// admission order, preempting the most recently admitted when blocks run out; then waiting
// requests FCFS, only if nothing was preempted, stopping at the first that does not fit
// (head-of-line blocking: waiting requests never preempt).
#include "sim/engine/policies.h"

namespace capsim {

void VllmV1Policy::schedule(Replica& r, StepPlan& plan) {
  const SchedulerLimits& lim = r.limits();
  std::int64_t budget = lim.max_num_batched_tokens;
  bool preempted = false;
  auto& running = r.running();
  for (std::size_t i = 0; i < running.size() && budget > 0;) {
    const std::int32_t slot = running[i];
    Sequence& s = r.seq(slot);
    // A decode under speculative decoding verifies its drafts too (vLLM counts them in the
    // token budget and allocates their slots: num_lookahead_tokens).
    const std::int64_t n = std::min<std::int64_t>(s.pending() + r.lookahead(s), budget);
    bool self_preempted = false;
    while (!r.grow(s, s.computed + n)) {
      const std::int32_t victim = running.back();
      running.pop_back();
      r.preempt(victim);
      ++plan.preempted;
      preempted = true;
      if (victim == slot) {
        self_preempted = true;
        break;
      }
    }
    if (self_preempted) break;
    r.plan_item(plan, slot, n);
    budget -= n;
    ++i;
  }
  if (preempted) return;
  schedule_waiting(r, plan, budget);
}

void VllmV1Policy::schedule_waiting(Replica& r, StepPlan& plan, std::int64_t budget) {
  const SchedulerLimits& lim = r.limits();
  auto& running = r.running();
  auto& waiting = r.waiting();
  // Multi-LoRA: requests whose adapter would exceed max_loras are set aside and the queue goes
  // on; they return to its front, in order, after this step's admissions (vLLM V1's
  // skipped_waiting_requests).
  std::vector<std::int32_t> skipped;
  // With a CPU KV tier, requests waiting for their load (WAITING_FOR_REMOTE_KVS) keep their
  // place at the front of the queue and are passed over: the first `loading` entries.
  std::size_t loading = 0;
  while (waiting.size() > loading && static_cast<int>(running.size()) < lim.max_num_seqs && budget > 0) {
    const std::int32_t slot = waiting[loading];
    if (!r.schedulable(r.seq(slot))) break;  // not yet seen by this step's scheduler
    Sequence& s = r.seq(slot);
    if (!r.lora_admissible(s)) {
      skipped.push_back(slot);
      waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(loading));
      continue;
    }
    const bool loaded = r.offloading() && r.cpu_loading(slot);
    if (loaded && !r.cpu_loaded(slot)) {
      ++loading;
      continue;
    }
    std::int64_t hits = 0;
    if (!loaded) {
      hits = r.lookup_hits(s);
      if (r.offloading()) {
        // The connector's lookup, after the GPU prefix cache's: a hit is loaded first (the
        // request allocates its blocks and waits; no token of the budget is used).
        const std::int64_t cpu = r.cpu_lookup(s, hits);
        if (cpu > 0) {
          if (!r.start_cpu_load(slot, hits, cpu)) break;
          ++loading;
          continue;
        }
      }
    }
    const std::int64_t want = s.tokens() - (loaded ? r.loaded_tokens(slot) : r.ready_tokens(s, hits));
    // Without chunked prefill a prompt runs whole. One longer than the remaining budget waits,
    // unless no other prefill is in this step: then it runs alone past the budget (an engine
    // that cannot chunk must still serve every prompt it accepted).
    if (!lim.enable_chunked_prefill && want > budget && plan.shape.prefill_tokens > 0) break;
    const std::int64_t n = lim.enable_chunked_prefill ? std::min(want, budget) : want;
    if (loaded ? !r.admit_loaded(slot, n) : !r.admit(slot, hits, n)) break;
    waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(loading));
    r.plan_item(plan, slot, n);
    budget = std::max<std::int64_t>(0, budget - n);
  }
  if (!skipped.empty()) waiting.insert(waiting.begin(), skipped.begin(), skipped.end());
}

}  // namespace capsim
