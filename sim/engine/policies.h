// The scheduler policies, one file each (policy_*.cc), listed in policies.cc.
#pragma once

#include "sim/engine/replica.h"

namespace capsim {

class VllmV1Policy : public SchedulerPolicy {
 public:
  void schedule(Replica& r, StepPlan& plan) override;
  // The running loop decodes each sequence once (budget >= running, grow() succeeding) and the
  // waiting loop stops at once (empty, or max_num_seqs running).
  bool repeats_pure_decode() const override { return true; }
};

class StaticBatchPolicy : public SchedulerPolicy {
 public:
  void schedule(Replica& r, StepPlan& plan) override;
};

class PrefillFirstPolicy : public SchedulerPolicy {
 public:
  void schedule(Replica& r, StepPlan& plan) override;
};

}  // namespace capsim
