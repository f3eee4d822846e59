// The step cost of multi-LoRA serving (llm/lora.h), on top of any StepCost. Per step, for each
// targeted linear layer of every layer, vLLM's punica kernels run a shrink (x A, in -> R) and an
// expand (x B, R -> out) over the tokens of adapter-carrying sequences, at R = max_lora_rank:
//   FLOPs per GPU = 2 x tokens x R x (in_shard + out_shard)   (TP shards B of column-parallel
//                   layers by output, A of row-parallel ones by input)
//   bytes per GPU = distinct adapters x R x (in_shard + out_shard) x 2 B  +  activations
//                   (tokens x (in_shard + R + out_shard) x 2 B)
//   two kernels per LoRA-wrapped layer; vLLM merges q/k/v into one wrapper and gate/up into
//   another, so q,k,v count once and gate,up once.
// Each term is a roofline like the base groups (2-norm of compute and memory time, the card's
// kernel floor); LoRA's all-reduces ride on the base layer's. Adapters loaded before the step
// (BatchShape::lora_loads) copy their own-rank weights host-to-device over PCIe.
#pragma once

#include <memory>

#include "sim/cost/step_cost.h"
#include "sim/llm/deployment.h"

namespace capsim {

class LoraCost : public StepCost {
 public:
  // REQUIRES: d.lora set and d validated.
  LoraCost(std::shared_ptr<const StepCost> inner, const Deployment& d);

  double seconds(const BatchShape& b) const override { return totals(b).seconds; }
  StepBreakdown breakdown(const BatchShape& b) const override { return compute(b, true); }
  StepBreakdown totals(const BatchShape& b) const override { return compute(b, false); }
  ExpertLayers expert_layers(double tokens) const override { return inner_->expert_layers(tokens); }

  // The LoRA work alone (tests): the kernels' time and the adapter loads' time.
  StepBreakdown lora_only(const BatchShape& b) const;
  double load_seconds(std::int64_t loads) const { return static_cast<double>(loads) * load_s_; }

 private:
  StepBreakdown compute(const BatchShape& b, bool keep) const;

  std::shared_ptr<const StepCost> inner_;
  struct Wrapper {          // one LoRA-wrapped layer (merged q/k/v, merged gate/up, o, down)
    double in_out = 0;      // sum over its slices of (in_shard + out_shard), per unit rank
    double act = 0;         // in_shard + out_shard activations per token (once per wrapper)
    double layers = 0;
  };
  std::vector<Wrapper> wrappers_;
  double rank_ = 0;
  double gemm_rate_ = 0, bandwidth_ = 0, kernel_floor_ = 0;
  double peak_flops_ = 0, peak_bandwidth_ = 0;
  double load_s_ = 0;       // one adapter's host-to-device copy, per GPU
};

}  // namespace capsim
