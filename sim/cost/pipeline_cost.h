// Pipeline parallelism, the "pipeline" step-cost model (docs/cost-model.md#pipeline-parallel):
// the layers split over `pp` stages of TP GPUs each (vLLM --pipeline-parallel-size), the
// activations handed from stage to stage over the link between them, and several batches in
// flight as vLLM runs them (one per stage: V1's batch queue of pipeline_parallel_size batches,
// V0's virtual engines).
//
// capsim's engine runs one batch per step, so a step of this model is one *cycle*: the running
// sequences are split into m = min(pp, sequences) micro-batches, each passes once through every
// stage, and every sequence advances by its chunk or one token. With stage times s_k and
// hand-off times h_k of one micro-batch (k = 0..pp-1, h of the last stage 0) and the engine's
// per-batch CPU work O (schedule, sample: step overhead + per-sequence overhead):
//   latency of one micro-batch  L = sum_k (s_k + h_k)
//   cycle = max(L + O, m x max_k (s_k + h_k), m x O)
// With m < pp the stages idle (the pipeline bubble): a lone request pays every stage in turn and
// gains nothing from the extra GPUs but memory. With m = pp and balanced stages the cycle is
// pp x stage time, the throughput of one GPU set of layers per stage.
//
// The breakdown is per GPU of the busiest stage: its groups times m, its hand-off, the CPU work
// on the critical path, and the idle remainder as "pipeline_bubble" (in overhead_s); the groups
// sum to the cycle.
#pragma once

#include <vector>

#include "sim/cost/roofline_cost.h"
#include "sim/llm/parallelism.h"

namespace capsim {

class PipelineCost : public StepCost {
 public:
  // REQUIRES: d.validate() passed, d.pp >= 1.
  explicit PipelineCost(const Deployment& d);

  double seconds(const BatchShape& b) const override { return compute(b, false).seconds; }
  StepBreakdown breakdown(const BatchShape& b) const override { return compute(b, true); }
  StepBreakdown totals(const BatchShape& b) const override { return compute(b, false); }

  int stages() const { return static_cast<int>(stages_.size()); }
  const PipelineStage& stage(int k) const { return stages_[static_cast<std::size_t>(k)]; }
  // The link from stage k to stage k + 1 (k < stages() - 1).
  const GpuLink& link(int k) const { return links_[static_cast<std::size_t>(k)]; }
  // Bytes one GPU of stage k sends to the next for a micro-batch of `tokens` tokens: the hidden
  // state and the residual (vLLM's IntermediateTensors), 16-bit each.
  double handoff_bytes(double tokens) const { return 2.0 * tokens * hidden_ * 2.0; }
  double handoff_seconds(int k, double tokens) const;
  // The micro-batches a batch is split into, and the shape of the largest.
  static int micro_batches(const BatchShape& b, int pp);
  static BatchShape micro_batch(const BatchShape& b, int m);

 private:
  StepBreakdown compute(const BatchShape& b, bool keep) const;

  std::vector<PipelineStage> stages_;
  std::vector<RooflineCost> costs_;
  std::vector<GpuLink> links_;
  double hidden_ = 0;
  double step_overhead_ = 0, per_sequence_overhead_ = 0;
  double peak_flops_ = 0, peak_bandwidth_ = 0;
};

}  // namespace capsim
