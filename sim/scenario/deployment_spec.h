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
  // vLLM's --kv-offloading-size (GiB, all ranks together) and --kv-offloading-backend (only
  // "native", the OffloadingConnector's CPU tier, is modelled); unset = no CPU tier.
  std::optional<double> kv_offloading_size;
  std::optional<std::string> kv_offloading_backend;
  // vLLM's --speculative-config: a JSON object {"method": ..., "num_speculative_tokens": k,
  // "model": draft} (llm/speculative.h). The acceptance is capsim's own input: one alpha or one
  // per position ("0.8" or "0.9,0.8,0.7"), with an optional decay per position; unset = the
  // method's cited default.
  std::optional<std::string> speculative_config;
  std::optional<std::string> spec_acceptance;
  std::optional<double> spec_acceptance_decay;
  // vLLM's --enable-lora, --max-loras, --max-lora-rank, --max-cpu-loras (llm/lora.h), and the
  // adapters' own rank and target modules (PEFT's r and target_modules; comma-separated).
  std::optional<bool> enable_lora;
  std::optional<int> max_loras;
  std::optional<int> max_lora_rank;
  std::optional<int> max_cpu_loras;
  std::optional<int> lora_rank;
  std::optional<std::string> lora_target_modules;

  // Resolves names against the catalogues and validates; throws capsim::Error.
  Deployment resolve() const;
};

// Parses vLLM's --speculative-config JSON and capsim's acceptance into a config (the draft
// model resolved against the catalogue, k and acceptance defaulted from the method's row).
// Throws capsim::Error naming the flag, the field and what is accepted.
SpeculativeConfig parse_speculative(const std::string& json, const std::optional<std::string>& acceptance,
                                    const std::optional<double>& decay);

// True when `engine` names an engine .yaml file rather than a catalogue entry.
bool is_engine_file(const std::string& engine);

// A lookup's message ("unknown card 'x'") led by the flag it is about, unless it already names
// one: every deployment message starts with its flag, so that a scenario file's reader can put
// the file and field in its place (ScenarioSpec::attribute).
std::string led_by_flag(const std::string& flag, const std::string& message);

}  // namespace capsim::scenario
