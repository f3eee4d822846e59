// What runs where: a model on a card type with a tensor-parallel degree, precisions, an engine
// profile and the engine's scheduler limits (named as vLLM names them).
#pragma once

#include <optional>
#include <string>

#include "sim/hardware/card.h"
#include "sim/hardware/precision.h"
#include "sim/llm/engine_profile.h"
#include "sim/llm/lora.h"
#include "sim/llm/model_spec.h"
#include "sim/llm/speculative.h"

namespace capsim {

struct SchedulerLimits {
  int max_num_seqs = 256;
  int max_num_batched_tokens = 8192;
  int block_size = 16;
  double gpu_memory_utilization = 0.9;
  bool enable_prefix_caching = true;
  bool enable_chunked_prefill = true;
  // vLLM's --max-model-len: the longest prompt + output a replica serves; longer requests are
  // rejected. 0 = not set: capsim then serves up to the model's max_position_embeddings capped
  // by the KV cache (vLLM would refuse to start where the cache is smaller; users then set it).
  long long max_model_len = 0;
  // vLLM's --kv-offloading-size (GiB of host memory for all ranks together, backend "native":
  // the OffloadingConnector's CPU tier of KV blocks; vllm/config/vllm.py
  // _post_init_kv_transfer_config). 0 = off, vLLM's default. engine/cpu_kv_tier.h.
  double kv_offloading_size = 0;
};

// vLLM's defaults for the OpenAI server (`vllm serve`): on a GPU with >= 70 GiB whose name is
// not an A100 (H100, H200, MI300X, B200), max_num_batched_tokens 8192 and max_num_seqs 1024;
// otherwise 2048 and 256 (vllm/engine/arg_utils.py EngineArgs batch defaults; PR #12369,
// PR #17885). Block size and memory utilisation come from the engine profile.
// An engine whose scheduler is "sglang" takes SGLang's instead: max_num_batched_tokens is
// sglang_chunked_prefill_size of the card's memory and max_num_seqs 2048.
SchedulerLimits default_limits(const Card& card, const EngineProfile& engine);

// SGLang's default --chunked-prefill-size for a GPU of `gpu_memory_bytes` (torch's total
// capacity): 2048 below 35 GiB, 4096 below 60 GiB, 8192 below 160 GiB, else 16384
// (python/sglang/srt/server_args.py, ServerArgs._handle_gpu_memory_settings).
int sglang_chunked_prefill_size(double gpu_memory_bytes);

// Tokens on the busiest GPU of an expert-parallel group over the mean (max/mean): UltraEP
// (arXiv 2606.04101, abstract) measures 1.30-4.01 without load balancing across MoE models of
// 106B-671B and 1.01-1.04 with per-batch balancing. 1.3, the low end of the unbalanced range,
// stands for a deployment with vLLM's or SGLang's EPLB; --expert-imbalance overrides it.
inline constexpr double kDefaultExpertImbalance = 1.3;

struct Deployment {
  ModelSpec model;
  Card card;
  EngineProfile engine;
  int tp = 1;
  // Pipeline stages (vLLM --pipeline-parallel-size): the layers split over pp groups of tp GPUs,
  // one batch in flight per stage (sim/llm/parallelism.h, sim/cost/pipeline_cost.h).
  int pp = 1;
  // Data-parallel ranks of one engine (vLLM --data-parallel-size): each its own scheduler and KV
  // cache (a replica in the simulation); on an MoE model with expert parallelism they share the
  // experts and run attention apart (DP attention; sim/cost/expert_parallel.h).
  int dp = 1;
  // vLLM --enable-expert-parallel: the routed experts spread whole over the TP x DP GPUs.
  bool expert_parallel = false;
  // The busiest expert-parallel GPU's token-expert pairs over the mean.
  double expert_imbalance = kDefaultExpertImbalance;
  Precision weights = Precision::kBf16;
  // The routed experts' matrices when they differ from `weights`: a checkpoint run as shipped
  // (gpt-oss: bf16 attention, mxfp4 experts). Unset = `weights`.
  std::optional<Precision> expert_weights;
  Precision kv_cache = Precision::kBf16;
  SchedulerLimits limits;
  // vLLM's --speculative-config (llm/speculative.h); unset = no speculation.
  std::optional<SpeculativeConfig> speculative;
  // vLLM's --enable-lora with its limits (llm/lora.h); unset = no adapters.
  std::optional<LoraConfig> lora;

  // The precision tensor-core math runs at: fp8/int8 weights use fp8/int8 math only where the
  // card has it (otherwise weight-only kernels dequantise to 16-bit); int4 is weight-only;
  // nvfp4/mxfp4 use FP4 math where the card has FP4 tensor cores (Blackwell), else they run
  // weight-only through the Marlin FP4 kernels.
  Precision compute_precision() const;
  Precision routed_expert_weights() const { return expert_weights.value_or(weights); }
  // "bf16", or "bf16 (experts mxfp4)" for a checkpoint run as shipped.
  std::string weights_label() const;
  // Total weight bytes of the model at these precisions (all GPUs of the TP group together).
  double weight_bytes() const { return model.weight_bytes(weights, routed_expert_weights()); }
  // GPUs of one engine (every DP rank, stage and TP rank).
  int gpus() const { return tp * pp * dp; }
  // True when pipeline, data-parallel ranks or expert parallelism change what a GPU holds.
  bool beyond_tp() const { return pp > 1 || dp > 1 || expert_parallel; }
  // Throws capsim::Error when the card cannot run this combination (e.g. bf16 on a T4, TP not
  // dividing the attention heads, TP > 8).
  void validate() const;
};

// The 16-bit type a card runs: bf16 where supported, else fp16.
Precision native_half(const Card& card);

}  // namespace capsim
