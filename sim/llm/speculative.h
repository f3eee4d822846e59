// Speculative decoding (docs/deployment-options.md#speculative-decoding): a proposer drafts k
// tokens per sequence, the target verifies them in one forward pass of k+1 query tokens, and
// the accepted prefix plus one token from the target is emitted.
//
// Acceptance: alpha_i is the probability that draft position i is accepted given positions
// 1..i-1 were. The accepted count A in {1..k+1} (the target's own token included) has
//   P(A >= 1 + i) = prod_{j<=i} alpha_j,   E[A] = 1 + sum_{i=1..k} prod_{j<=i} alpha_j.
// One alpha with a decay d gives alpha_i = alpha x d^(i-1); d = 1 is the classic geometric
// model of Leviathan et al. (arXiv 2211.17192), E[A] = (1 - alpha^(k+1)) / (1 - alpha).
//
// Methods are registered by name (speculative_methods()) with vLLM's --speculative-config names
// and each one's cited default acceptance; what the proposer costs is the method's `proposer`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/llm/model_spec.h"

namespace capsim {

enum class Proposer {
  kNgram,       // prompt lookup on the CPU: no GPU work, no memory
  kHead,        // EAGLE/EAGLE-3/MTP: one decoder layer on the target's hidden states + LM head
  kDraftModel,  // a separate smaller model of the same tokenizer
};

struct SpeculativeMethod {
  std::string name;         // vLLM's "method" value
  std::string description;
  Proposer proposer = Proposer::kHead;
  int default_tokens = 0;   // k when num_speculative_tokens is not given (0 = required)
  // The cited default acceptance of the first draft (default_decay below); empty = the user
  // must give one.
  std::optional<double> default_acceptance;
  std::string source;       // where the default comes from
  // EAGLE-3 heads carry their own LM head over a reduced draft vocabulary (32000 in the
  // published Llama-3.1 heads); 0 = the head shares the target's LM head and embedding.
  std::int64_t draft_vocab = 0;
  // MTP modules are a layer of the target's own kind (an MoE layer for DeepSeek-V3); EAGLE
  // heads are one dense layer.
  bool same_layer_kind = false;
  // Default alpha_i = default_acceptance x default_decay^(i-1). Below 1 where a cited number
  // shows the proposer run past the depth it was trained for (DeepSeek-V3's one MTP module
  // reused for drafts 2..k).
  double default_decay = 1.0;
};

// The method table; unknown names throw with the accepted ones.
const std::vector<SpeculativeMethod>& speculative_methods();
const SpeculativeMethod& find_speculative_method(const std::string& name, const std::string& where);

struct SpeculativeConfig {
  std::string method;            // a speculative_methods() name
  int num_speculative_tokens = 0;  // k
  std::vector<double> acceptance;  // alpha_1..alpha_k (filled to k by resolve())
  std::string draft_model;       // draft_model: the catalogue name (vLLM's "model")
  std::optional<ModelSpec> draft;  // draft_model: the resolved draft (set by the caller)
  std::uint64_t seed = 0;        // acceptance draws (the scenario's seed)

  const SpeculativeMethod& info() const;
  // E[A] = 1 + sum_i prod_{j<=i} alpha_j over the k positions.
  double expected_tokens() const { return expected_tokens(num_speculative_tokens); }
  // The same when only `verified` of the k drafts are verified (a step's budget cut them).
  double expected_tokens(int verified) const;
  // Tokens emitted by one sequence in one verify step of `verified` drafts: A drawn from the
  // acceptance above with one uniform u of Rng(mix(seed, request, generated)) (A = 1 + the
  // number of positions i with u < prod_{j<=i} alpha_j), so a run replays from its seed and the
  // draw of a sequence does not depend on which others share its step.
  int draw_accepted(std::uint64_t request, std::int64_t generated, int verified) const;
};

// Per-position acceptance from one alpha and a decay: alpha_i = alpha x decay^(i-1).
std::vector<double> geometric_acceptance(double alpha, double decay, int k);

// The proposer as a model the roofline can cost, for heads: one decoder layer of the target's
// width (a dense layer for EAGLE; for MTP the target's num_nextn_predict_layers modules, at least
// one, each a layer of the target's kind) and an LM head over the draft vocabulary. For
// draft_model: the draft. Empty for n-gram.
std::optional<ModelSpec> proposer_model(const SpeculativeConfig& c, const ModelSpec& target);

// How the target's weights lie on one GPU: its precisions (an MTP module is part of the target's
// checkpoint and loads with its quantisation) and the split of its layers.
struct TargetWeightLayout {
  Precision weights = Precision::kBf16;
  Precision routed_experts = Precision::kBf16;
  int tp = 1;         // every layer's non-expert matrices split over TP
  int moe_shard = 1;  // the routed experts split over this many GPUs (parallelism.h moe_shard_gpus)
};
// Bytes of proposer weights one GPU holds beside the target, without the embedding and LM head
// a head shares with the target:
//  - draft_model: the draft at 16-bit over TP;
//  - EAGLE heads (their own 16-bit checkpoints): the layer and any own LM head over TP;
//  - MTP: the modules' layers at the target's precisions, routed experts over the MoE shard and
//    the rest over TP as the target's own layers, plus each module's input projection eh_proj
//    (2 x hidden -> hidden) and its two norms, a plain 16-bit nn.Linear whole on every GPU
//    (vLLM deepseek_mtp.py DeepSeekMultiTokenPredictorLayer).
double proposer_weight_bytes(const SpeculativeConfig& c, const ModelSpec& target, const TargetWeightLayout& on_gpu);

// Throws capsim::Error naming `where` for a bad config: unknown method, k outside 1..16,
// acceptance outside (0, 1] or of the wrong length, a draft_model without its model.
void validate_speculative(const SpeculativeConfig& c, const std::string& where);

}  // namespace capsim
