// Where one GPU's memory goes when a deployment runs, and how many KV-cache blocks remain
// (docs/cost-model.md#memory-plan). Mirrors vLLM's accounting (vllm-v1-notes.md section 3):
//   budget   = gpu_memory_utilization x visible memory
//   kv_bytes = budget - weights/TP - activation peak - runtime memory
//   blocks   = floor(kv_bytes / (block_size x layers x kv bytes per token per layer per rank))
// CUDA context and graphs sit outside the budget, in the headroom.
#pragma once

#include <string>
#include <vector>

#include "sim/llm/deployment.h"

namespace capsim {

struct MemoryPlan {
  // Per GPU of the TP group, bytes.
  double visible = 0;       // what the driver reports
  double budget = 0;        // gpu_memory_utilization x visible
  double weights = 0;
  double activations = 0;   // peak workspace of a forward pass at max_num_batched_tokens
  double runtime = 0;       // engine runtime memory (NCCL, cuBLAS, allocator)
  double kv_cache = 0;      // what remains for KV (negative when it does not fit)
  double outside_budget = 0;  // context + CUDA graphs, in the headroom
  double kv_bytes_per_token_per_gpu = 0;
  long long kv_blocks = 0;  // per GPU = per replica (every rank holds the same blocks)
  long long kv_tokens = 0;  // kv_blocks x block_size
  bool fits = false;        // weights + activations + runtime fit and KV holds one `context`
  double shortfall = 0;     // bytes per GPU missing when it does not fit
  long long context = 0;    // the sequence length asked about
  long long max_sequences_at_context = 0;  // KV-limited (not capped by max_num_seqs)
  std::string reason;       // why it does not fit, empty when it fits
};

// REQUIRES: d.validate() passed. `context` is the sequence length (prompt + output) for the
// concurrency figure and the minimum the KV cache must hold.
MemoryPlan plan_memory(const Deployment& d, long long context);

// Peak activation workspace per GPU of one forward pass of `tokens` tokens over `seqs`
// sequences (the profile run), bytes.
double activation_peak_bytes(const ModelSpec& m, int tp, long long tokens, long long seqs);

struct FitSuggestion {
  std::string change;  // "--weights int4", "--tp 2", "--card h100-sxm"
  std::string result;  // "fits: 1.2M KV tokens"
};

}  // namespace capsim
