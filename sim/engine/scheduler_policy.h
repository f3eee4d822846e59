// The scheduling policy interface and the policy table. Each policy lives in its own file
// (engine/policy_*.cc, listed in engine/policies.cc) and decides what one step runs, using the
// replica's mechanisms (admission, growth, preemption: engine/replica.h); the replica applies
// the step when it ends.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/engine/sequence.h"

namespace capsim {

class Replica;

// Contract: schedule() fills `plan` with this step's work using the replica's mechanisms; it
// may preempt and admit. An empty plan means nothing can run now.
class SchedulerPolicy {
 public:
  virtual ~SchedulerPolicy() = default;
  virtual void schedule(Replica& r, StepPlan& plan) = 0;
  // True when schedule() first walks the running sequences in running order, giving each
  // min(pending + lookahead, budget) tokens (budget = max_num_batched_tokens minus what earlier
  // ones took) through grow() and plan_item(), preempting only when a grow() fails, and then,
  // when nothing was preempted, calls schedule_waiting() with the budget left. Replica's
  // implicit decode relies on it: a step whose running sequences all decode one token, with
  // enough blocks free, is that walk done in bulk followed by schedule_waiting().
  virtual bool decodes_then_admits() const { return false; }
  // The waiting part of schedule() (only for decodes_then_admits() policies).
  virtual void schedule_waiting(Replica& r, StepPlan& plan, std::int64_t budget);
};

struct PolicyInfo {
  std::string name;
  std::string description;
  std::function<std::unique_ptr<SchedulerPolicy>()> make;
};
// The policy table (engine/policies.cc). Unknown names throw with the accepted ones.
const std::vector<PolicyInfo>& scheduler_policies();
std::unique_ptr<SchedulerPolicy> make_policy(const std::string& name);

}  // namespace capsim
