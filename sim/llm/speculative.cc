#include "sim/llm/speculative.h"

#include <algorithm>
#include <cmath>

#include "sim/core/error.h"
#include "sim/core/rng.h"

namespace capsim {

const std::vector<SpeculativeMethod>& speculative_methods() {
  // Defaults (one alpha per method, no decay):
  //  eagle3: the public yuhuili/EAGLE3-LLaMA3.1-Instruct-8B head reaches an acceptance length
  //          of 2.77 tokens on MT-bench with a chain of K = 7 at temperature 1 (table in the
  //          nebius/EAGLE3-Llama-3.3-70B-Instruct model card); (1 - a^8) / (1 - a) = 2.77 gives
  //          a = 0.65.
  //  eagle:  EAGLE-3's paper (arXiv 2503.01840) reports EAGLE-2's acceptance length about 2/3 of
  //          EAGLE-3's (4.0 vs 6.0+ after data scaling); 2/3 of 2.77 = 1.85 at K = 7 gives
  //          a = 0.46 (capsim's reading: no chain measurement of EAGLE-1 heads was found).
  //  mtp:    DeepSeek-V3 (arXiv 2412.19437, section 5.4.3): "the acceptance rate of the second
  //          token prediction ranges between 85% and 90%", one MTP module (k = 1); 0.85 for the
  //          first draft. vLLM re-runs that one module for drafts 2..k (PR #13626), a depth it was
  //          not trained for: the nebius/MTP-DeepSeek-V3-0324 model card measures the original
  //          module reused autoregressively at K = 7 to an acceptance length of 3.09 at
  //          temperature 1 (3.20 at 0; MT-bench, HumanEval, GSM8K) where a flat 0.85 would give
  //          4.85. 1 + sum_{i<=7} prod_{j<=i} 0.85 d^(j-1) = 3.09 gives d = 0.83 (3.07 at 0.83).
  //  ngram, draft_model: acceptance depends on the workload (repetition in the context) and on
  //          the draft's agreement with the target; no number fits generally, so it must be given.
  static const std::vector<SpeculativeMethod> methods = {
      {"eagle3", "EAGLE-3 head: one decoder layer on fused target hidden states, own LM head",
       Proposer::kHead, 3, 0.65,
       "acceptance length 2.77 at K=7, MT-bench (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B; "
       "nebius/EAGLE3-Llama-3.3-70B-Instruct model card); EAGLE-3 arXiv 2503.01840",
       32000, false},
      {"eagle", "EAGLE/EAGLE-2 head: one decoder layer on the target's last hidden state, shared LM head",
       Proposer::kHead, 3, 0.46,
       "2/3 of EAGLE-3's acceptance length (EAGLE-3 arXiv 2503.01840, data-scaling figure); capsim's reading",
       0, false},
      {"mtp", "multi-token prediction module (DeepSeek-V3 deepseek_mtp): one layer of the target's kind",
       Proposer::kHead, 1, 0.85,
       "DeepSeek-V3 technical report arXiv 2412.19437 section 5.4.3 (85-90% second-token acceptance); "
       "decay 0.83 per later draft from the reused module's acceptance length 3.09 at K=7 "
       "(nebius/MTP-DeepSeek-V3-0324 model card, original MTP, temperature 1)",
       0, true, 0.83},
      {"ngram", "n-gram prompt lookup on the CPU: no GPU cost, no memory", Proposer::kNgram, 3,
       std::nullopt, "workload-dependent: give the measured acceptance", 0, false},
      {"draft_model", "a separate smaller model (vLLM 'model'), k sequential draft decodes",
       Proposer::kDraftModel, 3, std::nullopt,
       "draft/target agreement-dependent: give the measured acceptance", 0, false},
  };
  return methods;
}

const SpeculativeMethod& find_speculative_method(const std::string& name, const std::string& where) {
  for (const SpeculativeMethod& m : speculative_methods()) {
    if (m.name == name) return m;
  }
  // vLLM's aliases for the same proposers.
  if (name == "deepseek_mtp" || name == "qwen3_next_mtp" || name == "mimo_mtp") {
    return find_speculative_method("mtp", where);
  }
  if (name == "draft" ) return find_speculative_method("draft_model", where);
  std::string list;
  for (const SpeculativeMethod& m : speculative_methods()) list += (list.empty() ? "" : ", ") + m.name;
  throw Error(where + ": unknown speculative method '" + name + "'; accepted: " + list +
              " (and vLLM's deepseek_mtp)");
}

const SpeculativeMethod& SpeculativeConfig::info() const {
  return find_speculative_method(method, "speculative method");
}

double SpeculativeConfig::expected_tokens(int verified) const {
  double expected = 1.0, run = 1.0;
  for (int i = 0; i < verified && i < static_cast<int>(acceptance.size()); ++i) {
    run *= acceptance[static_cast<std::size_t>(i)];
    expected += run;
  }
  return expected;
}

int SpeculativeConfig::draw_accepted(std::uint64_t request, std::int64_t generated, int verified) const {
  Rng rng = Rng(seed).split(request).split(static_cast<std::uint64_t>(generated));
  const double u = rng.uniform01();
  int accepted = 1;
  double run = 1.0;
  for (int i = 0; i < verified && i < static_cast<int>(acceptance.size()); ++i) {
    run *= acceptance[static_cast<std::size_t>(i)];
    if (!(u < run)) break;
    ++accepted;
  }
  return accepted;
}

std::vector<double> geometric_acceptance(double alpha, double decay, int k) {
  std::vector<double> a;
  double v = alpha;
  for (int i = 0; i < k; ++i) {
    a.push_back(v);
    v *= decay;
  }
  return a;
}

std::optional<ModelSpec> proposer_model(const SpeculativeConfig& c, const ModelSpec& target) {
  const SpeculativeMethod& m = c.info();
  if (m.proposer == Proposer::kNgram) return std::nullopt;
  if (m.proposer == Proposer::kDraftModel) return c.draft;
  ModelSpec h = target;
  h.name = target.name + " " + m.name + " head";
  h.layers = m.same_layer_kind ? std::max<std::int64_t>(1, target.mtp_layers) : 1;
  h.mtp_layers = 0;
  h.sliding_layers = 0;
  h.sliding_window = 0;
  h.extra_params = 0;
  if (m.same_layer_kind && target.is_moe()) {
    h.moe_layers = h.layers;
    h.dense_layers = 0;
  } else {
    h.moe_layers = 0;
    h.dense_layers = h.layers;
    // An EAGLE head on an MoE target is a dense layer as wide as the target's active MLP.
    if (h.intermediate == 0) h.intermediate = target.experts_per_token * target.expert_intermediate + target.shared_intermediate;
  }
  if (m.draft_vocab > 0) {
    h.vocab = m.draft_vocab;
    h.tied_embeddings = false;
  }
  return h;
}

double proposer_weight_bytes(const SpeculativeConfig& c, const ModelSpec& target, const TargetWeightLayout& on_gpu) {
  const std::optional<ModelSpec> p = proposer_model(c, target);
  if (!p) return 0;
  const SpeculativeMethod& m = c.info();
  const double tp = std::max(1, on_gpu.tp);
  if (m.proposer == Proposer::kDraftModel) return p->weight_bytes(Precision::kBf16) / tp;
  const double embedding = static_cast<double>(p->embedding_params());
  const double lm_head = static_cast<double>(p->lm_head_params());
  if (!m.same_layer_kind) {
    // A head shares the target's input embedding (and, without its own vocabulary, its LM head).
    const double shared = 2.0 * (embedding + (m.draft_vocab == 0 ? lm_head : 0.0));
    return std::max(0.0, p->weight_bytes(Precision::kBf16) - shared) / tp;
  }
  // MTP: ModelSpec::weight_bytes keeps embeddings and LM heads 16-bit (32-bit under fp32).
  const bool wide = on_gpu.weights == Precision::kFp32 || on_gpu.weights == Precision::kTf32;
  const double half = wide ? 4.0 : 2.0;
  const double layers = p->weight_bytes(on_gpu.weights, on_gpu.routed_experts) - half * (embedding + lm_head);
  const double experts = p->routed_expert_bytes(on_gpu.routed_experts);
  const double hidden = static_cast<double>(p->hidden);
  const double projection = static_cast<double>(p->layers) * half * (2.0 * hidden * hidden + 2.0 * hidden);
  return std::max(0.0, layers - experts) / tp + experts / std::max(1, on_gpu.moe_shard) + projection;
}

void validate_speculative(const SpeculativeConfig& c, const std::string& where) {
  const SpeculativeMethod& m = find_speculative_method(c.method, where + ".method");
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > 16) {
    throw Error(where + ".num_speculative_tokens: " + std::to_string(c.num_speculative_tokens) +
                " is not in 1..16");
  }
  if (static_cast<int>(c.acceptance.size()) != c.num_speculative_tokens) {
    throw Error(where + ".acceptance: " + std::to_string(c.acceptance.size()) +
                " values for " + std::to_string(c.num_speculative_tokens) +
                " speculative tokens; give one value (with an optional decay) or one per position");
  }
  for (double a : c.acceptance) {
    if (!(a > 0 && a <= 1)) {
      throw Error(where + ".acceptance: " + std::to_string(a) + " is not in (0, 1]");
    }
  }
  if (m.proposer == Proposer::kDraftModel && !c.draft) {
    throw Error(where + ".model: draft_model needs the draft model (a catalogue name, e.g. llama-3.2-1b)");
  }
}

}  // namespace capsim
