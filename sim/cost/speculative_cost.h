// The step cost of speculative decoding (llm/speculative.h), on top of any StepCost: the target's
// verify step is the inner cost of the BatchShape itself (each decode carries its drafts as extra
// query tokens: BatchShape::add_speculative_decode), to which the proposer's work is added:
//   head or draft model: pass 1 runs the proposer over every token the target ran this step
//     (it keeps its own KV and reads the target's hidden states) with logits for the sampling
//     sequences only, then k - 1 more passes of one token per sampling sequence (whose context
//     is taken as the decodes' context plus the drafts: a prompt finishing in this step is
//     counted without its context there); each pass is the proposer's own roofline step (RooflineCost
//     of the proposer on the same card and TP) without the engine's per-step overheads, which
//     the target's step already counts;
//   n-gram: nothing on the GPU. The lookup runs on the CPU after the step's tokens are back
//     (which is why vLLM schedules synchronously with it: DeploymentSpec::resolve); its CPU
//     time is not modelled.
#pragma once

#include <memory>

#include "sim/cost/roofline_cost.h"
#include "sim/cost/step_cost.h"
#include "sim/llm/deployment.h"

namespace capsim {

class SpeculativeCost : public StepCost {
 public:
  // REQUIRES: d.speculative set and d validated.
  SpeculativeCost(std::shared_ptr<const StepCost> inner, const Deployment& d);

  double seconds(const BatchShape& b) const override { return totals(b).seconds; }
  StepBreakdown breakdown(const BatchShape& b) const override { return compute(b, true); }
  StepBreakdown totals(const BatchShape& b) const override { return compute(b, false); }
  // The target's MoE layers (the verify step's tokens are the target's).
  ExpertLayers expert_layers(double tokens) const override { return inner_->expert_layers(tokens); }

  // The proposer's shapes for a step (exposed for tests): pass 1, and each later pass.
  BatchShape first_pass(const BatchShape& b) const;
  BatchShape later_pass(const BatchShape& b) const;
  int passes() const { return k_; }

 private:
  StepBreakdown compute(const BatchShape& b, bool keep) const;

  std::shared_ptr<const StepCost> inner_;
  std::unique_ptr<Deployment> proposer_;   // the proposer as a deployment (null for n-gram)
  std::unique_ptr<RooflineCost> proposer_cost_;
  int k_ = 0;
  double peak_flops_ = 0, peak_bandwidth_ = 0;
};

// Adds `add` (scaled by `times`) into `into`'s totals; `group` names it in the per-group list.
void add_breakdown(StepBreakdown& into, const StepBreakdown& add, double times, const char* group, bool keep);
// Recomputes mfu/mbu after totals changed.
void finish_breakdown(StepBreakdown& b, double peak_flops, double peak_bandwidth);

}  // namespace capsim
