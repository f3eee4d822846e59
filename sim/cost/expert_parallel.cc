#include "sim/cost/expert_parallel.h"

#include <algorithm>
#include <cmath>

#include "sim/cost/roofline_group.h"
#include "sim/llm/parallelism.h"

namespace capsim {

ExpertParallelMoe::ExpertParallelMoe(const Deployment& d, const Rates& r) : r_(r) {
  const ModelSpec& m = d.model;
  tp_ = d.tp;
  dp_ = d.dp;
  group_ = d.tp * d.dp;
  experts_ = static_cast<double>(m.experts);
  local_experts_ = experts_ / group_;
  k_ = static_cast<double>(m.experts_per_token);
  hidden_ = static_cast<double>(m.hidden);
  expert_params_ = static_cast<double>(m.expert_params());
  shared_params_ = static_cast<double>(m.shared_expert_params()) / d.tp;
  router_params_ = static_cast<double>(m.router_params());
  imbalance_ = d.expert_imbalance;
  // DeepEP (and vLLM's DeepEP back ends) dispatch fp8 activations with one fp32 scale per 128
  // elements when the experts compute in fp8, and combine in bf16 (deepseek-ai/DeepEP
  // docs/legacy.md: "FP8 dispatching and BF16 combining"); 16-bit otherwise.
  dispatch_element_bytes_ = d.compute_precision() == Precision::kFp8 ? 1.0 + 4.0 / 128.0 : 2.0;
  combine_element_bytes_ = 2.0;

  // Where a GPU's copies go: destinations are uniform over the group's GPUs (GPU 0 of DP rank 0
  // stands for all; the group of stage 0 is GPUs (rank x pp) x tp + j).
  if (dp_ > 1) {
    double nv = 0, pcie = 0, net = 0;
    for (int rank = 0; rank < dp_; ++rank) {
      for (int j = 0; j < tp_; ++j) {
        const int gpu = rank * d.pp * tp_ + j;
        const GpuLink l = link_between(d, 0, gpu);
        switch (l.kind) {
          case GpuLink::Kind::kSame: break;
          case GpuLink::Kind::kNvlink:
            nv += 1;
            nvlink_rate_ = l.bandwidth * kLinkEfficiency;
            break;
          case GpuLink::Kind::kPcieP2p:
          case GpuLink::Kind::kPcieHost:
            pcie += 1;
            pcie_rate_ = l.bandwidth * kLinkEfficiency;
            break;
          case GpuLink::Kind::kNetwork:
            net += 1;
            network_rate_ = l.bandwidth * kLinkEfficiency;
            break;
        }
        if (l.kind != GpuLink::Kind::kSame) latency_s_ = std::max(latency_s_, l.latency_s);
      }
    }
    share_nvlink_ = nv / group_;
    share_pcie_ = pcie / group_;
    share_network_ = net / group_;
  }
}

double ExpertParallelMoe::local_pairs(double tokens) const {
  // All DP ranks' tokens (dp x t, each rank's t split over its TP ranks for the dispatch, or
  // replicated across the TP group when DP is 1) pick k experts each; a GPU holds 1/group of
  // them, so the mean is dp x t x k / (tp x dp) = t x k / tp (DP > 1) or t x k / tp (DP 1).
  return tokens * k_ / tp_ * imbalance_;
}

double ExpertParallelMoe::dispatch_bytes(double tokens) const {
  if (dp_ <= 1) return 0;
  return tokens / tp_ * k_ * hidden_ * dispatch_element_bytes_ * (1.0 - 1.0 / group_);
}

double ExpertParallelMoe::combine_bytes(double tokens) const {
  if (dp_ <= 1) return 0;
  return tokens / tp_ * k_ * hidden_ * combine_element_bytes_ * (1.0 - 1.0 / group_);
}

double ExpertParallelMoe::transfer_seconds(double bytes) const {
  // The links run at once; the slowest share sets the time, plus one fixed cost.
  const double sent = 1.0 - 1.0 / group_;
  if (sent <= 0 || bytes <= 0) return 0;
  const double all = bytes / sent;  // bytes a GPU would send to every GPU of the group
  double t = 0;
  if (share_nvlink_ > 0) t = std::max(t, all * share_nvlink_ / nvlink_rate_);
  if (share_pcie_ > 0) t = std::max(t, all * share_pcie_ / pcie_rate_);
  if (share_network_ > 0) t = std::max(t, all * share_network_ / network_rate_);
  return latency_s_ + t;
}

double ExpertParallelMoe::all_to_all_seconds(double tokens) const {
  if (dp_ <= 1) return 0;
  return transfer_seconds(dispatch_bytes(tokens)) + transfer_seconds(combine_bytes(tokens));
}

void ExpertParallelMoe::add(StepBreakdown& out, bool keep, double t, double moe_layers) const {
  const double act = 2.0;
  // One layer on the busiest GPU for a step of `tokens` tokens per rank, routing `imbalance`
  // times the mean onto it: its token-expert pairs and the distinct local experts it reads (with
  // uniform routing each of its E/group experts is hit by at least one of the group's dp x t
  // tokens with probability 1 - (1 - k/E)^(dp t); the busiest GPU reads `imbalance` times the
  // mean, at most all of them).
  struct Load {
    double pairs, hit;
  };
  const auto load = [&](double tokens, double imbalance) {
    return Load{tokens * k_ / tp_ * imbalance,
                std::min(local_experts_,
                         local_experts_ * (1.0 - std::pow(1.0 - k_ / experts_, tokens * dp_)) * imbalance)};
  };
  const Load busiest = load(t, imbalance_);
  const double pairs = busiest.pairs;
  // The routed experts' grouped GEMMs at the fused-MoE rates (three kernels with the router for
  // the floor); the router GEMM and the shared experts are dense kernels at the card's.
  const auto routed_term = [&](const Load& l, double tokens, double repeat) {
    return roofline_term(2 * l.pairs * expert_params_,
                         l.hit * expert_params_ * r_.expert_bytes_per_param + 2 * (tokens + l.pairs) * hidden_ * act,
                         r_.moe_gemm_flops_per_s, 3, repeat, r_.moe_bytes_per_s, r_.kernel_floor_s);
  };
  // `router_kernels`: 0 where the routed group's floor counts the router, 1 beside a measured table
  // (timed from given router logits).
  const auto rest_term = [&](double repeat, double router_kernels) {
    return roofline_term(2 * t * (shared_params_ + router_params_),
                         shared_params_ * r_.linear_bytes_per_param + router_params_ * act, r_.gemm_flops_per_s,
                         (shared_params_ > 0 ? 2 : 0) + router_kernels, repeat, r_.bytes_per_s, r_.kernel_floor_s);
  };
  if (r_.moe_table) {
    // The table's rows are balanced: the busiest GPU's `imbalance` x the mean token-expert pairs
    // is the balanced layer of imbalance x dp x t tokens over the group (each GPU computes
    // tokens x k / ep pairs there). Outside its token range it is carried by the routed experts'
    // roofline; the shared experts and the router GEMM stay on the roofline.
    const auto routed_roofline = [&](double group_tokens) {
      const Load l = load(group_tokens / dp_, 1.0);
      const double tokens = group_tokens / dp_;
      double s = routed_term(l, tokens, 1).seconds;
      if (r_.dispatch_kernels > 0) {
        s += roofline_term(0, (2 * tokens + 2 * l.pairs) * hidden_ * act, r_.gemm_flops_per_s, r_.dispatch_kernels, 1,
                           r_.bytes_per_s, r_.kernel_floor_s)
                 .seconds;
      }
      return s;
    };
    const double routed = r_.moe_table->seconds(t * dp_ * imbalance_, r_.moe_layout, routed_roofline);
    const double rest = shared_params_ + router_params_ > 0 ? rest_term(1, 1).seconds : 0.0;
    RooflineTerm layer = sum_terms(routed_term(busiest, t, moe_layers), rest_term(moe_layers, 0));
    layer.seconds = (routed + rest) * moe_layers;
    layer.measured = true;
    add_roofline_term(out, keep, "moe_mlp_ep", layer);
  } else {
    add_roofline_term(out, keep, "moe_mlp_ep",
                      sum_terms(routed_term(busiest, t, moe_layers), rest_term(moe_layers, 0)));
    if (r_.dispatch_kernels > 0) {
      add_roofline_group(out, keep, "moe_dispatch", 0, (2 * t + 2 * pairs) * hidden_ * act, r_.gemm_flops_per_s,
                         r_.dispatch_kernels, moe_layers, r_.bytes_per_s, r_.kernel_floor_s);
    }
  }
  if (dp_ > 1) {
    const double per_layer = all_to_all_seconds(t);
    add_communication_group(out, keep, "all_to_all", (dispatch_bytes(t) + combine_bytes(t)) * moe_layers,
                            per_layer * moe_layers);
  }
}

double lockstep_step_seconds(const StepCost& cost, const std::vector<RankStep>& ranks) {
  double rest = 0, sum_tokens = 0, max_tokens = 0;
  for (const RankStep& r : ranks) {
    const StepCost::ExpertLayers own = cost.expert_layers(r.tokens);
    rest = std::max(rest, r.own_s - own.experts_s - own.all_to_all_s);
    sum_tokens += r.tokens;
    max_tokens = std::max(max_tokens, r.tokens);
  }
  const double mean_tokens = sum_tokens / static_cast<double>(ranks.size());
  return rest + cost.expert_layers(mean_tokens).experts_s + cost.expert_layers(max_tokens).all_to_all_s;
}

BatchShape dummy_batch() {
  BatchShape b;
  b.add_decode(1);
  return b;
}

}  // namespace capsim
