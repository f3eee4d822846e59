#include "sim/cost/lora_cost.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "sim/cost/roofline_cost.h"
#include "sim/cost/speculative_cost.h"

namespace capsim {

LoraCost::LoraCost(std::shared_ptr<const StepCost> inner, const Deployment& d) : inner_(std::move(inner)) {
  const LoraConfig& c = *d.lora;
  const double tp = d.tp;
  // vLLM's wrappers: MergedQKVParallelLinearWithLoRA, RowParallelLinearWithLoRA (o_proj),
  // MergedColumnParallelLinearWithLoRA (gate_up_proj), RowParallelLinearWithLoRA (down_proj).
  std::map<std::string, Wrapper> by;
  for (const LoraModule& m : lora_modules(c, d.model)) {
    const std::string w = (m.name == "q_proj" || m.name == "k_proj" || m.name == "v_proj") ? "qkv"
                          : (m.name == "gate_proj" || m.name == "up_proj")                 ? "gate_up"
                                                                                            : m.name;
    const double in = m.row_parallel ? m.in / tp : m.in;
    const double out = m.row_parallel ? m.out : m.out / tp;
    Wrapper& x = by[w];
    x.in_out += in + out;
    x.act = std::max(x.act, in) + out;  // the input once, every slice's output
    x.layers = static_cast<double>(m.layers);
  }
  for (const auto& [name, w] : by) wrappers_.push_back(w);
  rank_ = c.max_lora_rank;
  const RooflineCost base(d);
  gemm_rate_ = base.gemm_flops_per_s();
  bandwidth_ = base.bytes_per_s();
  peak_flops_ = base.peak_flops();
  peak_bandwidth_ = base.peak_bandwidth();
  kernel_floor_ = d.card.kernel_floor_s;
  const double pcie = d.card.pcie_bandwidth();
  load_s_ = pcie > 0 ? lora_adapter_bytes(c, d.model) / tp / pcie : 0;
}

StepBreakdown LoraCost::lora_only(const BatchShape& b) const {
  StepBreakdown out;
  if (b.lora_tokens > 0) {
    const double t = static_cast<double>(b.lora_tokens);
    const double adapters = static_cast<double>(std::max<std::int64_t>(1, b.lora_adapters));
    for (const Wrapper& w : wrappers_) {
      const double flops = 2.0 * t * rank_ * w.in_out;
      const double bytes = adapters * rank_ * w.in_out * 2.0 + t * (w.act + rank_) * 2.0;
      const double c = flops / gemm_rate_;
      const double m = bytes / bandwidth_;
      const double s = std::max(std::hypot(c, m), 2.0 * kernel_floor_) * w.layers;
      out.seconds += s;
      out.flops += flops * w.layers;
      out.bytes += bytes * w.layers;
      if (c >= m) out.compute_s += s; else out.memory_s += s;
    }
  }
  if (b.lora_loads > 0) {
    const double s = load_seconds(b.lora_loads);
    out.seconds += s;
    out.communication_s += s;
  }
  return out;
}

StepBreakdown LoraCost::compute(const BatchShape& b, bool keep) const {
  StepBreakdown out = keep ? inner_->breakdown(b) : inner_->totals(b);
  if (b.empty()) return out;
  add_breakdown(out, lora_only(b), 1.0, "lora", keep);
  finish_breakdown(out, peak_flops_, peak_bandwidth_);
  return out;
}

}  // namespace capsim
