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
// reads are the mean times the imbalance factor (Deployment::expert_imbalance). A step costed
// alone (StepCost::totals) takes every DP rank to carry the batch it is given; the simulator
// steps the ranks of one engine together (lockstep_step_seconds below).
#pragma once

#include <vector>

#include "sim/cost/batch_shape.h"
#include "sim/cost/step_cost.h"
#include "sim/hardware/measured_moe.h"
#include "sim/llm/deployment.h"

namespace capsim {

// DP attention runs the DP ranks of one engine as one (docs/cost-model.md#dp-lockstep): each
// rank runs attention and the dense layers on its own batch, but every MoE layer is an
// all-to-all among all ranks, so each layer waits for the slowest rank and the experts compute
// every rank's tokens together; a rank with nothing to run still runs a dummy batch to take part
// (vllm/v1/engine/core.py DPEngineCoreProc.run_busy_loop -> execute_dummy_batch). With
// `own_s` a rank's step costed alone (StepCost::totals of its batch, whose MoE layers count every
// rank as carrying its `tokens`), E and A the MoE layers' experts and all-to-all
// (StepCost::expert_layers), every rank's step takes
//   max_r (own_r - E(t_r) - A(t_r)) + E(mean_r t_r) + A(max_r t_r):
// the experts' GPUs receive the mean of the ranks' tokens each (uniform routing), and the
// all-to-all ends when the rank sending the most has sent. The layers' share of the rest is the
// same in every layer, so the per-layer barriers add up to one max over the whole step.
// Not modelled: CUDA-graph padding of every rank's dense layers to the largest batch
// (vllm/v1/worker/dp_utils.py coordinate_batch_across_dp), which the max over ranks covers
// unless a small batch has the longest attention.
struct RankStep {
  double own_s = 0;
  double tokens = 0;
};
// REQUIRES: !ranks.empty(); every rank's own_s > 0 and tokens >= 1 (an idle rank: dummy_batch()).
double lockstep_step_seconds(const StepCost& cost, const std::vector<RankStep>& ranks);
// What an idle DP rank runs to join the step's collectives: one decode token (vLLM's
// gpu_worker execute_dummy_batch: _dummy_run(1, uniform_decode=True)).
BatchShape dummy_batch();

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
