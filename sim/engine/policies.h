// The scheduler policies, one file each (policy_*.cc), listed in policies.cc.
#pragma once

#include "sim/engine/replica.h"

namespace capsim {

class VllmV1Policy : public SchedulerPolicy {
 public:
  void schedule(Replica& r, StepPlan& plan) override;
  // The running walk, then (nothing preempted) the waiting queue FCFS.
  bool decodes_then_admits() const override { return true; }
  void schedule_waiting(Replica& r, StepPlan& plan, std::int64_t budget) override;
};

class StaticBatchPolicy : public SchedulerPolicy {
 public:
  void schedule(Replica& r, StepPlan& plan) override;
};

class PrefillFirstPolicy : public SchedulerPolicy {
 public:
  void schedule(Replica& r, StepPlan& plan) override;
};

// SGLang's scheduler (engine/policy_sglang.cc): prefill batches first, not mixed with decodes;
// admission reserves new_token_ratio of every running request's remaining output; retraction
// when a decode step does not fit. One instance per replica: it keeps the ratio.
class SglangPolicy : public SchedulerPolicy {
 public:
  void schedule(Replica& r, StepPlan& plan) override;
  double new_token_ratio() const { return ratio_; }
  // Tokens a running request is expected to still need: ratio x min(output left, clip).
  static double reserved_tokens(const Sequence& s, double ratio, double clip);
  // PrefillAdder.add_one_req's test: the request's `extend_tokens` (prompt less cached prefix)
  // plus min(max_new_tokens, clip) must be below the free (and evictable) tokens less what is
  // `reserved` for running and already admitted requests.
  static bool admits(double free_tokens, double reserved, std::int64_t extend_tokens, std::int64_t max_new_tokens,
                     double clip);

 private:
  bool schedule_prefill(Replica& r, StepPlan& plan);  // true when the step is a prefill batch
  void schedule_decode(Replica& r, StepPlan& plan);
  double ratio_ = -1;  // new_token_ratio; < 0 until the first step
};

}  // namespace capsim
