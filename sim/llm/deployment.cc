#include "sim/llm/deployment.h"

#include "sim/core/error.h"
#include "sim/hardware/precision_support.h"
#include "sim/llm/parallelism.h"

namespace capsim {

SchedulerLimits default_limits(const Card& card, const EngineProfile& engine) {
  SchedulerLimits l;
  const bool big = card.visible_memory_bytes >= 70.0 * 1073741824.0 &&
                   card.name.find("a100") == std::string::npos && !card.is_cpu;
  l.max_num_batched_tokens = big ? 8192 : 2048;
  l.max_num_seqs = big ? 1024 : 256;
  if (engine.scheduler_policy == "sglang" && !card.is_cpu) {
    l.max_num_batched_tokens = sglang_chunked_prefill_size(card.visible_memory_bytes);
    // max_running_requests: min(max(pool tokens / context_len x 512, 2048), 4096) (model_runner.py);
    // the lower clamp, since the pool is sized later. The KV pool binds long before it.
    l.max_num_seqs = 2048;
  }
  l.block_size = engine.block_size;
  l.gpu_memory_utilization = engine.gpu_memory_utilization;
  l.enable_prefix_caching = engine.prefix_caching;
  l.enable_chunked_prefill = engine.chunked_prefill;
  return l;
}

int sglang_chunked_prefill_size(double gpu_memory_bytes) {
  const double mib = gpu_memory_bytes / 1048576.0;
  const double gib = 1024;
  if (mib < 35 * gib) return 2048;   // T4, 4080 (< 20 GiB), A10, 4090, 5090
  if (mib < 60 * gib) return 4096;   // A100 40GB, L40
  if (mib < 160 * gib) return 8192;  // H100, A100 80GB, H20, H200
  return 16384;                      // B200, MI300
}

Precision native_half(const Card& card) {
  return card.supports(Precision::kBf16) ? Precision::kBf16 : Precision::kFp16;
}

std::string Deployment::weights_label() const {
  std::string out(precision_name(weights));
  if (expert_weights) out += " (experts " + std::string(precision_name(*expert_weights)) + ")";
  return out;
}

Precision Deployment::compute_precision() const {
  switch (weights) {
    case Precision::kFp8:
      return card.supports(Precision::kFp8) ? Precision::kFp8 : native_half(card);
    case Precision::kInt8:
      return card.supports(Precision::kInt8) ? Precision::kInt8 : native_half(card);
    case Precision::kInt4: return native_half(card);
    case Precision::kNvfp4:
    case Precision::kMxfp4: return card.supports(weights) ? weights : native_half(card);
    case Precision::kFp32:
    case Precision::kTf32: return card.supports(Precision::kFp32) ? Precision::kFp32 : weights;
    default: return weights;
  }
}

void Deployment::validate() const {
  if (tp < 1 || tp > 64) {
    throw Error("--tp: " + std::to_string(tp) + " is outside the accepted range 1..64");
  }
  if (model.heads % tp != 0) {
    throw Error("--tp: " + std::to_string(tp) + " does not divide the " +
                std::to_string(model.heads) + " attention heads of " + model.name +
                "; accepted: a divisor of " + std::to_string(model.heads));
  }
  if ((weights == Precision::kBf16 || weights == Precision::kFp16) && !card.supports(weights)) {
    throw Error("--weights: " + std::string(precision_name(weights)) + " is not supported on " +
                card.name + " (" + card.file + ": dense_peak has " + card.supported_precisions() +
                "); use --weights " + std::string(precision_name(native_half(card))));
  }
  if (weights == Precision::kTf32) {
    throw Error("--weights: tf32 is a math mode, not a storage precision; accepted: fp32, "
                "bf16, fp16, fp8, int8, int4, nvfp4, mxfp4");
  }
  if (!is_kv_cache_precision(kv_cache)) {
    throw Error("--kv-cache: " + std::string(precision_name(kv_cache)) +
                " is not a KV-cache precision capsim models; accepted: fp32, bf16, fp16, fp8");
  }
  if ((kv_cache == Precision::kBf16 || kv_cache == Precision::kFp16) &&
      !card.supports(kv_cache)) {
    throw Error("--kv-cache: " + std::string(precision_name(kv_cache)) + " is not supported on " +
                card.name + "; use --kv-cache " + std::string(precision_name(native_half(card))) +
                " or fp8");
  }
  // What the engines have kernels for, per architecture (fp8 on a T4, int8 on an MI300X).
  if (const auto why = precision_unsupported(card, weights, kv_cache)) throw Error(*why);
  if (expert_weights) {
    if (const auto why = precision_unsupported(card, *expert_weights, kv_cache)) {
      throw Error(*why + " (the checkpoint's routed experts, as shipped; --weights bf16 or another "
                  "precision re-quantises them)");
    }
  }
  if (!card.supports(compute_precision())) {
    throw Error("--weights: " + std::string(precision_name(weights)) + " needs " +
                std::string(precision_name(compute_precision())) + " math, which " + card.name +
                " lacks; its dense_peak has " + card.supported_precisions());
  }
  if (limits.max_model_len < 0 ||
      (limits.max_model_len > 0 && model.max_context > 0 &&
       limits.max_model_len > model.max_context)) {
    // vLLM refuses a max_model_len above the one derived from the config
    // (max_position_embeddings) unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set.
    throw Error("--max-model-len: " + std::to_string(limits.max_model_len) +
                (limits.max_model_len < 0 ? " is negative"
                                          : " exceeds " + model.name + "'s context of " +
                                                std::to_string(model.max_context) +
                                                " tokens (max_position_embeddings in " +
                                                model.config_path + ")") +
                "; accepted: 1 to " + std::to_string(model.max_context) + " tokens");
  }
  if (tp > 1 && card.is_cpu) {
    throw Error("--tp: tensor parallelism across CPU servers is not modelled; use --tp 1");
  }
  if (speculative) {
    validate_speculative(*speculative, "--speculative-config");
    if (model.encoder_only) throw Error("--speculative-config: " + model.name + " is encoder-only: it does not decode");
    const SpeculativeConfig& sc = *speculative;
    if (sc.draft && sc.draft->vocab != model.vocab) {
      throw Error("--speculative-config: the draft " + sc.draft->name + " has a vocabulary of " +
                  std::to_string(sc.draft->vocab) + " tokens, the target " + model.name + " of " +
                  std::to_string(model.vocab) + "; a draft model must share the target's tokenizer");
    }
    if (sc.info().proposer == Proposer::kHead && !sc.info().same_layer_kind &&
        model.attention == AttentionKind::kLatent) {
      throw Error("--speculative-config: " + sc.method + " heads for latent-attention (MLA) models are "
                  "not modelled; use method mtp");
    }
  }
  if (lora) {
    validate_lora(*lora, "--enable-lora");
    if (model.encoder_only) throw Error("--enable-lora: " + model.name + " is encoder-only; LoRA serving is modelled for decoders");
    (void)lora_modules(*lora, model);  // throws for MLA and unknown modules
  }
  validate_parallelism(*this);
}

}  // namespace capsim
