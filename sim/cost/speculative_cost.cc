#include "sim/cost/speculative_cost.h"

namespace capsim {

void add_breakdown(StepBreakdown& into, const StepBreakdown& add, double times, const char* group, bool keep) {
  if (times <= 0 || add.seconds <= 0) return;
  into.seconds += add.seconds * times;
  into.flops += add.flops * times;
  into.bytes += add.bytes * times;
  into.compute_s += add.compute_s * times;
  into.memory_s += add.memory_s * times;
  into.communication_s += add.communication_s * times;
  into.overhead_s += add.overhead_s * times;
  if (keep) {
    into.groups.push_back({group, add.flops * times, add.bytes * times, add.compute_s * times,
                           add.memory_s * times, add.seconds * times,
                           add.compute_s >= add.memory_s ? Bound::kCompute : Bound::kMemory});
  }
}

void finish_breakdown(StepBreakdown& b, double peak_flops, double peak_bandwidth) {
  if (b.seconds <= 0) return;
  b.mfu = b.flops / (peak_flops * b.seconds);
  b.mbu = b.bytes / (peak_bandwidth * b.seconds);
}

SpeculativeCost::SpeculativeCost(std::shared_ptr<const StepCost> inner, const Deployment& d)
    : inner_(std::move(inner)), k_(d.speculative->num_speculative_tokens) {
  const RooflineCost target(d);
  peak_flops_ = target.peak_flops();
  peak_bandwidth_ = target.peak_bandwidth();
  std::optional<ModelSpec> p = proposer_model(*d.speculative, d.model);
  if (!p) return;
  proposer_ = std::make_unique<Deployment>(d);
  proposer_->model = *p;
  proposer_->speculative.reset();
  proposer_->lora.reset();
  // EAGLE heads and drafts ship in 16-bit beside a quantised target (the published EAGLE-3
  // heads are bf16). An MTP module is a layer of the target's own checkpoint and loads with its
  // quantisation (vLLM deepseek_mtp.py passes the target's quant_config), so its passes read
  // the fp8 experts DeepSeek-V3 ships, as proposer_weight_bytes counts them in memory.
  if (!d.speculative->info().same_layer_kind) {
    proposer_->weights = native_half(d.card);
    proposer_->expert_weights.reset();
  }
  // The target's step already counts the engine's per-step and per-sequence work.
  proposer_->engine.step_overhead_s = 0;
  proposer_->engine.per_sequence_overhead_s = 0;
  proposer_cost_ = std::make_unique<RooflineCost>(*proposer_);
}

BatchShape SpeculativeCost::first_pass(const BatchShape& b) const {
  BatchShape s = b;
  s.logit_sequences = b.logit_sequences - b.spec_tokens;
  return s;
}

BatchShape SpeculativeCost::later_pass(const BatchShape& b) const {
  BatchShape s;
  const std::int64_t sampling = b.logit_sequences - b.spec_tokens;
  if (sampling <= 0) return s;
  s.decode_sequences = sampling;
  s.decode_context_tokens = b.decode_context_tokens + static_cast<double>(b.spec_tokens);
  s.logit_sequences = sampling;
  return s;
}

StepBreakdown SpeculativeCost::compute(const BatchShape& b, bool keep) const {
  StepBreakdown out = keep ? inner_->breakdown(b) : inner_->totals(b);
  if (!proposer_cost_ || b.empty()) return out;
  add_breakdown(out, proposer_cost_->totals(first_pass(b)), 1.0, "draft_first_pass", keep);
  if (k_ > 1) {
    const BatchShape later = later_pass(b);
    if (!later.empty()) {
      add_breakdown(out, proposer_cost_->totals(later), static_cast<double>(k_ - 1), "draft_later_passes", keep);
    }
  }
  finish_breakdown(out, peak_flops_, peak_bandwidth_);
  return out;
}

}  // namespace capsim
