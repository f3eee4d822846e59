// Does fine-tuning model M fit on card C: the memory of one training step per GPU, by term
// (docs/beyond-llm.md#finetune). Full fine-tuning, LoRA and QLoRA; AdamW, 8-bit AdamW or SGD;
// optional full activation checkpointing; ZeRO-3 / FSDP sharding across N data-parallel GPUs.
//
// Contract: all byte counts are per GPU. Parameter counts come from ModelSpec (exact for the
// config). The per-term formulas and their sources are in finetune.cc and the docs; every
// estimate that is not a count says so there.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/hardware/card.h"
#include "sim/llm/model_spec.h"

namespace capsim {

enum class FinetuneMethod { kFull, kLora, kQlora };
enum class FinetuneOptimizer { kAdamW, kAdamW8bit, kSgd };

std::string_view finetune_method_name(FinetuneMethod m);        // "full", "lora", "qlora"
std::string_view finetune_optimizer_name(FinetuneOptimizer o);  // "adamw", "adamw-8bit", "sgd"
// Throw capsim::Error "--method: 'x' is not a fine-tuning method; accepted: full, lora, qlora"
// (and the same shape for --optimizer).
FinetuneMethod parse_finetune_method(const std::string& text);
FinetuneOptimizer parse_finetune_optimizer(const std::string& text);

inline constexpr int kDefaultLoraRank = 8;  // PEFT LoraConfig's default r

struct FinetuneSetup {
  FinetuneMethod method = FinetuneMethod::kFull;
  FinetuneOptimizer optimizer = FinetuneOptimizer::kAdamW;
  long long batch = 1;                  // sequences per GPU per step (the micro-batch)
  long long seq_len = 512;              // tokens per sequence
  std::optional<int> lora_rank;         // lora/qlora only; kDefaultLoraRank when unset
  bool gradient_checkpointing = false;  // full activation recomputation
  bool flash_attention = false;         // attention scores not stored (FlashAttention / SDPA)
  int gpus = 1;  // data-parallel GPUs; > 1 shards weights, gradients and optimizer (ZeRO-3)

  int rank() const { return lora_rank.value_or(kDefaultLoraRank); }
  bool adapters() const { return method != FinetuneMethod::kFull; }
  // Throws capsim::Error naming the flag, the value and what is accepted.
  void validate() const;
};

// Parameters LoRA adds with rank `rank` on the linear layers q, k, v, o, gate, up, down of every
// layer (gate only where the MLP is gated; every routed and shared expert of MoE layers):
// sum over those layers of rank x (in_features + out_features).
// Throws capsim::Error for multi-head latent attention, whose adapter shapes are not modelled.
std::int64_t lora_adapter_params(const ModelSpec& m, int rank);

struct FinetuneMemory {
  // Counts.
  std::int64_t params = 0;            // all parameters of the model
  std::int64_t trainable_params = 0;  // params (full) or adapter params (lora, qlora)
  std::int64_t adapter_params = 0;    // 0 for full
  int gpus = 1;
  // Bytes per GPU.
  double weights = 0;      // model weights (+ adapters), after sharding
  double gradients = 0;    // of the trainable parameters, after sharding
  double optimizer = 0;    // optimizer states of the trainable parameters, after sharding
  double gather = 0;       // ZeRO-3 / FSDP: full parameters of the running and the next layer
  double activations = 0;  // stored for the backward pass, one micro-batch
  double logits = 0;       // LM-head output and its fp32 copy for the loss
  double runtime = 0;      // CUDA context, library workspaces, NCCL buffers

  double total() const {
    return weights + gradients + optimizer + gather + activations + logits + runtime;
  }
  // The largest term's name ("optimizer states", "weights", "activations", ...).
  std::string largest_term() const;
  double largest_bytes() const;
};

// The memory of one training step on one GPU of `card`. REQUIRES: s.validate() passed.
// `card` decides the runtime term (none on a CPU card).
FinetuneMemory plan_finetune(const ModelSpec& m, const FinetuneSetup& s, const Card& card);

struct FinetuneFit {
  std::string card;
  double visible = 0;  // bytes a process can use (Card::visible_memory_bytes)
  double need = 0;     // FinetuneMemory::total()
  bool fits = false;
  double missing = 0;  // need - visible when it does not fit, else 0
  // Fewest data-parallel GPUs of this card that fit with ZeRO-3 sharding (same micro-batch per
  // GPU), 0 when even kMaxGpus do not (activations and runtime are not sharded).
  int gpus_needed = 0;
};

inline constexpr int kMaxFinetuneGpus = 512;

FinetuneFit fit_finetune(const ModelSpec& m, const FinetuneSetup& s, const Card& card);

}  // namespace capsim
