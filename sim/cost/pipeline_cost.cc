#include "sim/cost/pipeline_cost.h"

#include <algorithm>

#include "sim/cost/roofline_group.h"

namespace capsim {

PipelineCost::PipelineCost(const Deployment& d) : stages_(pipeline_stages(d)) {
  for (const PipelineStage& s : stages_) {
    RooflineScope scope;
    scope.dense_layers = s.dense_layers;
    scope.moe_layers = s.moe_layers;
    scope.layers = s.layers;
    scope.embedding = s.embedding;
    scope.lm_head = s.lm_head;
    scope.overhead = false;  // the engine's CPU work is counted once per micro-batch below
    costs_.emplace_back(d, scope);
  }
  const int pp = stages();
  for (int k = 0; k + 1 < pp; ++k) links_.push_back(link_between(d, k * d.tp, (k + 1) * d.tp));
  hidden_ = static_cast<double>(d.model.hidden);
  step_overhead_ = d.engine.step_overhead_s;
  per_sequence_overhead_ = d.engine.per_sequence_overhead_s;
  peak_flops_ = costs_.front().peak_flops();
  peak_bandwidth_ = costs_.front().peak_bandwidth();
}

double PipelineCost::handoff_seconds(int k, double tokens) const {
  if (k < 0 || k + 1 >= stages()) return 0;
  const GpuLink& l = link(k);
  return l.latency_s + handoff_bytes(tokens) / (l.bandwidth * kLinkEfficiency);
}

int PipelineCost::micro_batches(const BatchShape& b, int pp) {
  return static_cast<int>(std::max<std::int64_t>(1, std::min<std::int64_t>(pp, b.sequences())));
}

BatchShape PipelineCost::micro_batch(const BatchShape& b, int m) {
  if (m <= 1) return b;
  // An even split; counts round up (the largest micro-batch paces the pipeline).
  const auto up = [m](std::int64_t v) { return (v + m - 1) / m; };
  BatchShape s;
  s.prefill_tokens = up(b.prefill_tokens);
  s.prefill_sequences = up(b.prefill_sequences);
  s.prefill_attention_pairs = b.prefill_attention_pairs / m;
  s.prefill_kv_tokens = b.prefill_kv_tokens / m;
  s.decode_sequences = up(b.decode_sequences);
  s.decode_context_tokens = b.decode_context_tokens / m;
  s.logit_sequences = up(b.logit_sequences);
  return s;
}

StepBreakdown PipelineCost::compute(const BatchShape& b, bool keep) const {
  StepBreakdown out;
  if (b.empty()) return out;
  const int pp = stages();
  const int m = micro_batches(b, pp);
  const BatchShape mb = micro_batch(b, m);
  const double tokens = static_cast<double>(mb.tokens());
  double latency = 0, busiest = -1, busiest_handoff = 0;
  int k_star = 0;
  for (int k = 0; k < pp; ++k) {
    const double s = costs_[static_cast<std::size_t>(k)].totals(mb).seconds;
    const double h = handoff_seconds(k, tokens);
    latency += s + h;
    if (s + h > busiest) {
      busiest = s + h;
      busiest_handoff = h;
      k_star = k;
    }
  }
  const double mm = m;
  const double cpu = step_overhead_ + per_sequence_overhead_ * static_cast<double>(b.sequences()) / mm;
  const double cycle = std::max({latency + cpu, mm * busiest, mm * cpu});

  const RooflineCost& c = costs_[static_cast<std::size_t>(k_star)];
  const StepBreakdown s = keep ? c.breakdown(mb) : c.totals(mb);
  out.flops = s.flops * mm;
  out.bytes = s.bytes * mm;
  out.compute_s = s.compute_s * mm;
  out.memory_s = s.memory_s * mm;
  out.communication_s = s.communication_s * mm;
  out.seconds = s.seconds * mm;
  if (keep) {
    for (OperatorCost g : s.groups) {
      g.flops *= mm;
      g.bytes *= mm;
      g.compute_s *= mm;
      g.memory_s *= mm;
      g.seconds *= mm;
      out.groups.push_back(g);
    }
  }
  if (busiest_handoff > 0) {
    add_communication_group(out, keep, "pipeline_send", handoff_bytes(tokens) * mm, busiest_handoff * mm);
  }
  const double work = mm * busiest;
  const double shown_cpu = std::min(cpu, cycle - work);
  const double bubble = std::max(0.0, cycle - work - shown_cpu);
  out.seconds += shown_cpu + bubble;
  out.overhead_s += shown_cpu + bubble;
  if (keep) {
    out.groups.push_back({"overhead", 0, 0, 0, 0, shown_cpu, Bound::kOverhead});
    out.groups.push_back({"pipeline_bubble", 0, 0, 0, 0, bubble, Bound::kOverhead});
  }
  out.mfu = out.flops / (peak_flops_ * out.seconds);
  out.mbu = out.bytes / (peak_bandwidth_ * out.seconds);
  return out;
}

}  // namespace capsim
