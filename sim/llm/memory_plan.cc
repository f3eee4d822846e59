#include "sim/llm/memory_plan.h"

#include <algorithm>
#include <cmath>

#include "sim/core/units.h"

namespace capsim {

double activation_peak_bytes(const ModelSpec& m, int tp, long long tokens, long long seqs) {
  // The forward pass holds the residual stream, the normed input and the attention output
  // (3 x hidden per token, 16-bit) plus the widest intermediate of a layer: q/k/v output or the
  // MLP's gate+up output and activation (3 x intermediate / TP). MoE layers route each token to
  // k experts, so their intermediate is k x expert_intermediate wide.
  const double t = static_cast<double>(tokens);
  const double qkv = static_cast<double>((m.heads + 2 * m.kv_heads) * m.head_dim) / tp;
  double mlp = 3.0 * static_cast<double>(m.intermediate) / tp;
  if (m.is_moe()) {
    mlp = std::max(mlp, 3.0 * static_cast<double>(m.experts_per_token * m.expert_intermediate +
                                                  m.shared_intermediate) / tp);
  }
  const double forward = t * (3.0 * m.hidden + std::max(qkv, mlp)) * 2.0;
  // The sampler's profile run: fp32 logits and probabilities over the full vocabulary (logits
  // are all-gathered under TP) for max_num_seqs rows.
  const double sampler = static_cast<double>(seqs) * static_cast<double>(m.vocab) * 4.0 * 2.0;
  return std::max(forward, sampler);
}

MemoryPlan plan_memory(const Deployment& d, long long context) {
  MemoryPlan p;
  const ModelSpec& m = d.model;
  p.context = context;
  p.visible = d.card.visible_memory_bytes;
  p.budget = d.limits.gpu_memory_utilization * p.visible;
  p.weights = m.weight_bytes(d.weights) / d.tp;
  const long long profile_seqs =
      std::min<long long>(d.limits.max_num_seqs, d.limits.max_num_batched_tokens);
  p.activations = activation_peak_bytes(m, d.tp, d.limits.max_num_batched_tokens, profile_seqs);
  p.runtime = d.engine.runtime_memory_bytes + (d.tp > 1 ? d.engine.runtime_memory_tp_extra_bytes : 0);
  p.outside_budget = d.card.is_cpu ? 0 : d.engine.outside_budget_bytes;
  p.kv_cache = p.budget - p.weights - p.activations - p.runtime;
  p.kv_bytes_per_token_per_gpu =
      static_cast<double>(m.layers) * m.kv_elements_per_token_per_layer(d.tp) *
      element_bytes(d.kv_cache);
  if (m.encoder_only) {
    p.fits = p.kv_cache >= 0;
    p.shortfall = p.fits ? 0 : -p.kv_cache;
    if (!p.fits) p.reason = "weights, activations and runtime exceed the memory budget";
    return p;
  }
  const double block_bytes = p.kv_bytes_per_token_per_gpu * d.limits.block_size;
  p.kv_blocks = p.kv_cache > 0 ? static_cast<long long>(std::floor(p.kv_cache / block_bytes)) : 0;
  p.kv_tokens = p.kv_blocks * d.limits.block_size;
  const long long blocks_per_seq = (context + d.limits.block_size - 1) / d.limits.block_size;
  p.max_sequences_at_context = blocks_per_seq > 0 ? p.kv_blocks / blocks_per_seq : 0;
  if (p.kv_cache <= 0) {
    p.shortfall = -p.kv_cache + blocks_per_seq * block_bytes;
    p.reason = "weights (" + units::format_bytes_gib(p.weights) + "), activations (" +
               units::format_bytes_gib(p.activations) + ") and runtime (" +
               units::format_bytes_gib(p.runtime) + ") exceed the budget of " +
               units::format_bytes_gib(p.budget) + " per GPU";
  } else if (p.max_sequences_at_context < 1) {
    p.shortfall = blocks_per_seq * block_bytes - p.kv_cache;
    p.reason = "the KV cache (" + std::to_string(p.kv_tokens) +
               " tokens) cannot hold one sequence of " + std::to_string(context) + " tokens";
  } else {
    p.fits = true;
  }
  return p;
}

}  // namespace capsim
