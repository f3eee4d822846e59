#include "sim/llm/model_spec.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/input_limits.h"
#include "sim/core/yaml_fields.h"
#include "sim/llm/model_config_json.h"

namespace capsim {
namespace {

using nlohmann::json;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// The first of `keys` present and non-null in `cfg`, as a whole number in [0, hi]. `hi` bounds
// every dimension so that the parameter counts below (products of up to four dimensions, summed
// over a handful of terms) stay far inside int64; see kMax* below.
std::optional<std::int64_t> opt_int(const json& cfg, std::initializer_list<const char*> keys,
                                    const std::string& file, std::int64_t hi) {
  for (const char* k : keys) {
    const auto it = cfg.find(k);
    if (it == cfg.end() || it->is_null()) continue;
    const std::string where = file + ": " + k;
    if (it->is_number_unsigned()) {
      const auto v = it->get<std::uint64_t>();
      if (v > static_cast<std::uint64_t>(hi)) {
        throw Error(where + ": " + std::to_string(v) + " is out of range; accepted: 0.." +
                    std::to_string(hi));
      }
      return static_cast<std::int64_t>(v);
    }
    if (it->is_number_integer()) {
      throw Error(where + ": " + it->dump() + " is negative; accepted: 0.." + std::to_string(hi));
    }
    if (!it->is_number()) {
      throw Error(where + ": expected a whole number, got " + json_type_word(*it));
    }
    return checked::whole_in(it->get<double>(), 0, hi, where);
  }
  return std::nullopt;
}

std::int64_t req_int(const json& cfg, std::initializer_list<const char*> keys,
                     const std::string& file, std::int64_t hi) {
  if (auto v = opt_int(cfg, keys, file, hi)) {
    if (*v == 0) {
      throw Error(file + ": " + *keys.begin() + ": must be > 0; accepted: 1.." +
                  std::to_string(hi));
    }
    return *v;
  }
  throw Error(file + ": missing field '" + *keys.begin() +
              "' (a Hugging Face config.json of a transformer has it)");
}

// As opt_int, for a field that, when given, must be >= 1 (a model whose context is 0 tokens
// serves nothing); the message names the key the file used.
std::optional<std::int64_t> opt_positive_int(const json& cfg, std::initializer_list<const char*> keys,
                                             const std::string& file, std::int64_t hi) {
  for (const char* k : keys) {
    const auto it = cfg.find(k);
    if (it == cfg.end() || it->is_null()) continue;
    const std::int64_t v = *opt_int(cfg, {k}, file, hi);
    if (v == 0) throw Error(file + ": " + k + ": must be > 0; accepted: 1.." + std::to_string(hi));
    return v;
  }
  return std::nullopt;
}

// Bounds on config.json dimensions. Each is several times the largest published model's
// (hidden 16384, 126 layers, 128 heads, head_dim 256, vocab 262k, intermediate 53248, 256
// experts), and together they keep every parameter count below 2^61 (attention
// 2^17*2^10*2^12*2 per layer, MoE 2^10 experts * 3*2^17*2^20 per layer, times 2^10 layers).
constexpr std::int64_t kMaxHidden = 1 << 17;
constexpr std::int64_t kMaxLayers = 1 << 10;
constexpr std::int64_t kMaxHeads = 1 << 10;
constexpr std::int64_t kMaxHeadDim = 1 << 12;
constexpr std::int64_t kMaxVocab = 1 << 23;
constexpr std::int64_t kMaxIntermediate = 1 << 20;
constexpr std::int64_t kMaxExperts = 1 << 10;
constexpr std::int64_t kMaxRank = 1 << 14;
constexpr std::int64_t kMaxContext = std::int64_t{1} << 31;

bool opt_bool(const json& cfg, const char* key, bool fallback) {
  const auto it = cfg.find(key);
  if (it == cfg.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return fallback;
  return it->get<bool>();
}

// Defaults of `tie_word_embeddings` where a config omits it: the transformers config class of
// each model_type sets its own default (PretrainedConfig: true; LlamaConfig etc.: false).
bool default_tied(const std::string& model_type) {
  static const std::vector<std::string> tied = {"gemma", "gemma2", "gemma3_text", "falcon",
                                                "bert", "phi", "gpt2"};
  return std::find(tied.begin(), tied.end(), model_type) != tied.end();
}

// Which layers attend through a sliding window. `layer_types` (transformers >= 4.53: gpt-oss,
// Gemma 3) names each layer's kind; Gemma 2 configs predate it and alternate by construction
// (transformers Gemma2DecoderLayer: layer i is sliding when i is even, so ceil(L/2) layers).
// Other configs that carry `sliding_window` (Mistral v0.1, Phi-3, Qwen2 with
// use_sliding_window false) are counted as full attention: docs/cost-model.md#limits.
void read_sliding_window(const json& cfg, const std::string& file, ModelSpec& m) {
  std::int64_t sliding = 0;
  bool typed = false;
  if (const auto it = cfg.find("layer_types"); it != cfg.end() && !it->is_null()) {
    if (!it->is_array() || static_cast<std::int64_t>(it->size()) != m.layers) {
      throw Error(file + ": layer_types: expected a list of " + std::to_string(m.layers) +
                  " strings (one per layer, num_hidden_layers), got " + it->dump());
    }
    for (std::size_t i = 0; i < it->size(); ++i) {
      const json& v = (*it)[i];
      const std::string kind = v.is_string() ? v.get<std::string>() : v.dump();
      if (kind == "sliding_attention") {
        ++sliding;
      } else if (kind != "full_attention") {
        throw Error(file + ": layer_types[" + std::to_string(i) + "]: '" + kind +
                    "' is not a layer kind capsim models; accepted: sliding_attention, "
                    "full_attention");
      }
    }
    typed = true;
  } else if (m.model_type == "gemma2") {
    sliding = (m.layers + 1) / 2;
    typed = true;
  }
  if (!typed || sliding == 0) return;
  const auto window = opt_int(cfg, {"sliding_window"}, file, kMaxContext);
  if (!window || *window == 0) {
    throw Error(file + ": sliding_window: required (a whole number of tokens > 0) when " +
                (m.model_type == "gemma2" ? std::string("model_type is gemma2")
                                          : std::string("layer_types has sliding_attention")));
  }
  m.sliding_window = *window;
  m.sliding_layers = sliding;
}

}  // namespace

std::int64_t ModelSpec::attention_params_per_layer() const {
  std::int64_t p = 0;
  if (attention == AttentionKind::kLatent) {
    const std::int64_t qk = qk_nope_head_dim + qk_rope_head_dim;
    if (q_lora_rank > 0) {
      p += hidden * q_lora_rank + q_lora_rank + q_lora_rank * heads * qk;  // q_a, norm, q_b
    } else {
      p += hidden * heads * qk;
    }
    p += hidden * (kv_lora_rank + qk_rope_head_dim) + kv_lora_rank;  // kv_a + its norm
    p += kv_lora_rank * heads * (qk_nope_head_dim + v_head_dim);    // kv_b
    p += heads * v_head_dim * hidden;                                // o
    return p;
  }
  const std::int64_t q = heads * head_dim, kv = kv_heads * head_dim;
  p = hidden * q + 2 * hidden * kv + q * hidden;
  if (attention_bias) p += q + 2 * kv;
  if (output_bias) p += hidden;
  p += qk_norm_params;
  if (model_type == "gpt_oss") p += heads;  // attention sinks: one learned logit per head
  return p;
}

std::int64_t ModelSpec::dense_mlp_params() const {
  const std::int64_t mats = gated_mlp ? 3 : 2;
  std::int64_t p = mats * hidden * intermediate;
  if (output_bias) p += (gated_mlp ? 2 : 1) * intermediate + hidden;
  return p;
}

std::int64_t ModelSpec::expert_params() const {
  std::int64_t p = 3 * hidden * expert_intermediate;
  if (output_bias) p += 2 * expert_intermediate + hidden;
  return p;
}

std::int64_t ModelSpec::shared_expert_params() const {
  if (shared_intermediate == 0) return 0;
  std::int64_t p = 3 * hidden * shared_intermediate;
  if (model_type == "qwen2_moe") p += hidden;  // shared_expert_gate: hidden -> 1
  return p;
}

std::int64_t ModelSpec::router_params() const {
  if (experts == 0) return 0;
  return hidden * experts + (output_bias ? experts : 0) + (router_score_bias ? experts : 0);
}

std::int64_t ModelSpec::embedding_params() const { return vocab * hidden; }

std::int64_t ModelSpec::lm_head_params() const {
  if (encoder_only || tied_embeddings) return 0;
  return vocab * hidden + ((model_type == "gptj" || model_type == "phi") ? vocab : 0);
}

std::int64_t ModelSpec::total_params() const {
  const std::int64_t norms = layers * norms_per_layer * hidden + (encoder_only ? 0 : hidden);
  std::int64_t p = embedding_params() + lm_head_params() + norms;
  p += layers * attention_params_per_layer();
  p += dense_layers * dense_mlp_params();
  p += moe_layers * (experts * expert_params() + shared_expert_params() + router_params());
  if (encoder_only) {
    // BERT: position and token-type embeddings, embedding LayerNorm, pooler.
    p += max_context * hidden + 2 * hidden + 2 * hidden + hidden * hidden + hidden;
  }
  if (model_type == "gptj" || model_type == "phi") p += hidden;  // final LayerNorm has a bias too
  return p + extra_params;
}

std::int64_t ModelSpec::active_params() const {
  const std::int64_t inactive = moe_layers * (experts - experts_per_token) * expert_params();
  return total_params() - inactive - extra_params;
}

std::int64_t ModelSpec::quantizable_params() const {
  std::int64_t linear = 0;
  if (attention == AttentionKind::kLatent) {
    linear = attention_params_per_layer() - kv_lora_rank - (q_lora_rank > 0 ? q_lora_rank : 0);
  } else {
    linear = hidden * heads * head_dim * 2 + 2 * hidden * kv_heads * head_dim;
  }
  linear *= layers;
  linear += dense_layers * (gated_mlp ? 3 : 2) * hidden * intermediate;
  linear += moe_layers * (experts * 3 * hidden * expert_intermediate +
                          3 * hidden * shared_intermediate);
  return linear;
}

double ModelSpec::weight_bytes(Precision w) const {
  const double q = static_cast<double>(quantizable_params());
  const double rest = static_cast<double>(total_params() - quantizable_params());
  // Output channels of the quantised matrices, for per-channel scales.
  const double rows =
      static_cast<double>(layers) * (heads * head_dim + 2 * kv_heads * head_dim + hidden) +
      static_cast<double>(dense_layers) * ((gated_mlp ? 2 : 1) * intermediate + hidden) +
      static_cast<double>(moe_layers) * (experts * (2 * expert_intermediate + hidden) +
                                         (shared_intermediate ? 2 * shared_intermediate + hidden : 0));
  switch (w) {
    case Precision::kFp32:
    case Precision::kTf32: return 4 * (q + rest);
    case Precision::kFp16:
    case Precision::kBf16: return 2 * (q + rest);
    case Precision::kFp8:
    case Precision::kInt8: return q + 4 * rows + 2 * rest;
    case Precision::kInt4:
    case Precision::kNvfp4:
    case Precision::kMxfp4: return quantized_weight_bytes(w) * q + 2 * rest;
  }
  return 2 * (q + rest);
}

double ModelSpec::routed_expert_matrix_params() const {
  return static_cast<double>(moe_layers) * static_cast<double>(experts) * 3.0 *
         static_cast<double>(hidden) * static_cast<double>(expert_intermediate);
}

double ModelSpec::weight_bytes(Precision w, Precision expert_w) const {
  const double all = weight_bytes(w);
  if (expert_w == w || moe_layers == 0) return all;
  // Swap the routed experts' matrices (and, for fp8/int8, their per-output-channel scales)
  // from `w` to `expert_w`.
  return all - routed_expert_bytes(w) + routed_expert_bytes(expert_w);
}

double ModelSpec::routed_expert_bytes(Precision expert_w) const {
  if (moe_layers == 0) return 0;
  // The matrices plus, for fp8/int8, their per-output-channel scales (fp32, one per row).
  const double e = routed_expert_matrix_params();
  const double e_rows = static_cast<double>(moe_layers) * static_cast<double>(experts) *
                        static_cast<double>(2 * expert_intermediate + hidden);
  switch (expert_w) {
    case Precision::kFp32:
    case Precision::kTf32: return 4 * e;
    case Precision::kFp8:
    case Precision::kInt8: return e + 4 * e_rows;
    default: return quantized_weight_bytes(expert_w) * e;
  }
}

double ModelSpec::checkpoint_weight_bytes() const {
  const double total = static_cast<double>(total_params());
  if (checkpoint_quant == "mxfp4") {
    const double experts_w = routed_expert_matrix_params();
    return experts_w * quantized_weight_bytes(Precision::kMxfp4) + 2.0 * (total - experts_w);
  }
  if (checkpoint_quant == "fp8") {
    const double q = static_cast<double>(quantizable_params());
    return q * (1.0 + 4.0 / (128.0 * 128.0)) + 2.0 * (total - q);
  }
  return 0;
}

double ModelSpec::kv_elements_per_token_per_layer(int tp) const {
  if (attention == AttentionKind::kLatent) return kv_lora_rank + qk_rope_head_dim;
  const std::int64_t per_rank = std::max<std::int64_t>(1, (kv_heads + tp - 1) / tp);
  return 2.0 * static_cast<double>(per_rank * head_dim);
}

double ModelSpec::kv_bytes_per_token(Precision kv) const {
  if (encoder_only) return 0;
  return static_cast<double>(layers) * kv_elements_per_token_per_layer(1) * element_bytes(kv);
}

double ModelSpec::kv_bytes_for_sequence(std::int64_t tokens, Precision kv) const {
  if (encoder_only || tokens <= 0) return 0;
  const double per_layer = kv_elements_per_token_per_layer(1) * element_bytes(kv);
  const std::int64_t window = has_sliding_window() ? std::min(tokens, sliding_window) : tokens;
  return per_layer * (static_cast<double>(full_attention_layers()) * static_cast<double>(tokens) +
                      static_cast<double>(sliding_layers) * static_cast<double>(window));
}

double ModelSpec::linear_flops_per_token() const {
  std::int64_t linear = layers * attention_params_per_layer() + dense_layers * dense_mlp_params() +
                        moe_layers * (experts_per_token * expert_params() +
                                      shared_expert_params() + router_params());
  return 2.0 * static_cast<double>(linear);
}

double ModelSpec::attention_flops_per_token(double context) const {
  double per_layer = 0;
  if (attention == AttentionKind::kLatent) {
    per_layer = 2.0 * heads * (qk_nope_head_dim + qk_rope_head_dim + v_head_dim) * context;
  } else {
    per_layer = 4.0 * heads * head_dim * context;
  }
  return per_layer * static_cast<double>(layers);
}

ModelSpec load_model_config(const std::string& path) {
  ModelSpec m = model_config_from_json(parse_json(read_input_file(path, "config.json"), path), path);
  m.config_path = path;
  return m;
}

ModelSpec model_config_from_json(const nlohmann::json& root, const std::string& path) {
  if (!root.is_object()) throw Error(path + ": expected a JSON object (a config.json)");

  ModelSpec m;
  m.name = path;
  if (root.contains("_name_or_path") && root["_name_or_path"].is_string()) {
    m.hf_id = root["_name_or_path"].get<std::string>();
  }
  // Multimodal configs (Llama 4) keep the language model under text_config.
  const json& cfg = root.contains("text_config") && root["text_config"].is_object()
                        ? root["text_config"]
                        : root;
  const auto model_type_of = [&](const json& j, const std::string& fallback) {
    const auto it = j.find("model_type");
    if (it == j.end() || it->is_null()) return fallback;
    if (!it->is_string()) {
      throw Error(path + ": model_type: expected a string, got " + json_type_word(*it));
    }
    return it->get<std::string>();
  };
  m.model_type = model_type_of(root, "");
  if (m.model_type.empty()) throw Error(path + ": missing field 'model_type'");
  if (&cfg != &root) m.model_type = model_type_of(cfg, m.model_type);

  static const std::vector<std::string> supported = {
      "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
      "gemma2", "phi3", "phi", "falcon", "gptj", "bert", "llama4_text", "llama4", "gpt_oss",
      "deepseek_v2", "deepseek_v3", "yi"};
  if (std::find(supported.begin(), supported.end(), m.model_type) == supported.end()) {
    std::string list;
    for (const auto& s : supported) list += (list.empty() ? "" : ", ") + s;
    throw Error(path + ": model_type '" + m.model_type + "' is not supported; accepted: " + list);
  }
  const std::string& t = m.model_type;
  m.encoder_only = t == "bert";
  m.hidden = req_int(cfg, {"hidden_size", "n_embd", "d_model"}, path, kMaxHidden);
  m.layers = req_int(cfg, {"num_hidden_layers", "n_layer", "num_layers"}, path, kMaxLayers);
  m.mtp_layers = opt_int(cfg, {"num_nextn_predict_layers"}, path, kMaxLayers).value_or(0);
  m.heads = req_int(cfg, {"num_attention_heads", "n_head"}, path, kMaxHeads);
  m.kv_heads = opt_int(cfg, {"num_key_value_heads", "num_kv_heads"}, path, kMaxHeads).value_or(m.heads);
  if (t == "falcon" && !opt_bool(cfg, "new_decoder_architecture", false) &&
      opt_bool(cfg, "multi_query", true)) {
    m.kv_heads = 1;
  }
  if (m.kv_heads < 1 || m.kv_heads > m.heads) {
    throw Error(path + ": num_key_value_heads: " + std::to_string(m.kv_heads) +
                " is not in 1..num_attention_heads (" + std::to_string(m.heads) + ")");
  }
  m.head_dim = opt_int(cfg, {"head_dim"}, path, kMaxHeadDim).value_or(m.hidden / m.heads);
  if (m.head_dim < 1 || m.head_dim > kMaxHeadDim) {
    throw Error(path + ": head_dim: " + std::to_string(m.head_dim) +
                (cfg.contains("head_dim") && !cfg["head_dim"].is_null()
                     ? " must be > 0"
                     : " (hidden_size / num_attention_heads) must be in 1.." +
                           std::to_string(kMaxHeadDim)));
  }
  m.vocab = req_int(cfg, {"vocab_size"}, path, kMaxVocab);
  m.max_context =
      opt_positive_int(cfg, {"max_position_embeddings", "n_positions", "seq_length"}, path, kMaxContext).value_or(4096);
  m.tied_embeddings = root.contains("tie_word_embeddings")
                          ? opt_bool(root, "tie_word_embeddings", default_tied(t))
                          : opt_bool(cfg, "tie_word_embeddings", default_tied(t));
  m.gated_mlp = !(t == "gptj" || t == "falcon" || t == "bert" || t == "phi");
  m.attention_bias = t == "qwen2" || t == "qwen2_moe" || t == "bert" || t == "phi" ||
                     opt_bool(cfg, "attention_bias", false) || opt_bool(cfg, "bias", false);
  m.output_bias = t == "gpt_oss" || t == "bert" || t == "phi" || t == "gptj";
  if (t == "gemma2") m.norms_per_layer = 4;
  if (t == "gptj" || t == "falcon") m.norms_per_layer = 2;  // one LayerNorm with bias
  if (t == "bert") m.norms_per_layer = 4;                   // two LayerNorms with bias
  if (t == "qwen3" || t == "qwen3_moe") m.qk_norm_params = 2 * m.head_dim;
  if (m.heads % m.kv_heads != 0) {
    throw Error(path + ": num_key_value_heads (" + std::to_string(m.kv_heads) +
                ") must divide num_attention_heads (" + std::to_string(m.heads) + ")");
  }

  // The MLP width. Only GPT-J (n_inner) and Falcon (ffn_hidden_size) define a null or absent
  // width as 4 x hidden, in their Hugging Face config classes and modelling code; every other
  // architecture reads intermediate_size as given (absent: its config class's default, the width
  // of one particular checkpoint), so a guess would size the weights and the MLP time of a model
  // that does not exist. Those need the field whenever a layer uses it.
  const std::optional<std::int64_t> given_inter =
      opt_int(cfg, {"intermediate_size", "n_inner", "ffn_hidden_size"}, path, kMaxIntermediate);
  const bool four_x_default = t == "gptj" || t == "falcon";
  const auto needed_inter = [&](const std::string& use) -> std::int64_t {
    if (given_inter) return *given_inter;
    if (four_x_default) return 4 * m.hidden;
    const auto it = cfg.find("intermediate_size");
    throw Error(path + ": intermediate_size: " +
                (it == cfg.end() ? std::string("missing") : std::string("is ") + json_type_word(*it)) +
                "; model_type '" + t + "' needs it as " + use +
                " (only gptj and falcon default it to 4 x hidden_size); accepted: a whole number 1.." +
                std::to_string(kMaxIntermediate));
  };
  const std::int64_t inter = given_inter.value_or(four_x_default ? 4 * m.hidden : 0);
  m.intermediate = inter;

  // Latent attention (DeepSeek-V2/V3).
  if (t == "deepseek_v2" || t == "deepseek_v3") {
    m.attention = AttentionKind::kLatent;
    m.q_lora_rank = opt_int(cfg, {"q_lora_rank"}, path, kMaxRank).value_or(0);
    m.kv_lora_rank = req_int(cfg, {"kv_lora_rank"}, path, kMaxRank);
    m.qk_nope_head_dim = req_int(cfg, {"qk_nope_head_dim"}, path, kMaxHeadDim);
    m.qk_rope_head_dim = req_int(cfg, {"qk_rope_head_dim"}, path, kMaxHeadDim);
    m.v_head_dim = req_int(cfg, {"v_head_dim"}, path, kMaxHeadDim);
    m.head_dim = m.qk_nope_head_dim + m.qk_rope_head_dim;
  }

  // Mixture of experts.
  m.experts = opt_int(cfg, {"num_local_experts", "num_experts", "n_routed_experts"}, path, kMaxExperts).value_or(0);
  m.dense_layers = m.layers;
  if (m.experts > 0) {
    m.experts_per_token = req_int(cfg, {"num_experts_per_tok", "experts_per_token"}, path, kMaxExperts);
    if (m.experts_per_token > m.experts) {
      throw Error(path + ": num_experts_per_tok (" + std::to_string(m.experts_per_token) +
                  ") exceeds the number of experts (" + std::to_string(m.experts) + ")");
    }
    const auto given_expert = opt_int(cfg, {"moe_intermediate_size"}, path, kMaxIntermediate);
    m.expert_intermediate = given_expert.value_or(inter);
    std::int64_t moe_layers = m.layers;
    if (t == "deepseek_v2" || t == "deepseek_v3") {
      const auto first_dense = opt_int(cfg, {"first_k_dense_replace"}, path, kMaxLayers).value_or(0);
      if (first_dense > m.layers) {
        throw Error(path + ": first_k_dense_replace: " + std::to_string(first_dense) +
                    " exceeds num_hidden_layers (" + std::to_string(m.layers) + ")");
      }
      moe_layers = m.layers - first_dense;
      m.shared_intermediate =
          opt_int(cfg, {"n_shared_experts"}, path, kMaxExperts).value_or(0) * m.expert_intermediate;
      // noaux_tc (DeepSeek-V3) routes with a bias per expert, a parameter of the gate.
      const auto method = cfg.find("topk_method");
      m.router_score_bias = method != cfg.end() && method->is_string() &&
                            method->get<std::string>() == "noaux_tc";
    } else if (t == "qwen2_moe" || t == "qwen3_moe") {
      const auto step = opt_int(cfg, {"decoder_sparse_step"}, path, kMaxLayers).value_or(1);
      std::int64_t n = 0;
      std::vector<std::int64_t> mlp_only;
      if (cfg.contains("mlp_only_layers") && cfg["mlp_only_layers"].is_array()) {
        for (const auto& x : cfg["mlp_only_layers"]) {
          if (!x.is_number_unsigned()) {
            throw Error(path + ": mlp_only_layers: expected layer indices (whole numbers >= 0), got " +
                        json_type_word(x));
          }
          mlp_only.push_back(static_cast<std::int64_t>(
              std::min<std::uint64_t>(x.get<std::uint64_t>(), static_cast<std::uint64_t>(kMaxLayers))));
        }
      }
      for (std::int64_t i = 0; i < m.layers; ++i) {
        const bool only = std::find(mlp_only.begin(), mlp_only.end(), i) != mlp_only.end();
        if (!only && step > 0 && (i + 1) % step == 0) ++n;
      }
      moe_layers = n;
      m.shared_intermediate = opt_int(cfg, {"shared_expert_intermediate_size"}, path, kMaxIntermediate).value_or(0);
    } else if (t == "llama4_text" || t == "llama4") {
      const auto step = opt_int(cfg, {"interleave_moe_layer_step"}, path, kMaxLayers).value_or(1);
      moe_layers = step > 0 ? m.layers / step : 0;
      m.shared_intermediate = m.expert_intermediate;  // one shared expert of the same size
      m.intermediate = opt_int(cfg, {"intermediate_size_mlp"}, path, kMaxIntermediate).value_or(inter);
    }
    m.moe_layers = moe_layers;
    m.dense_layers = m.layers - moe_layers;
    if (m.moe_layers > 0 && !given_expert) needed_inter("the experts' MLP width (no moe_intermediate_size)");
    if (m.moe_layers > 0 && m.expert_intermediate == 0) {
      throw Error(path + ": moe_intermediate_size: must be > 0 (the experts' MLP width)");
    }
  }
  const bool llama4_dense_width_given = (t == "llama4_text" || t == "llama4") &&
                                        cfg.contains("intermediate_size_mlp") && !cfg["intermediate_size_mlp"].is_null();
  if (m.dense_layers > 0 && !llama4_dense_width_given) {
    needed_inter("the dense layers' MLP width");
  }
  if (m.dense_layers > 0 && m.intermediate == 0) {
    throw Error(path + ": intermediate_size: must be > 0 (the MLP width of the dense layers)");
  }
  read_sliding_window(cfg, path, m);
  // A checkpoint quantised some other way (AWQ, GPTQ, bitsandbytes, ...) has weights of another
  // size and kernels of another speed: sizing it as 16-bit would answer for a different model.
  if (const auto q = root.find("quantization_config"); q != root.end() && !q->is_null()) {
    const std::string where = path + ": quantization_config.quant_method: ";
    const std::string accepted = "; accepted: mxfp4, fp8 (the checkpoint quantisations capsim sizes), or no "
                                 "quantization_config for a 16-bit checkpoint (re-quantise with --weights)";
    if (!q->is_object()) throw Error(path + ": quantization_config: expected an object, got " + json_type_word(*q));
    const auto it = q->find("quant_method");
    if (it == q->end() || !it->is_string()) {
      throw Error(where + (it == q->end() ? std::string("missing") : std::string("expected a string, got ") +
                                                                       json_type_word(*it)) + accepted);
    }
    const std::string method = it->get<std::string>();
    if (method != "mxfp4" && method != "fp8") throw Error(where + "'" + method + "' is not supported" + accepted);
    m.checkpoint_quant = method;
  }
  if (&cfg != &root && root.contains("vision_config") && root["vision_config"].is_object()) {
    // The vision tower is never simulated, but its weights occupy memory. Llama 4's is published
    // (~0.87B); otherwise estimate a ViT from its config: per layer 4 h^2 (attention) + 3 h i
    // (gated MLP), plus a projector into the text model (h x H + H^2).
    if (m.model_type.rfind("llama4", 0) == 0) {
      m.extra_params = 870'000'000;
    } else {
      const json& v = root["vision_config"];
      const auto vh = opt_int(v, {"hidden_size"}, path + ": vision_config", kMaxHidden).value_or(0);
      const auto vi = opt_int(v, {"intermediate_size"}, path + ": vision_config", kMaxIntermediate).value_or(4 * vh);
      const auto vl = opt_int(v, {"num_hidden_layers"}, path + ": vision_config", kMaxLayers).value_or(0);
      m.extra_params = vl * (4 * vh * vh + 3 * vh * vi) + vh * m.hidden + m.hidden * m.hidden;
    }
    m.extra_params_note = "vision tower, approximate";
  }
  return m;
}

ModelEntry ModelCatalogue::load_entry(const std::string& model_dir) {
  const YamlDoc doc = YamlDoc::load((std::filesystem::path(model_dir) / "model.yaml").string());
  ModelEntry e;
  e.name = doc.string("name");
  e.hf_id = doc.optional_string("hf_id").value_or("");
  e.source = doc.optional_string("source").value_or("");
  e.dir = model_dir;
  if (const auto a = doc.find("aliases"); a && a.IsSequence()) {
    for (const auto& x : a) {
      if (!x.IsScalar()) throw Error(doc.where("aliases") + ": expected a list of names");
      e.aliases.push_back(x.Scalar());
    }
  }
  if (const auto p = doc.find("published_parameters"); p && p.IsMap()) {
    if (doc.has("published_parameters.total")) {
      e.published_total = parse_number(doc.string("published_parameters.total"),
                                       doc.where("published_parameters.total"));
    }
    if (doc.has("published_parameters.active")) {
      e.published_active = parse_number(doc.string("published_parameters.active"),
                                        doc.where("published_parameters.active"));
    }
  }
  return e;
}

ModelSpec ModelCatalogue::spec_of(const ModelEntry& e) {
  ModelSpec m = load_model_config((std::filesystem::path(e.dir) / "config.json").string());
  m.name = e.name;
  m.hf_id = e.hf_id;
  return m;
}

ModelCatalogue ModelCatalogue::load_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw Error(dir + ": model catalogue directory not found");
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && fs::exists(e.path() / "model.yaml")) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  ModelCatalogue cat;
  for (const auto& d : dirs) {
    ModelEntry e = load_entry(d.string());
    cat.entries_.push_back(std::move(e));
  }
  return cat;
}

std::vector<std::string> ModelCatalogue::names() const {
  std::vector<std::string> out;
  for (const auto& e : entries_) out.push_back(e.name);
  return out;
}

const ModelEntry* ModelCatalogue::entry(const std::string& wanted) const {
  const std::string key = lower(wanted);
  for (const auto& e : entries_) {
    if (lower(e.name) == key || lower(e.hf_id) == key) return &e;
  }
  for (const auto& e : entries_) {
    for (const auto& a : e.aliases) {
      if (lower(a) == key) return &e;
    }
  }
  return nullptr;
}

ModelSpec ModelCatalogue::find(const std::string& wanted) const {
  namespace fs = std::filesystem;
  if (const ModelEntry* e = entry(wanted)) return spec_of(*e);
  std::error_code ec;
  if (fs::is_directory(wanted, ec)) {
    if (!fs::exists(fs::path(wanted) / "config.json", ec)) {
      throw Error(wanted + ": a folder without config.json; a model is a catalogue name (capsim "
                  "list models), a Hugging Face id of one, or a path to a config.json");
    }
    return load_model_config((fs::path(wanted) / "config.json").string());
  }
  if (fs::exists(wanted, ec)) return load_model_config(wanted);
  // Text that can only be a path (a catalogue name or Hugging Face id has no ".json", starts
  // with neither '/' nor '.') is reported as a missing file, not an unknown name.
  const bool path_like = wanted.find(".json") != std::string::npos || wanted.rfind('/', 0) == 0 ||
                         wanted.rfind("./", 0) == 0 || wanted.rfind("../", 0) == 0 ||
                         std::count(wanted.begin(), wanted.end(), '/') > 1;
  if (path_like) {
    throw Error(wanted + ": no such file; a model is a catalogue name (capsim list models), a "
                "Hugging Face id of one, or a path to a config.json");
  }
  std::vector<std::string> candidates = names();
  for (const auto& e : entries_) {
    if (!e.hf_id.empty()) candidates.push_back(e.hf_id);
  }
  const auto near = closest_matches(wanted, candidates);
  std::string msg = "unknown model '" + wanted + "'";
  if (!near.empty()) {
    msg += "; did you mean: ";
    for (std::size_t i = 0; i < near.size(); ++i) msg += (i ? ", " : "") + near[i];
    msg += "?";
  }
  msg += "; accepted: a catalogue name (capsim list models), a Hugging Face id of one, or a "
         "path to a config.json";
  throw Error(msg);
}

}  // namespace capsim
