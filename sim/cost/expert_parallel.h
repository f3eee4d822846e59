// Expert parallelism for MoE layers (vLLM --enable-expert-parallel, SGLang --ep-size), the
// "expert-parallel" step-cost model's MoE part (docs/cost-model.md#expert-parallel): each GPU
// of the expert-parallel group (TP x DP GPUs) holds E / (TP x DP) whole experts instead of a
// 1/TP slice of every expert.
//
// - DP 1 (experts over the TP group): every TP rank sees all t tokens (replicated after the
//   attention all-reduce) and runs its local experts on the ones routed to them; the TP
//   all-reduces stay as they are.
// - DP > 1 (DP attention, as vLLM and SGLang run DeepSeek-class models): every DP rank runs
//   attention on its own requests and KV cache (MLA's latent KV is not replicated across TP
//   ranks because each rank is its own attention group), and each MoE layer sends every token
//   to the GPUs of its top-k experts (dispatch) and brings the weighted results back (combine):
//   an all-to-all of t/TP x k x hidden elements per GPU each way, which replaces the MoE layer's
//   TP all-reduce.
// The busiest GPU sets the layer's time: its token-expert pairs and the distinct experts it
// reads are the mean times the imbalance factor (Deployment::expert_imbalance). The DP ranks
// are assumed to carry batches of the same size (each rank's step is costed with its own batch
// for all of them; vLLM pads idle ranks with dummy batches).
#pragma once

#include "sim/cost/step_cost.h"
#include "sim/hardware/measured_moe.h"
#include "sim/llm/deployment.h"

namespace capsim {

class ExpertParallelMoe {
 public:
  struct Rates {
    double gemm_flops_per_s = 0;
    double bytes_per_s = 0;
    // The routed experts' grouped GEMMs (RooflineCost's fused-MoE rates).
    double moe_gemm_flops_per_s = 0;
    double moe_bytes_per_s = 0;
    double kernel_floor_s = 0;
    double linear_bytes_per_param = 2;  // shared experts (16-bit or the quantised format)
    double expert_bytes_per_param = 2;  // routed experts
    double dispatch_kernels = 0;        // routing kernels per MoE layer (engine profile)
    // The measured fused-MoE table that times this layout's routed experts, null = roofline
    // (RooflineCost::moe_source says why).
    const MeasuredMoeTable* moe_table = nullptr;
    MoeLayout moe_layout;
  };
  // REQUIRES: d.validate() passed, d.model.is_moe(), d.expert_parallel.
  ExpertParallelMoe(const Deployment& d, const Rates& r);

  // Adds the MoE groups of `moe_layers` layers for a step of `tokens` tokens on this rank.
  void add(StepBreakdown& out, bool keep, double tokens, double moe_layers) const;

  // One MoE layer, one GPU, a step of `tokens` tokens on its rank:
  // token-expert pairs the busiest GPU computes (mean x imbalance);
  double local_pairs(double tokens) const;
  // bytes each GPU sends in the dispatch and in the combine (DP > 1; 0 otherwise);
  double dispatch_bytes(double tokens) const;
  double combine_bytes(double tokens) const;
  // seconds of dispatch + combine (DP > 1; 0 otherwise).
  double all_to_all_seconds(double tokens) const;
  // True when the all-to-all replaces the MoE layers' TP all-reduce (DP > 1).
  bool all_to_all() const { return dp_ > 1; }
  int group_gpus() const { return group_; }

 private:
  double transfer_seconds(double bytes) const;

  Rates r_;
  int tp_ = 1, dp_ = 1, group_ = 1;
  double experts_ = 0, local_experts_ = 0, k_ = 0, hidden_ = 0;
  double expert_params_ = 0;  // one whole routed expert
  double shared_params_ = 0, router_params_ = 0;  // per GPU (shared experts TP-sharded in a rank)
  double imbalance_ = 1;
  double dispatch_element_bytes_ = 2, combine_element_bytes_ = 2;
  // Share of a GPU's sent copies going over each link kind, the links' achieved rates and the
  // largest fixed cost among the kinds used.
  double share_nvlink_ = 0, share_pcie_ = 0, share_network_ = 0;
  double nvlink_rate_ = 0, pcie_rate_ = 0, network_rate_ = 0, latency_s_ = 0;
};

}  // namespace capsim
