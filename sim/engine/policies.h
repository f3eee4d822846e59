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

}  // namespace capsim
