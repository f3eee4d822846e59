// A transformer's architecture as the memory plan and cost model need it, read from a Hugging
// Face config.json: dense decoders (Llama, Mistral, Qwen, Gemma 2, Phi-3, Falcon, GPT-J), GQA and
// MQA, explicit head_dim, tied embeddings, MoE (Mixtral, Qwen-MoE, Llama 4, gpt-oss, DeepSeek)
// and multi-head latent attention (DeepSeek-V2/V3), and encoder-only BERT.
//
// All counts are per model (not per GPU); bytes depend on the precision chosen at use.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/hardware/precision.h"

namespace capsim {

enum class AttentionKind { kMultiHead, kLatent /* MLA */ };

struct ModelSpec {
  std::string name;        // catalogue name or the config path
  std::string hf_id;       // upstream id when known
  std::string config_path;
  std::string model_type;  // config.json "model_type"
  bool encoder_only = false;

  std::int64_t hidden = 0;
  std::int64_t layers = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t vocab = 0;
  std::int64_t max_context = 0;
  bool tied_embeddings = false;
  bool gated_mlp = true;        // SwiGLU/GeGLU: 3 matrices; otherwise 2
  bool attention_bias = false;  // biases on q/k/v (Qwen2, gpt-oss, BERT, GPT-J none)
  bool output_bias = false;     // bias on o_proj and MLP (gpt-oss, BERT, phi-2)
  std::int64_t norms_per_layer = 2;
  std::int64_t qk_norm_params = 0;  // per layer (Qwen3: 2 x head_dim)

  // Latent attention (MLA). kv_lora_rank + rope dim are cached per token per layer.
  AttentionKind attention = AttentionKind::kMultiHead;
  std::int64_t q_lora_rank = 0;  // 0 = full-rank q projection
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;

  // MLP. Dense layers use `intermediate`; MoE layers use `experts` x `expert_intermediate`,
  // `experts_per_token` of them per token, plus shared experts of `shared_intermediate` total.
  std::int64_t intermediate = 0;
  std::int64_t dense_layers = 0;
  std::int64_t moe_layers = 0;
  std::int64_t experts = 0;
  std::int64_t experts_per_token = 0;
  std::int64_t expert_intermediate = 0;
  std::int64_t shared_intermediate = 0;  // sum over shared experts; 0 when none
  // DeepSeek-V3's noaux_tc routing adds a learned per-expert bias to the router scores
  // (e_score_correction_bias, `experts` parameters per MoE layer).
  bool router_score_bias = false;
  // Checkpoint quantisation as shipped (config.json quantization_config.quant_method): "mxfp4"
  // (gpt-oss: routed experts only), "fp8" (DeepSeek-V3: 128x128 blocks), "" when none or not
  // modelled. `--weights auto` runs the checkpoint as shipped (Deployment::expert_weights,
  // scenario DeploymentSpec::resolve); an explicit --weights re-quantises every linear layer.
  std::string checkpoint_quant;
  // Multi-token-prediction modules shipped beside the stack (config num_nextn_predict_layers;
  // DeepSeek-V3: 1). Not in the parameter counts: vLLM loads them only as the speculative
  // proposer of method mtp (llm/speculative.h).
  std::int64_t mtp_layers = 0;
  std::int64_t extra_params = 0;         // parts outside the text stack (vision tower), counted, never run
  std::string extra_params_note;

  // Sliding-window attention (Gemma 2, gpt-oss): `sliding_layers` of the `layers` attend only to
  // the last `sliding_window` tokens (the query included), so vLLM's hybrid KV-cache manager
  // keeps only that window of their KV (docs/cost-model.md#sliding-window). 0 = every layer is
  // full attention. Read from `layer_types`, or for gemma2 from its fixed alternation.
  std::int64_t sliding_window = 0;
  std::int64_t sliding_layers = 0;

  bool is_moe() const { return moe_layers > 0; }
  bool has_sliding_window() const { return sliding_layers > 0 && sliding_window > 0; }
  std::int64_t full_attention_layers() const { return layers - sliding_layers; }

  // ---- Parameter counts (exact, including biases and norms) ----
  std::int64_t attention_params_per_layer() const;
  std::int64_t dense_mlp_params() const;     // one dense layer's MLP
  std::int64_t expert_params() const;        // one routed expert
  std::int64_t shared_expert_params() const; // all shared experts of one MoE layer
  std::int64_t router_params() const;
  std::int64_t embedding_params() const;     // input embedding (+ untied lm_head separately)
  std::int64_t lm_head_params() const;       // 0 when tied
  std::int64_t total_params() const;
  std::int64_t active_params() const;        // per token: top-k experts + everything else
  // Parameters of linear layers that quantisation applies to (everything but embeddings,
  // lm_head, norms, routers and biases).
  std::int64_t quantizable_params() const;

  // ---- Bytes ----
  // Weight bytes at a precision, with the scale overhead of quantised formats
  // (docs/cost-model.md#weights): fp8/int8 one fp32 scale per output channel; int4 one fp16
  // scale and one fp16 zero point per group of 128 weights; nvfp4 one FP8 scale per 16; mxfp4
  // one E8M0 scale per 32. Embeddings and lm_head stay 16-bit.
  double weight_bytes(Precision weights) const;
  // The same with the routed experts' matrices at `experts` (a checkpoint as shipped: gpt-oss
  // keeps attention in bf16 and its experts in mxfp4).
  double weight_bytes(Precision weights, Precision experts) const;
  // Parameters of all routed experts' matrices (every MoE layer).
  double routed_expert_matrix_params() const;
  // Their bytes at `experts` precision, scales included (0 for a dense model).
  double routed_expert_bytes(Precision experts) const;
  // Bytes of the checkpoint as shipped, 0 when `checkpoint_quant` is empty:
  //   mxfp4: routed-expert matrices at 4 bits + one 8-bit (E8M0) scale per 32 values
  //          = 0.53125 B each (OCP MX v1.0); everything else 16-bit;
  //   fp8:   quantisable weights at 1 B + one fp32 scale per 128x128 block; the rest 16-bit.
  double checkpoint_weight_bytes() const;
  // KV cache bytes per token for all layers at a KV precision (MHA/GQA: 2 x kv_heads x head_dim;
  // MLA: kv_lora_rank + qk_rope_head_dim, as vLLM's MLA backends cache).
  double kv_bytes_per_token(Precision kv) const;
  // Elements cached per token per layer, for one TP rank (heads replicated when TP > kv_heads).
  double kv_elements_per_token_per_layer(int tp) const;
  // KV bytes one sequence of `tokens` tokens holds, all layers, per layer kind: full-attention
  // layers keep every token, sliding-window layers at most `sliding_window` tokens. Token
  // granularity (no block rounding; the memory plan rounds to blocks). Equals
  // tokens x kv_bytes_per_token(kv) for a model without sliding windows.
  double kv_bytes_for_sequence(std::int64_t tokens, Precision kv) const;

  // ---- FLOPs ----
  // Matmul FLOPs per token excluding attention scores and the LM head (2 x active linear
  // params of the layers); the LM head runs only for sequences that sample.
  double linear_flops_per_token() const;
  // Attention FLOPs for one query token against `context` keys, all layers (QK^T and PV).
  double attention_flops_per_token(double context) const;
};

// Reads a Hugging Face config.json. Throws capsim::Error naming the file and field for
// malformed JSON, missing fields or unsupported architectures.
ModelSpec load_model_config(const std::string& path);

struct ModelEntry {
  std::string name;
  std::string hf_id;
  std::vector<std::string> aliases;
  std::string dir;  // models/<name>
  std::string source;
  std::optional<double> published_total;
  std::optional<double> published_active;
};

class ModelCatalogue {
 public:
  // Scans `dir`/*/model.yaml (with config.json beside it).
  static ModelCatalogue load_dir(const std::string& dir);
  // One entry as load_dir reads it from `model_dir`/model.yaml (no check against the others).
  static ModelEntry load_entry(const std::string& model_dir);
  // The model of a catalogue entry: its config.json under the entry's name and Hugging Face id.
  static ModelSpec spec_of(const ModelEntry& e);
  // By catalogue name, Hugging Face id, alias (case-insensitive), or a path to a config.json or
  // a folder holding one. Unknown names throw with "did you mean" and the accepted names.
  ModelSpec find(const std::string& name_or_path) const;
  const ModelEntry* entry(const std::string& name) const;
  const std::vector<ModelEntry>& entries() const { return entries_; }
  std::vector<std::string> names() const;

 private:
  std::vector<ModelEntry> entries_;
};

}  // namespace capsim
