#include "sim/plan/finetune.h"

#include <algorithm>
#include <cassert>

#include "sim/core/error.h"

namespace capsim {
namespace {

// Bytes per parameter. Mixed-precision training keeps bf16 weights and gradients and, in the
// optimizer, an fp32 master copy (4 B) plus Adam's two fp32 moments (8 B): 2 + 2 + 12 = 16 B per
// trainable parameter (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training
// Trillion Parameter Models", section 3.1: "2Ψ + 2Ψ + KΨ" with K = 12 for mixed-precision Adam).
constexpr double kBf16 = 2.0;
constexpr double kAdamWStates = 12.0;  // fp32 master 4 + fp32 moments 4 + 4
// bitsandbytes 8-bit Adam keeps each moment in one byte, block-wise quantised (Dettmers et al.
// 2022, "8-bit Optimizers via Block-wise Quantization"); the fp32 master copy stays: 4 + 1 + 1.
// The per-block constants (one fp32 per 2048 values) add 0.2% and are left out.
constexpr double kAdamW8bitStates = 6.0;
// Plain SGD (momentum 0) needs only the fp32 master copy; momentum would add 4 B.
constexpr double kSgdStates = 4.0;
// QLoRA stores the frozen linear weights as 4-bit NormalFloat (0.5 B) with double-quantised
// block constants of 8/64 + 32/(64 x 256) = 0.127 bits per parameter (Dettmers et al. 2023,
// "QLoRA: Efficient Finetuning of Quantized LLMs", section 3, Double Quantization).
constexpr double kNf4 = 0.5;
constexpr double kNf4Constants = 0.127 / 8.0;
// Non-torch memory of a PyTorch process on a GPU: CUDA context, cuBLAS workspace, allocator.
// vLLM measures 1.79 GiB on an H100 at TP 1 and as much again for NCCL at TP 2 (vllm-project/vllm
// PR #10511, also calibration/engines/vllm.yaml memory.runtime); a training process carries the
// same context and libraries.
constexpr double kRuntimeBytes = 1.79 * 1073741824.0;
constexpr double kNcclBytes = 1.79 * 1073741824.0;

double optimizer_bytes_per_param(FinetuneOptimizer o) {
  switch (o) {
    case FinetuneOptimizer::kAdamW:
      return kAdamWStates;
    case FinetuneOptimizer::kAdamW8bit:
      return kAdamW8bitStates;
    case FinetuneOptimizer::kSgd:
      return kSgdStates;
  }
  return kAdamWStates;
}

std::int64_t mlp_params_of_largest_layer(const ModelSpec& m) {
  std::int64_t dense = m.dense_layers > 0 ? m.dense_mlp_params() : 0;
  std::int64_t moe = m.moe_layers > 0 ? m.experts * m.expert_params() + m.shared_expert_params() +
                                            m.router_params()
                                      : 0;
  return std::max(dense, moe);
}

}  // namespace

std::string_view finetune_method_name(FinetuneMethod m) {
  switch (m) {
    case FinetuneMethod::kFull:
      return "full";
    case FinetuneMethod::kLora:
      return "lora";
    case FinetuneMethod::kQlora:
      return "qlora";
  }
  return "full";
}

std::string_view finetune_optimizer_name(FinetuneOptimizer o) {
  switch (o) {
    case FinetuneOptimizer::kAdamW:
      return "adamw";
    case FinetuneOptimizer::kAdamW8bit:
      return "adamw-8bit";
    case FinetuneOptimizer::kSgd:
      return "sgd";
  }
  return "adamw";
}

FinetuneMethod parse_finetune_method(const std::string& text) {
  for (FinetuneMethod m : {FinetuneMethod::kFull, FinetuneMethod::kLora, FinetuneMethod::kQlora}) {
    if (text == finetune_method_name(m)) return m;
  }
  throw Error("--method: '" + text + "' is not a fine-tuning method; accepted: full, lora, qlora");
}

FinetuneOptimizer parse_finetune_optimizer(const std::string& text) {
  for (FinetuneOptimizer o :
       {FinetuneOptimizer::kAdamW, FinetuneOptimizer::kAdamW8bit, FinetuneOptimizer::kSgd}) {
    if (text == finetune_optimizer_name(o)) return o;
  }
  throw Error("--optimizer: '" + text + "' is not an optimizer; accepted: adamw, adamw-8bit, sgd");
}

void FinetuneSetup::validate() const {
  if (batch < 1 || batch > 1'000'000) {
    throw Error("--batch: " + std::to_string(batch) +
                " is not a batch size; accepted: a whole number from 1 to 1000000 (sequences "
                "per GPU per step)");
  }
  if (seq_len < 1 || seq_len > 10'000'000) {
    throw Error("--seq-len: " + std::to_string(seq_len) +
                " is not a sequence length; accepted: a whole number of tokens from 1 to 10000000");
  }
  if (lora_rank) {
    if (method == FinetuneMethod::kFull) {
      throw Error(
          "--lora-rank: applies to --method lora and --method qlora only; full "
          "fine-tuning trains every weight and has no rank");
    }
    if (*lora_rank < 1 || *lora_rank > 65536) {
      throw Error("--lora-rank: " + std::to_string(*lora_rank) +
                  " is not a LoRA rank; accepted: a whole number from 1 to 65536 (PEFT's "
                  "default is 8; 8-64 are common)");
    }
  }
  if (gpus < 1 || gpus > kMaxFinetuneGpus) {
    throw Error("--gpus: " + std::to_string(gpus) + " is not a GPU count; accepted: 1 to " +
                std::to_string(kMaxFinetuneGpus));
  }
}

std::int64_t lora_adapter_params(const ModelSpec& m, int rank) {
  if (m.attention == AttentionKind::kLatent) {
    throw Error("--method lora/qlora: " + m.name +
                " uses multi-head latent attention, whose LoRA adapter shapes capsim does not "
                "model; accepted: --method full, or a model with multi-head/grouped-query "
                "attention");
  }
  const std::int64_t h = m.hidden;
  const std::int64_t q = m.heads * m.head_dim;
  const std::int64_t kv = m.kv_heads * m.head_dim;
  // A LoRA adapter on a linear layer in -> out adds A (r x in) and B (out x r).
  const auto adapter = [rank](std::int64_t in, std::int64_t out) { return rank * (in + out); };
  const std::int64_t attention = adapter(h, q) + 2 * adapter(h, kv) + adapter(q, h);
  const auto mlp = [&](std::int64_t inter, bool gated) {
    return (gated ? 2 : 1) * adapter(h, inter) + adapter(inter, h);
  };
  std::int64_t total = m.layers * attention;
  total += m.dense_layers * mlp(m.intermediate, m.gated_mlp);
  if (m.moe_layers > 0) {
    std::int64_t per_layer = m.experts * mlp(m.expert_intermediate, true);
    if (m.shared_intermediate > 0) per_layer += mlp(m.shared_intermediate, true);
    total += m.moe_layers * per_layer;
  }
  return total;
}

std::string FinetuneMemory::largest_term() const {
  const std::pair<const char*, double> terms[] = {{"weights", weights},
                                                  {"gradients", gradients},
                                                  {"optimizer states", optimizer},
                                                  {"ZeRO-3 gather buffer", gather},
                                                  {"activations", activations},
                                                  {"logits", logits},
                                                  {"runtime", runtime}};
  const auto* best = &terms[0];
  for (const auto& t : terms) {
    if (t.second > best->second) best = &t;
  }
  return best->first;
}

double FinetuneMemory::largest_bytes() const {
  return std::max({weights, gradients, optimizer, gather, activations, logits, runtime});
}

FinetuneMemory plan_finetune(const ModelSpec& m, const FinetuneSetup& s, const Card& card) {
  FinetuneMemory r;
  r.gpus = s.gpus;
  r.params = m.total_params();
  const double params = static_cast<double>(r.params);
  const double n = static_cast<double>(s.gpus);

  // Weights: bf16 for full and LoRA; for QLoRA the linear layers in NF4 with their constants,
  // the rest (embeddings, LM head, norms) in bf16. Adapters (bf16) on top for LoRA and QLoRA.
  double weights = 0;
  double layer_bytes_per_param = kBf16;
  if (s.method == FinetuneMethod::kQlora) {
    const double q = static_cast<double>(m.quantizable_params());
    weights = q * (kNf4 + kNf4Constants) + (params - q) * kBf16;
    layer_bytes_per_param = kNf4 + kNf4Constants;
  } else {
    weights = params * kBf16;
  }
  if (s.adapters()) {
    r.adapter_params = lora_adapter_params(m, s.rank());
    r.trainable_params = r.adapter_params;
    weights += static_cast<double>(r.adapter_params) * kBf16;
  } else {
    r.trainable_params = r.params;
  }
  const double trainable = static_cast<double>(r.trainable_params);

  // ZeRO stage 3 / FSDP full sharding: every GPU holds 1/N of weights, gradients and optimizer
  // states (Rajbhandari et al. 2020, section 5.3, P_os+g+p: memory (2 + 2 + K) Psi / N_d).
  r.weights = weights / n;
  r.gradients = trainable * kBf16 / n;
  r.optimizer = trainable * optimizer_bytes_per_param(s.optimizer) / n;
  if (s.gpus > 1) {
    // capsim estimate: FSDP all-gathers one layer's full parameters before running it and
    // prefetches the next, so two unsharded layers are resident at a time.
    const double layer =
        static_cast<double>(m.attention_params_per_layer() + mlp_params_of_largest_layer(m));
    r.gather = 2.0 * layer * layer_bytes_per_param;
  }

  // Activations kept for the backward pass, one micro-batch of b sequences of s tokens, 16-bit,
  // per transformer layer (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
  // Transformer Models", section 4.1, eq. 1, no tensor or sequence parallelism):
  //   s b h (34 + 5 a s / h) bytes,
  // where 5 a s^2 b holds the attention scores, softmax and dropout mask. FlashAttention keeps
  // none of those (it recomputes them in the backward pass), leaving s b h x 34. With full
  // activation recomputation (section 4.2) only each layer's input is kept, 2 s b h bytes, and
  // one layer's activations are rebuilt at a time during the backward pass.
  const double sbh =
      static_cast<double>(s.seq_len) * static_cast<double>(s.batch) * static_cast<double>(m.hidden);
  const double scores = s.flash_attention
                            ? 0.0
                            : 5.0 * static_cast<double>(m.heads) * static_cast<double>(s.seq_len) /
                                  static_cast<double>(m.hidden);
  const double per_layer = sbh * (34.0 + scores);
  const double layers = static_cast<double>(m.layers);
  r.activations = s.gradient_checkpointing ? layers * 2.0 * sbh + per_layer : layers * per_layer;

  // capsim estimate: a causal LM's head writes s x b x vocab logits in bf16 and the loss works
  // on an fp32 copy: 2 + 4 bytes per logit. An encoder fine-tuned for classification has a
  // head of a few outputs: nothing to count.
  if (!m.encoder_only) {
    r.logits = static_cast<double>(s.seq_len) * static_cast<double>(s.batch) *
               static_cast<double>(m.vocab) * (2.0 + 4.0);
  }

  if (!card.is_cpu) r.runtime = kRuntimeBytes + (s.gpus > 1 ? kNcclBytes : 0.0);
  return r;
}

FinetuneFit fit_finetune(const ModelSpec& m, const FinetuneSetup& s, const Card& card) {
  FinetuneFit f;
  f.card = card.name;
  f.visible = card.visible_memory_bytes;
  f.need = plan_finetune(m, s, card).total();
  f.fits = f.need <= f.visible;
  f.missing = f.fits ? 0.0 : f.need - f.visible;
  if (f.fits) {
    f.gpus_needed = s.gpus;
    return f;
  }
  // Sharding only divides weights, gradients and optimizer states, so need(N) falls towards the
  // unsharded rest; search upwards from the GPUs asked for.
  FinetuneSetup more = s;
  for (int g = s.gpus + 1; g <= kMaxFinetuneGpus; ++g) {
    more.gpus = g;
    if (plan_finetune(m, more, card).total() <= f.visible) {
      f.gpus_needed = g;
      break;
    }
  }
  return f;
}

}  // namespace capsim
