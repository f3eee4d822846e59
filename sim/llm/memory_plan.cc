#include "sim/llm/memory_plan.h"

#include <algorithm>
#include <cmath>

#include "sim/core/units.h"
#include "sim/llm/parallelism.h"

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

namespace {
std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
}  // namespace

std::int64_t KvLayout::decode_blocks(std::int64_t tokens) const {
  const std::int64_t b = cdiv(tokens, block_size);
  if (!hybrid()) return full_groups * b;
  return full_groups * b + sliding_groups * std::min(b, cdiv(sliding_window - 1, block_size) + 1);
}

std::int64_t KvLayout::peak_blocks(std::int64_t tokens) const {
  const std::int64_t b = cdiv(tokens, block_size);
  if (!hybrid()) return full_groups * b;
  return full_groups * b + sliding_groups * std::min(b, sliding_peak_blocks);
}

std::int64_t KvLayout::longest_sequence(std::int64_t blocks) const {
  if (blocks <= 0) return 0;
  if (!hybrid()) return blocks / full_groups * block_size;
  // Below the cap every block of tokens costs full + sliding groups; above it only full groups.
  const std::int64_t both = full_groups + sliding_groups;
  if (blocks < both * sliding_peak_blocks) return blocks / both * block_size;
  if (full_groups == 0) return std::int64_t{1} << 40;  // sliding layers only: any length
  return (blocks - sliding_groups * sliding_peak_blocks) / full_groups * block_size;
}

KvLayout kv_layout(const Deployment& d, bool hybrid) {
  const ModelSpec& m = d.model;
  KvLayout l;
  l.block_size = d.limits.block_size;
  l.layers_per_group = m.layers;
  const std::int64_t full = m.full_attention_layers(), sliding = m.sliding_layers;
  // vLLM's hybrid manager (docs.vllm.ai design/hybrid_kv_cache_manager) shares one pool of one
  // page size between layer groups. Gemma 2 and gpt-oss split evenly: one full and one sliding
  // group of L/2 layers. Otherwise every group gets as many layers as the smaller kind (capsim's
  // reading, checked on the even case only). With more full layers than sliding ones a
  // full-attention token would need several blocks, which the block manager does not model:
  // such configs count as full attention (docs/cost-model.md#limits).
  // A KV connector turns the hybrid manager off unless asked otherwise (vllm/config/vllm.py
  // VllmConfig.__post_init__, v0.15: "Turning off hybrid kv cache manager because
  // `--kv-transfer-config` is set"), and --kv-offloading-size sets one (the OffloadingConnector).
  if (!hybrid || !m.has_sliding_window() || full > sliding || d.limits.kv_offloading_size > 0) return l;
  l.layers_per_group = full > 0 ? full : sliding;
  l.full_groups = full > 0 ? 1 : 0;
  l.sliding_groups = cdiv(sliding, l.layers_per_group);
  l.sliding_window = m.sliding_window;
  const std::int64_t chunk = d.limits.enable_chunked_prefill
                                 ? d.limits.max_num_batched_tokens
                                 : std::max<std::int64_t>(m.max_context, d.limits.max_model_len);
  l.sliding_peak_blocks = cdiv(m.sliding_window - 1 + chunk, l.block_size) + 1;
  return l;
}

MemoryPlan plan_memory(const Deployment& d, long long context, bool hybrid_kv) {
  MemoryPlan p;
  const ModelSpec& m = d.model;
  p.context = context;
  p.visible = d.card.visible_memory_bytes;
  p.budget = d.limits.gpu_memory_utilization * p.visible;
  p.weights = d.weight_bytes() / d.tp;
  const long long profile_seqs =
      std::min<long long>(d.limits.max_num_seqs, d.limits.max_num_batched_tokens);
  p.activations = activation_peak_bytes(m, d.tp, d.limits.max_num_batched_tokens, profile_seqs);
  p.runtime = d.engine.runtime_memory_bytes +
              (d.tp > 1 || d.pp > 1 || d.dp > 1 ? d.engine.runtime_memory_tp_extra_bytes : 0);
  // The engine's sampler buffers, one [max_num_seqs x vocab] set on every rank (the logits are
  // gathered before sampling): TensorRT-LLM allocates them before it sizes the KV cache
  // (docs/cost-model.md#sampler-buffers).
  p.runtime += d.engine.decoder_bytes_per_seq_vocab * static_cast<double>(d.limits.max_num_seqs) *
               static_cast<double>(m.vocab);
  p.outside_budget = d.card.is_cpu ? 0 : d.engine.outside_budget_bytes;
  // Pipeline stages and expert parallelism change what one GPU holds (sim/llm/parallelism.h).
  // Every stage's KV cache gets the same number of blocks, the smallest any stage fits (vLLM
  // sizes the cache from the minimum over workers), so the plan reports that stage.
  std::int64_t stage_layers = m.layers;
  if (d.beyond_tp()) {
    const double layer_block = m.kv_elements_per_token_per_layer(d.tp) * element_bytes(d.kv_cache) *
                               static_cast<double>(d.limits.block_size);
    double fewest = 0;
    bool first = true;
    for (const PipelineStage& s : pipeline_stages(d)) {
      const double blocks = (p.budget - s.weight_bytes - p.activations - p.runtime) /
                            (layer_block * static_cast<double>(std::max(1, s.layers)));
      if (first || blocks < fewest) {
        fewest = blocks;
        first = false;
        p.weights = s.weight_bytes;
        stage_layers = s.layers;
      }
    }
  }
  p.kv_cache = p.budget - p.weights - p.activations - p.runtime;
  // Speculative decoding's proposer and LoRA's adapter slots sit inside the budget, before KV.
  if (d.speculative) {
    p.proposer_weights = proposer_weight_bytes(
        *d.speculative, m, TargetWeightLayout{d.weights, d.routed_expert_weights(), d.tp, moe_shard_gpus(d)});
    p.kv_cache -= p.proposer_weights;
  }
  if (d.lora && !m.encoder_only) {
    p.lora_slots = lora_reserved_bytes_per_gpu(*d.lora, m, d.tp);
    p.kv_cache -= p.lora_slots;
  }
  p.kv_bytes_per_token_per_gpu =
      static_cast<double>(stage_layers) * m.kv_elements_per_token_per_layer(d.tp) *
      element_bytes(d.kv_cache);
  if (m.encoder_only) {
    p.fits = p.kv_cache >= 0;
    p.shortfall = p.fits ? 0 : -p.kv_cache;
    if (!p.fits) p.reason = "weights, activations and runtime exceed the memory budget";
    return p;
  }
  p.layout = kv_layout(d, hybrid_kv);
  if (stage_layers != m.layers) p.layout.layers_per_group = stage_layers;  // one stage's layers
  const KvLayout& l = p.layout;
  // One pool block: block_size tokens of one group's layers (all layers without sliding windows).
  double block_bytes = static_cast<double>(l.layers_per_group) *
                       m.kv_elements_per_token_per_layer(d.tp) * element_bytes(d.kv_cache) *
                       static_cast<double>(l.block_size);
  // A proposer with layers keeps its KV in the same blocks (one block table per sequence), so
  // each block grows by the proposer's layers at their own width.
  if (d.speculative) {
    if (const std::optional<ModelSpec> draft = proposer_model(*d.speculative, m)) {
      block_bytes += static_cast<double>(draft->layers) * draft->kv_elements_per_token_per_layer(d.tp) *
                     element_bytes(d.kv_cache) * static_cast<double>(l.block_size);
    }
  }
  p.kv_block_bytes = block_bytes;
  p.kv_blocks = p.kv_cache > 0 ? static_cast<long long>(std::floor(p.kv_cache / block_bytes)) : 0;
  if (d.limits.kv_offloading_size > 0) {
    // vLLM's CPUOffloadingSpec: cpu_bytes_to_use (--kv-offloading-size GiB x 2^30) over the bytes
    // of one block on every rank: page_size_bytes x len(kv_cache_tensors) x world_size (TP x PP).
    p.cpu_kv_blocks = static_cast<long long>(std::floor(
        d.limits.kv_offloading_size * 1073741824.0 / (block_bytes * d.tp * d.pp)));
  }
  p.kv_tokens = p.kv_blocks / (l.full_groups + l.sliding_groups) * l.block_size;
  p.kv_longest_sequence = l.longest_sequence(p.kv_blocks);
  // Concurrency counts sequences as they decode; the "holds one" checks use the prefill peak.
  const long long blocks_per_seq = l.decode_blocks(context);
  p.max_sequences_at_context = blocks_per_seq > 0 ? p.kv_blocks / blocks_per_seq : 0;
  const long long peak_blocks = l.peak_blocks(context);
  const long long max_len = d.limits.max_model_len;
  const long long max_len_blocks = max_len > 0 ? l.peak_blocks(max_len) : 0;
  p.max_model_len = max_len > 0 ? max_len
                                : std::min<long long>(m.max_context > 0 ? m.max_context
                                                                        : p.kv_longest_sequence,
                                                      p.kv_longest_sequence);
  if (p.kv_cache <= 0) {
    p.shortfall = -p.kv_cache + static_cast<double>(std::max(max_len_blocks, peak_blocks)) * block_bytes;
    p.reason = "weights (" + units::format_bytes_gib(p.weights) + "), activations (" +
               units::format_bytes_gib(p.activations) + ") and runtime (" +
               units::format_bytes_gib(p.runtime) + ")" +
               (p.proposer_weights > 0 ? " with the speculative proposer (" + units::format_bytes_gib(p.proposer_weights) + ")" : std::string()) +
               (p.lora_slots > 0 ? " with the LoRA slots (" + units::format_bytes_gib(p.lora_slots) + ")" : std::string()) +
               " exceed the budget of " +
               units::format_bytes_gib(p.budget) + " per GPU";
  } else if (max_len > 0 && max_len_blocks > p.kv_blocks) {
    // vLLM refuses to start when the KV cache cannot hold one max_model_len sequence
    // (kv_cache_utils check_enough_kv_cache_memory); its message names both sizes and the
    // longest length that would fit.
    p.shortfall = static_cast<double>(max_len_blocks) * block_bytes - p.kv_cache;
    const double needed = static_cast<double>(max_len_blocks) * block_bytes;
    p.reason = "to serve one request of max_model_len " + std::to_string(max_len) + " tokens, " +
               std::to_string(std::llround(needed)) + " B (" +
               units::format_bytes_gib(needed) + ") of KV cache is needed per GPU, more than the " +
               std::to_string(std::llround(p.kv_cache)) + " B (" +
               units::format_bytes_gib(p.kv_cache) +
               ") available; the estimated maximum model length is " +
               std::to_string(p.kv_longest_sequence) +
               " tokens (raise --gpu-memory-utilization or lower --max-model-len)";
  } else if (peak_blocks > p.kv_blocks || p.max_sequences_at_context < 1) {
    p.shortfall = static_cast<double>(std::max(peak_blocks, blocks_per_seq)) * block_bytes -
                  p.kv_cache;
    p.reason = "the KV cache (" + std::to_string(p.kv_longest_sequence) +
               " tokens) cannot hold one sequence of " + std::to_string(context) + " tokens";
  } else {
    p.fits = true;
  }
  return p;
}

long long fit_context(const Deployment& d) {
  return d.limits.max_model_len > 0 ? d.limits.max_model_len : kDefaultFitContext;
}

MemoryPlan plan_fit(const Deployment& d, std::optional<long long> context) {
  return plan_memory(d, context ? *context : fit_context(d));
}

std::string does_not_fit_message(const Deployment& d, const MemoryPlan& plan) {
  return d.model.name + " does not fit on " + d.card.name + " with TP " + std::to_string(d.tp) +
         (d.pp > 1 ? " x PP " + std::to_string(d.pp) : std::string()) +
         (d.expert_parallel ? " (EP " + std::to_string(d.tp * d.dp) + ")" : std::string()) + ": " + plan.reason +
         " (see `capsim fit`)";
}

}  // namespace capsim
