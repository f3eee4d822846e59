#include "sim/answers/fit_answer.h"

#include <algorithm>

#include "sim/core/error.h"
#include "sim/scenario/catalogues.h"

namespace capsim::answers {

// The scenario layer's specs and catalogues, which every answer reads.
using namespace capsim::scenario;
namespace {

nlohmann::json plan_json(const Deployment& d, const MemoryPlan& p) {
  const ModelSpec& m = d.model;
  nlohmann::json j = {
      {"model", m.name},
      {"card", d.card.name},
      {"tp", d.tp},
      {"weights", precision_name(d.weights)},
      {"kv_cache", precision_name(d.kv_cache)},
      {"engine", d.engine.name},
      {"gpu_memory_utilization", d.limits.gpu_memory_utilization},
      {"max_num_batched_tokens", d.limits.max_num_batched_tokens},
      {"max_num_seqs", d.limits.max_num_seqs},
      {"block_size", d.limits.block_size},
      {"total_params", m.total_params()},
      {"active_params", m.active_params()},
      {"weight_bytes_total", d.weight_bytes()},
      {"kv_bytes_per_token_total", m.kv_bytes_per_token(d.kv_cache)},
      {"per_gpu",
       {{"visible_bytes", p.visible},
        {"budget_bytes", p.budget},
        {"weights_bytes", p.weights},
        {"activations_bytes", p.activations},
        {"runtime_bytes", p.runtime},
        {"kv_cache_bytes", p.kv_cache},
        {"outside_budget_bytes", p.outside_budget},
        {"kv_bytes_per_token", p.kv_bytes_per_token_per_gpu}}},
      {"kv_blocks", p.kv_blocks},
      {"kv_tokens", p.kv_tokens},
      {"kv_block_bytes", p.kv_block_bytes},
      {"kv_longest_sequence_tokens", p.kv_longest_sequence},
      {"checkpoint_quantization", d.model.checkpoint_quant},
      {"checkpoint_weight_bytes", d.model.checkpoint_weight_bytes()},
      {"kv_layers_per_block", p.layout.layers_per_group},
      {"sliding_window", d.model.sliding_window},
      {"sliding_layers", d.model.sliding_layers},
      {"max_model_len", p.max_model_len},
      {"context", p.context},
      {"max_sequences_at_context", p.max_sequences_at_context},
      {"fits", p.fits},
      {"shortfall_bytes_per_gpu", p.shortfall},
      {"reason", p.reason},
  };
  if (d.beyond_tp()) {
    j["pp"] = d.pp;
    j["dp"] = d.dp;
    j["expert_parallel"] = d.expert_parallel;
    j["gpus"] = d.gpus();
  }
  // Only for a checkpoint run as shipped (gpt-oss: the routed experts in mxfp4).
  if (d.expert_weights) j["expert_weights"] = precision_name(*d.expert_weights);
  // Only with --kv-offloading-size: the CPU tier's blocks (vLLM's CPUOffloadingSpec).
  if (p.cpu_kv_blocks > 0) {
    j["kv_offloading_size_gib"] = d.limits.kv_offloading_size;
    j["cpu_kv_blocks"] = p.cpu_kv_blocks;
  }
  return j;
}

// Alternatives worth trying when a deployment does not fit, each re-planned: on the same card
// the least change first (KV precision, then weights, then more GPUs), then bigger cards at the
// same precision, smallest memory first.
std::vector<std::pair<std::string, MemoryPlan>> alternatives(const Deployment& base,
                                                             long long context) {
  std::vector<std::pair<std::string, MemoryPlan>> out;
  const auto fits = [&](Deployment d, MemoryPlan& plan) {
    try {
      d.validate();
    } catch (const Error&) {
      return false;
    }
    plan = plan_memory(d, context);
    return plan.fits;
  };
  std::vector<Precision> weight_options = {base.weights};
  for (Precision w : {Precision::kFp8, Precision::kInt4}) {
    if (element_bytes(w) < element_bytes(base.weights)) weight_options.push_back(w);
  }
  std::vector<Precision> kv_options = {base.kv_cache};
  if (base.kv_cache != Precision::kFp8 && !base.model.encoder_only) kv_options.push_back(Precision::kFp8);
  std::vector<int> tps = {base.tp};
  for (int t : {2, 4, 8}) {
    if (t > base.tp) tps.push_back(t);
  }
  // Per TP: the highest weight precision that fits (the least change); above the deployment's
  // TP also each lower precision that fits there and at no smaller TP (Llama-3.1-70B on 4090s:
  // fp8 and int4 both first fit at TP 4, and int4 over 4 cards is the usual setup).
  std::vector<Precision> fit_at_smaller_tp;
  for (int tp : tps) {
    bool found = false;
    std::vector<Precision> fit_here;
    for (Precision w : weight_options) {
      const bool new_precision =
          std::find(fit_at_smaller_tp.begin(), fit_at_smaller_tp.end(), w) == fit_at_smaller_tp.end();
      for (Precision kv : kv_options) {  // the first KV precision that fits with these weights
        if (tp == base.tp && w == base.weights && kv == base.kv_cache) continue;
        Deployment d = base;
        d.tp = tp;
        d.weights = w;
        if (w != base.weights) d.expert_weights.reset();  // --weights re-quantises every layer
        d.kv_cache = kv;
        MemoryPlan plan;
        if (!fits(d, plan)) continue;
        fit_here.push_back(w);
        if (found && !(tp > base.tp && new_precision)) break;
        std::string label;
        if (w != base.weights) label += "--weights " + std::string(precision_name(w)) + " ";
        if (kv != base.kv_cache) label += "--kv-cache " + std::string(precision_name(kv)) + " ";
        if (tp != base.tp) {
          label += "--tp " + std::to_string(tp) + " (" + base.card.tp_link(tp).name() + ") ";
        }
        label.pop_back();
        out.emplace_back(label, plan);
        found = true;
        break;
      }
    }
    fit_at_smaller_tp.insert(fit_at_smaller_tp.end(), fit_here.begin(), fit_here.end());
  }
  std::vector<const Card*> others;
  for (const Card& c : cards().cards()) {
    if (c.name != base.card.name && !c.is_cpu) others.push_back(&c);
  }
  std::stable_sort(others.begin(), others.end(), [](const Card* a, const Card* b) {
    return a->visible_memory_bytes < b->visible_memory_bytes;
  });
  int bigger = 0;
  for (const Card* c : others) {
    if (bigger >= 3) break;
    Deployment d = base;
    d.card = *c;
    d.limits = default_limits(*c, base.engine);
    d.limits.block_size = base.limits.block_size;
    d.limits.max_model_len = base.limits.max_model_len;
    MemoryPlan plan;
    if (fits(d, plan)) {
      out.emplace_back("--card " + c->name, plan);
      ++bigger;
    }
  }
  return out;
}

}  // namespace

FitAnswer answer_fit(const DeploymentSpec& spec, std::optional<long long> context_tokens) {
  FitAnswer a;
  a.deployment = spec.resolve();
  const Deployment& d = a.deployment;
  a.context = context_tokens ? *context_tokens : fit_context(d);
  const long long context = a.context;
  a.plan = plan_fit(d, context);
  const MemoryPlan& p = a.plan;
  nlohmann::json& j = a.json;
  j = plan_json(d, p);
  if (!p.fits) a.alternatives = alternatives(d, context);
  nlohmann::json alt_json = nlohmann::json::array();
  for (const auto& [label, ap] : a.alternatives) {
    alt_json.push_back({{"change", label}, {"kv_tokens", ap.kv_tokens},
                        {"max_sequences_at_context", ap.max_sequences_at_context}});
  }
  j["alternatives"] = alt_json;
  return a;
}

}  // namespace capsim::answers
