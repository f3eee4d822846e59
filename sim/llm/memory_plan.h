// Where one GPU's memory goes when a deployment runs, and how many KV-cache blocks remain
// (docs/cost-model.md#memory-plan). Mirrors vLLM's accounting (vllm-v1-notes.md section 3):
//   budget   = gpu_memory_utilization x visible memory
//   kv_bytes = budget - weights/TP - activation peak - runtime memory
//   blocks   = floor(kv_bytes / (block_size x layers x kv bytes per token per layer per rank))
// CUDA context and graphs sit outside the budget, in the headroom.
//
// Sliding-window models (docs/cost-model.md#sliding-window) are laid out as vLLM's hybrid
// KV-cache manager lays them out: layers of one kind form groups of the same size, every pool
// block holds `block_size` tokens of one group, and a sequence takes blocks of each full group
// for all its tokens but blocks of each sliding group only for its window.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/llm/deployment.h"

namespace capsim {

// How one sequence's tokens map to pool blocks. The default is full attention: one group of all
// layers, one block per `block_size` tokens.
struct KvLayout {
  std::int64_t block_size = 16;
  std::int64_t layers_per_group = 0;   // layers whose KV one pool block holds
  std::int64_t full_groups = 1;        // blocks per block_size tokens, for all tokens
  std::int64_t sliding_groups = 0;     // blocks per block_size tokens, within the window only
  std::int64_t sliding_window = 0;     // tokens, the query token included
  // Most sliding blocks a sequence holds while it prefills in chunks of up to
  // max_num_batched_tokens: the window's last w-1 tokens plus the chunk, plus one block of
  // misalignment (vLLM's SlidingWindowSpec.max_memory_usage_bytes bound).
  std::int64_t sliding_peak_blocks = 0;

  bool hybrid() const { return sliding_groups > 0; }
  // Blocks one sequence of `tokens` tokens holds while it decodes (window + one block for the
  // sliding groups: vLLM frees blocks wholly before the window, SlidingWindowManager).
  std::int64_t decode_blocks(std::int64_t tokens) const;
  // Blocks it can hold at most, in the prefill chunk that reaches `tokens`.
  std::int64_t peak_blocks(std::int64_t tokens) const;
  // The longest sequence whose peak fits in `blocks` blocks (0 when none).
  std::int64_t longest_sequence(std::int64_t blocks) const;
};

// REQUIRES: d.validate() passed. `hybrid` false lays every model out as full attention (for
// schedulers other than vLLM V1's, whose whole-prompt admissions the sliding-window peak bound
// does not cover).
KvLayout kv_layout(const Deployment& d, bool hybrid = true);

struct MemoryPlan {
  // Per GPU of the TP group, bytes.
  double visible = 0;       // what the driver reports
  double budget = 0;        // gpu_memory_utilization x visible
  double weights = 0;
  double activations = 0;   // peak workspace of a forward pass at max_num_batched_tokens
  double runtime = 0;       // engine runtime memory (NCCL, cuBLAS, allocator; the engine's
                            // sampler buffers for max_num_seqs slots where its profile has them)
  double proposer_weights = 0;  // speculative decoding's draft model or head (llm/speculative.h)
  double lora_slots = 0;    // LoRA adapter slots vLLM preallocates (llm/lora.h)
  double kv_cache = 0;      // what remains for KV (negative when it does not fit)
  double outside_budget = 0;  // context + CUDA graphs, in the headroom
  double kv_bytes_per_token_per_gpu = 0;  // all layers, as if every layer were full attention
  double kv_block_bytes = 0;  // one pool block: block_size x layers_per_group x bytes per layer
  KvLayout layout;
  long long kv_blocks = 0;  // per GPU = per replica (every rank holds the same blocks)
  // --kv-offloading-size: blocks of the CPU tier (engine/cpu_kv_tier.h), each kv_block_bytes per
  // rank; 0 without offloading.
  long long cpu_kv_blocks = 0;
  // Token capacity as vLLM logs it ("GPU KV cache size"): kv_blocks / layer groups x
  // block_size; kv_blocks x block_size for full attention.
  long long kv_tokens = 0;
  // The longest single sequence the blocks hold (at its prefill peak): kv_tokens for full
  // attention, more for sliding-window models, whose sliding groups hold only the window
  // (the effective capacity, docs/cost-model.md#sliding-window). Caps max_model_len when unset.
  long long kv_longest_sequence = 0;
  long long max_model_len = 0;  // the context the replica serves (0 before it is known)
  bool fits = false;        // weights + activations + runtime fit, KV holds one `context` and one
                            // max_model_len sequence when --max-model-len is set
  double shortfall = 0;     // bytes per GPU missing when it does not fit
  long long context = 0;    // the sequence length asked about
  long long max_sequences_at_context = 0;  // KV-limited (not capped by max_num_seqs)
  std::string reason;       // why it does not fit, empty when it fits
};

// REQUIRES: d.validate() passed. `context` is the sequence length (prompt + output) for the
// concurrency figure and the minimum the KV cache must hold.
// `hybrid_kv`: lay sliding-window layers out as vLLM's hybrid KV-cache manager does (kv_layout).
MemoryPlan plan_memory(const Deployment& d, long long context, bool hybrid_kv = true);

// The one "does this deployment fit" verdict of every command (fit, compare, plan, check's
// fits_in_memory): the memory plan for one sequence of `context` tokens, by default
// fit_context(d). The simulator itself runs any deployment whose KV cache holds a single token
// (it caps max_model_len at the KV cache and rejects every longer request), so without this
// check a deployment that cannot hold one ordinary request would "run" with no request served.
// REQUIRES: d.validate() passed.
MemoryPlan plan_fit(const Deployment& d, std::optional<long long> context = std::nullopt);
// The sequence length the verdict asks about when none is given: --max-model-len when set
// (vLLM refuses to start unless one such sequence fits), else kDefaultFitContext.
inline constexpr long long kDefaultFitContext = 4096;
long long fit_context(const Deployment& d);
// "llama-3.1-70b does not fit on h100-sxm with TP 1: <plan.reason> (see `capsim fit`)".
std::string does_not_fit_message(const Deployment& d, const MemoryPlan& plan);

// Peak activation workspace per GPU of one forward pass of `tokens` tokens over `seqs`
// sequences (the profile run), bytes.
double activation_peak_bytes(const ModelSpec& m, int tp, long long tokens, long long seqs);

struct FitSuggestion {
  std::string change;  // "--weights int4", "--tp 2", "--card h100-sxm"
  std::string result;  // "fits: 1.2M KV tokens"
};

}  // namespace capsim
