// One deployment as a user names it (model, card, TP, precisions, engine and vLLM's scheduler
// limits, by vLLM's flag names), before it is resolved against the catalogues.
#pragma once

#include <optional>
#include <string>

#include "sim/llm/deployment.h"

namespace capsim::scenario {

struct DeploymentSpec {
  std::string model = "llama-3.1-8b";
  std::string card = "h100-sxm";
  int tp = 1;
  int pp = 1;                          // vLLM --pipeline-parallel-size
  int dp = 1;                          // vLLM --data-parallel-size (ranks of one engine)
  bool enable_expert_parallel = false; // vLLM --enable-expert-parallel
  std::optional<double> expert_imbalance;  // unset: kDefaultExpertImbalance
  std::string weights = "auto";
  std::string kv_cache = "auto";
  std::string engine = "vllm";
  std::optional<int> max_num_seqs;
  std::optional<int> max_num_batched_tokens;
  std::optional<int> block_size;
  std::optional<double> gpu_memory_utilization;
  std::optional<long long> max_model_len;  // vLLM's --max-model-len; unset: see SchedulerLimits
  // vLLM's --async-scheduling (on by default from v0.14); unset = the engine profile's.
  std::optional<bool> async_scheduling;

  // Resolves names against the catalogues and validates; throws capsim::Error.
  Deployment resolve() const;
};

// True when `engine` names an engine .yaml file rather than a catalogue entry.
bool is_engine_file(const std::string& engine);

}  // namespace capsim::scenario
