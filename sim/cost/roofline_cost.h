// The roofline step cost (docs/cost-model.md): for each operator group of a layer,
//   time = max(FLOPs / achieved FLOP/s, bytes / achieved bytes/s, kernels x kernel floor),
// summed over layers, plus the LM head, plus tensor-parallel all-reduces
//   (latency + 2 (TP-1)/TP x bytes / link bandwidth), plus the engine's per-step and
// per-sequence overhead. All quantities are per GPU of the TP group; the group runs in lockstep,
// so a step's time is one GPU's time.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/cost/roofline_group.h"
#include "sim/cost/step_cost.h"
#include "sim/hardware/measured_attention.h"
#include "sim/hardware/measured_kernels.h"
#include "sim/hardware/measured_moe.h"
#include "sim/llm/deployment.h"

namespace capsim {

class ExpertParallelMoe;

// The achieved rates of the linear layers on card `c` under engine `e` (docs/cost-model.md#step-time):
// dense peak of `math` x the card's GEMM efficiency (compute_fp8 for fp8, compute_fp4 for fp4)
// x the engine's scale, and peak bandwidth x the bandwidth efficiency of `math`'s GEMMs
// (memory_bandwidth_fp8 / _fp4, else memory_bandwidth) x the engine's scale, each capped at peak.
// `kernel_scale`: an engine's further scale for one kernel family (kernels.moe_bandwidth_scale).
double gemm_flops_per_s(const Card& c, const EngineProfile& e, Precision math);
double weight_bytes_per_s(const Card& c, const EngineProfile& e, Precision math, double kernel_scale = 1.0);
// One linear layer of `p` weights run in `p` math: the roofline RooflineCost uses for it.
// REQUIRES: c.supports(p).
GemmRoofline linear_layer_roofline(const Card& c, const EngineProfile& e, Precision p);

// What part of the model one GPU runs: the whole model by default; a pipeline stage's share of
// the layers (fractional dense/MoE counts, sim/llm/parallelism.h), with or without the
// embedding's all-reduce, the LM head and the engine's per-step overhead.
struct RooflineScope {
  double layers = -1, dense_layers = -1, moe_layers = -1;  // -1 = the model's
  bool embedding = true;
  bool lm_head = true;
  bool overhead = true;
};

// Not safe to call from two threads at once: totals() and seconds() memoize the groups that
// depend only on a step's token count (and the LM head on its sampled rows) in the object.
// Each simulation builds its own (cluster/cluster.cc).
class RooflineCost : public StepCost {
 public:
  // REQUIRES: d.validate() passed. Resolves every constant once.
  // With --enable-expert-parallel the MoE layers run ExpertParallelMoe (the "expert-parallel"
  // model, sim/cost/registry.h).
  explicit RooflineCost(const Deployment& d) : RooflineCost(d, RooflineScope{}) {}
  RooflineCost(const Deployment& d, const RooflineScope& scope);

  double seconds(const BatchShape& b) const override;
  StepBreakdown breakdown(const BatchShape& b) const override;
  StepBreakdown totals(const BatchShape& b) const override { return compute<false>(b); }
  // Non-zero under DP attention (--data-parallel-size > 1 with --enable-expert-parallel):
  // ExpertParallelMoe's MoE layers of a step of `tokens` tokens, as totals() counts them.
  ExpertLayers expert_layers(double tokens) const override;

  // Achieved rates used (for reports and tests).
  double gemm_flops_per_s() const { return gemm_rate_; }
  double bytes_per_s() const { return bandwidth_; }
  double attention_bytes_per_s() const { return attention_bandwidth_; }
  double link_bytes_per_s() const { return link_bandwidth_; }
  double allreduce_latency_s() const { return allreduce_latency_; }
  double peak_flops() const { return peak_flops_; }
  double peak_bandwidth() const { return peak_bandwidth_; }
  // One linear layer's roofline, with the rates above (what the measured tables are carried by
  // outside their range).
  GemmRoofline gemm_roofline() const;
  // Where the linear layers' times come from: "measured: <card> <framework> GEMM table (<dtype>)
  // [+ bf16 for the LM head], <file>" or "roofline: ..." with the reason no table applies
  // (docs/cost-model.md#measured-kernels).
  const std::string& gemm_source() const { return gemm_source_; }
  // Where the MoE layers' expert compute and the TP all-reduces come from: "measured: ..." with
  // the table, or "roofline: ..." with the reason none applies; empty for a dense model / TP 1.
  const std::string& moe_source() const { return moe_source_; }
  const std::string& allreduce_source() const { return allreduce_source_; }
  // Where the attention kernels' times come from: "measured: <card> <framework> attention tables
  // (<kv dtype> KV)" or "roofline (...)" with the reason (docs/cost-model.md#measured-kernels).
  const std::string& attention_source() const { return attention_source_; }
  // The one gate for every measured-kernel op of this deployment: the engine profile's
  // `kernels.measured_kernels`, unless `capsim --measured-kernels` / CAPSIM_MEASURED_KERNELS
  // overrides it for the process (MeasuredKernels::enabled).
  bool measured_kernels_on() const { return measured_on_; }

 private:
  // The step's breakdown; with Keep, its groups listed too. A template, not a flag: every step's
  // totals() then runs without the listing's branches (the same operations in the same order,
  // so the same bits).
  template <bool Keep>
  StepBreakdown compute(const BatchShape& b) const;

  // The terms of a step of t tokens that depend on t alone: the linear layers, the elementwise
  // kernels, the tensor-parallel all-reduces (not the MoE layers under expert parallelism).
  struct TokenTerms {
    RooflineTerm qkv, o_proj, mlp, moe_mlp, moe_dispatch, elementwise;
    double all_reduce_s = 0, all_reduce_bytes = 0;
  };
  TokenTerms token_terms(double t) const;
  // Sets the linear layers' shapes and the tables that time them (or says why none does).
  void choose_measured_tables(const Deployment& d);
  // The same for the MoE layers and the TP all-reduce (moe_table_, allreduce_table_).
  void choose_moe_allreduce_tables(const Deployment& d);
  // One MoE layer's routed experts and routing kernels by the roofline, t tokens on this GPU (TP
  // slices): what the measured MoE table is carried by outside its token range.
  double routed_moe_roofline_s(double t) const;
  // One MoE layer's routed experts (the two grouped GEMMs, t tokens on this GPU; three kernels
  // with the router for the floor) at the fused-MoE rates; and its shared experts and router
  // GEMM, dense GEMMs at the card's rates.
  RooflineTerm routed_experts_term(double t, double repeat) const;
  // `router_kernels`: 0 where the routed group's floor counts the router, 1 beside a measured table.
  RooflineTerm shared_router_term(double t, double repeat, double router_kernels) const;
  RooflineTerm lm_head_term(double logit_rows) const;
  // Sets the attention tables and their layouts (or says why none applies).
  void choose_attention_tables(const Deployment& d);
  // One attention call's roofline (per layer): what carries the tables to unmeasured shapes.
  double attention_roofline_seconds(bool decode, const AttentionShape& s) const;
  // `roofline` (the step's attention group over `repeat` layers) timed from `table` instead: the
  // table's time of `shape` (the step as one uniform call: its sequences at their mean length),
  // times the group's roofline over the roofline of `shape`, which carries what the uniform
  // call leaves out (cached prefixes, speculative queries, unequal lengths).
  RooflineTerm measured_attention_term(const MeasuredAttentionTable& table, std::size_t layout, bool decode,
                                       const AttentionShape& shape, RooflineTerm roofline, double repeat) const;
  // `roofline`'s term with its time replaced by the measured GEMMs of `shapes` at m = t tokens,
  // summed, x repeat.
  struct LinearShape {
    double n = 0, k = 0;  // output and input features per GPU
  };
  RooflineTerm measured_term(const MeasuredGemmTable& table, double t,
                             std::initializer_list<LinearShape> shapes, RooflineTerm roofline,
                             double repeat) const;
  // table[i], computed by compute() the first time (the table grows to i + 1).
  template <typename T, typename F>
  static const T& memo(std::vector<std::optional<T>>& table, std::int64_t i, F compute);
  // Memoized up to this many tokens (or sampled rows) a step; larger steps compute afresh.
  static constexpr std::int64_t kMaxMemoTokens = 16384;
  mutable std::vector<std::optional<TokenTerms>> by_tokens_;
  mutable std::vector<std::optional<RooflineTerm>> by_logits_;

  // Per GPU, per layer.
  double qkv_params_ = 0, o_params_ = 0, dense_mlp_params_ = 0;
  double expert_params_ = 0, shared_params_ = 0, router_params_ = 0;
  double lm_head_params_ = 0;
  double linear_bytes_per_param_ = 2;
  double expert_bytes_per_param_ = 2;  // routed experts (a checkpoint as shipped may differ)
  double kv_bytes_per_token_layer_ = 0;
  // Attention FLOPs per query-key pair, per layer per rank, for prefill chunks and for decodes
  // (they differ for MLA, whose two phases run different forms: docs/cost-model.md#mla).
  double prefill_flops_per_pair_ = 0, decode_flops_per_pair_ = 0;
  // MLA prefill over a cached context: kv_b's parameters per rank, which up-project each cached
  // latent to per-head k_nope and v again every chunk, and the bytes of those heads (0 for MHA).
  double kv_up_params_ = 0, kv_up_head_elements_ = 0;
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
  // The routed experts' grouped GEMMs: compute rate and weight-stream rate (the engine's MoE
  // scales on the card's; docs/cost-model.md#moe).
  double moe_gemm_rate_ = 0, moe_bandwidth_ = 0;
  double peak_flops_ = 0, peak_bandwidth_ = 0;
  double link_bandwidth_ = 0, allreduce_latency_ = 0;
  double kernel_floor_ = 0;
  double step_overhead_ = 0, per_sequence_overhead_ = 0;
  bool embedding_ = true, lm_head_ = true, overhead_ = true;
  std::shared_ptr<const ExpertParallelMoe> ep_;  // set with expert parallelism on an MoE model
  // Measured GEMM tables (docs/cost-model.md#measured-kernels): `linear_table_` for the layers in
  // the weights' precision, `lm_head_table_` (16-bit) for the LM head; null = roofline.
  std::shared_ptr<const MeasuredKernels> measured_;
  const MeasuredGemmTable* linear_table_ = nullptr;
  const MeasuredGemmTable* lm_head_table_ = nullptr;
  bool measured_qkv_ = false;  // a single fused qkv GEMM (not MLA's several projections)
  LinearShape qkv_shape_, o_shape_, up_shape_, down_shape_, lm_head_shape_;
  std::string gemm_source_;
  // Measured fused-MoE and custom all-reduce tables (sim/hardware/measured_moe.h,
  // measured_allreduce.h); null = roofline.
  const MeasuredMoeTable* moe_table_ = nullptr;
  MoeLayout moe_layout_;
  const MeasuredAllReduceTable* allreduce_table_ = nullptr;
  std::string moe_source_, allreduce_source_;
  // Measured attention tables for the KV cache's precision; null = roofline. The layouts are the
  // tables' nearest measured head layouts for full-attention and sliding-window layers.
  const MeasuredAttentionTable* decode_table_ = nullptr;
  const MeasuredAttentionTable* prefill_table_ = nullptr;
  std::size_t decode_layout_ = 0, decode_window_layout_ = 0, prefill_layout_ = 0, prefill_window_layout_ = 0;
  AttentionShape attention_heads_;  // heads, kv_heads, head_dim per GPU
  double kv_element_bytes_ = 2;
  bool measured_on_ = false;
  std::string attention_source_;
};

}  // namespace capsim
