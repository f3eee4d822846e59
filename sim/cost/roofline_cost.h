// The roofline step cost (docs/cost-model.md): for each operator group of a layer,
//   time = max(FLOPs / achieved FLOP/s, bytes / achieved bytes/s, kernels x kernel floor),
// summed over layers, plus the LM head, plus tensor-parallel all-reduces
//   (latency + 2 (TP-1)/TP x bytes / link bandwidth), plus the engine's per-step and
// per-sequence overhead. All quantities are per GPU of the TP group; the group runs in lockstep,
// so a step's time is one GPU's time.
#pragma once

#include "sim/cost/step_cost.h"
#include "sim/llm/deployment.h"

namespace capsim {

class RooflineCost : public StepCost {
 public:
  // REQUIRES: d.validate() passed. Resolves every constant once; seconds() is allocation-free.
  explicit RooflineCost(const Deployment& d);

  double seconds(const BatchShape& b) const override;
  StepBreakdown breakdown(const BatchShape& b) const override;
  StepBreakdown totals(const BatchShape& b) const override { return compute(b, false); }

  // Achieved rates used (for reports and tests).
  double gemm_flops_per_s() const { return gemm_rate_; }
  double attention_flops_per_s() const { return attention_rate_; }
  double bytes_per_s() const { return bandwidth_; }
  double attention_bytes_per_s() const { return attention_bandwidth_; }
  double link_bytes_per_s() const { return link_bandwidth_; }
  double allreduce_latency_s() const { return allreduce_latency_; }
  double peak_flops() const { return peak_flops_; }
  double peak_bandwidth() const { return peak_bandwidth_; }

 private:
  StepBreakdown compute(const BatchShape& b, bool keep_groups) const;

  // Per GPU, per layer.
  double qkv_params_ = 0, o_params_ = 0, dense_mlp_params_ = 0;
  double expert_params_ = 0, shared_params_ = 0, router_params_ = 0;
  double lm_head_params_ = 0;
  double linear_bytes_per_param_ = 2;
  double expert_bytes_per_param_ = 2;  // routed experts (a checkpoint as shipped may differ)
  double kv_bytes_per_token_layer_ = 0;
  double attention_flops_per_pair_ = 0;  // per layer per rank
  double hidden_ = 0;
  double layers_ = 0, dense_layers_ = 0, moe_layers_ = 0;
  // Sliding-window layers (Gemma 2, gpt-oss): their attention reaches only the last `window_`
  // tokens, so its work and KV reads are bounded by the window (docs/cost-model.md#sliding-window).
  double sliding_layers_ = 0, window_ = 0;
  double experts_ = 0, experts_per_token_ = 0;
  int tp_ = 1;
  // Rates.
  double gemm_rate_ = 0, attention_rate_ = 0, bandwidth_ = 0, attention_bandwidth_ = 0;
  double moe_dispatch_kernels_ = 0;
  double peak_flops_ = 0, peak_bandwidth_ = 0;
  double link_bandwidth_ = 0, allreduce_latency_ = 0;
  double kernel_floor_ = 0;
  double step_overhead_ = 0, per_sequence_overhead_ = 0;
};

}  // namespace capsim
