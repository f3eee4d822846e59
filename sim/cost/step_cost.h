// Contract: a StepCost turns one engine step's BatchShape into seconds on one replica (its whole
// TP group), deterministically, with the breakdown that explains it. Implementations are
// registered by name (cost/registry).
#pragma once

#include <string>
#include <vector>

#include "sim/cost/batch_shape.h"

namespace capsim {

enum class Bound { kCompute, kMemory, kCommunication, kOverhead, kFloor };
const char* bound_name(Bound b);

struct OperatorCost {
  std::string group;      // "qkv_proj", "attention_decode", "mlp", "all_reduce", "overhead", ...
  double flops = 0;       // per GPU, whole step (all layers)
  double bytes = 0;       // per GPU, whole step
  double compute_s = 0;   // flops / achieved FLOP/s
  double memory_s = 0;    // bytes / achieved bytes/s
  double seconds = 0;     // what the group contributes to the step
  Bound bound = Bound::kMemory;
  // The time came from the card's measured kernel tables (sim/hardware/measured_kernels.h), not
  // from the roofline; flops, bytes, compute_s and memory_s are still the roofline's counts.
  bool measured = false;
};

struct StepBreakdown {
  std::vector<OperatorCost> groups;
  double seconds = 0;
  double flops = 0;       // per GPU
  double bytes = 0;       // per GPU
  double compute_s = 0;   // sum of group seconds bound by compute
  double memory_s = 0;    // ... by memory (incl. kernel floors)
  double communication_s = 0;
  double overhead_s = 0;
  double mfu = 0;         // flops / (peak x seconds)
  double mbu = 0;         // bytes / (peak bandwidth x seconds)
};

class StepCost {
 public:
  virtual ~StepCost() = default;
  virtual double seconds(const BatchShape& b) const = 0;
  virtual StepBreakdown breakdown(const BatchShape& b) const = 0;
  // The breakdown's totals without the per-group list (for the simulator).
  virtual StepBreakdown totals(const BatchShape& b) const { return breakdown(b); }

  // DP attention with expert parallelism (sim/cost/expert_parallel.h): the part of a step of
  // `tokens` tokens on one DP rank that its MoE layers take when every rank carries as many —
  // the experts' work on the busiest GPU (with the shared experts and routing kernels) and the
  // dispatch/combine all-to-all. The DP ranks of such an engine step together
  // (lockstep_step_seconds). Both 0 for a cost without an all-to-all between DP ranks.
  struct ExpertLayers {
    double experts_s = 0;
    double all_to_all_s = 0;
  };
  virtual ExpertLayers expert_layers(double tokens) const {
    (void)tokens;
    return {};
  }
};

}  // namespace capsim
