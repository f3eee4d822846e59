#include "sim/scenario/deployment_spec.h"

#include <algorithm>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/core/error.h"
#include "sim/core/yaml_fields.h"

#include "sim/hardware/precision_support.h"
#include "sim/scenario/catalogues.h"

namespace capsim::scenario {

bool is_engine_file(const std::string& engine) {
  return engine.size() > 5 && engine.compare(engine.size() - 5, 5, ".yaml") == 0;
}

SpeculativeConfig parse_speculative(const std::string& json, const std::optional<std::string>& acceptance,
                                    const std::optional<double>& decay) {
  const std::string w = "--speculative-config";
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json);
  } catch (const nlohmann::json::exception&) {
    throw Error(w + ": '" + json + "' is not JSON; accepted: e.g. '{\"method\": \"eagle3\", "
                "\"model\": \"yuhuili/EAGLE3-LLaMA3.1-Instruct-8B\", \"num_speculative_tokens\": 3}'");
  }
  if (!j.is_object()) throw Error(w + ": expected a JSON object with method, num_speculative_tokens, model");
  // vLLM's SpeculativeConfig fields capsim reads, and those it accepts without modelling (they
  // tune the drafter's execution, not what it costs or accepts at this granularity).
  static const std::vector<std::string> read = {"method", "model", "num_speculative_tokens"};
  static const std::vector<std::string> ignored = {
      "draft_tensor_parallel_size", "quantization", "max_model_len", "revision", "code_revision",
      "prompt_lookup_max", "prompt_lookup_min", "disable_padded_drafter_batch",
      "disable_by_batch_size", "speculative_token_tree", "disable_log_stats"};
  for (const auto& [key, value] : j.items()) {
    if (std::find(read.begin(), read.end(), key) == read.end() &&
        std::find(ignored.begin(), ignored.end(), key) == ignored.end()) {
      std::string list;
      for (const auto& k : read) list += (list.empty() ? "" : ", ") + k;
      for (const auto& k : ignored) list += ", " + k;
      throw Error(w + ": unknown field '" + key + "'; accepted: " + list);
    }
  }
  SpeculativeConfig c;
  if (!j.contains("method") || !j["method"].is_string()) {
    throw Error(w + ".method: missing (a string: eagle3, eagle, mtp, ngram, draft_model)");
  }
  const SpeculativeMethod& m = find_speculative_method(j["method"].get<std::string>(), w + ".method");
  c.method = m.name;
  c.num_speculative_tokens = m.default_tokens;
  if (j.contains("num_speculative_tokens")) {
    const auto& k = j["num_speculative_tokens"];
    if (!k.is_number_integer() || k.get<long long>() < 1 || k.get<long long>() > 16) {
      throw Error(w + ".num_speculative_tokens: " + k.dump() + " is not a whole number in 1..16");
    }
    c.num_speculative_tokens = k.get<int>();
  }
  if (j.contains("model")) {
    if (!j["model"].is_string()) throw Error(w + ".model: expected a string (a model name)");
    c.draft_model = j["model"].get<std::string>();
  }
  if (m.proposer == Proposer::kDraftModel) {
    if (c.draft_model.empty()) {
      throw Error(w + ".model: draft_model needs the draft (a catalogue name, e.g. llama-3.2-1b)");
    }
    try {
      c.draft = models().find(c.draft_model);
    } catch (const Error& e) {
      throw Error(w + ".model: " + e.what());
    }
  }
  // A given alpha decays only when told to; the method's own default carries its cited decay.
  const double d = decay.value_or(acceptance ? 1.0 : m.default_decay);
  if (!(d > 0 && d <= 1)) throw Error("--spec-acceptance-decay: " + std::to_string(d) + " is not in (0, 1]");
  if (acceptance) {
    std::vector<double> values;
    std::stringstream in(*acceptance);
    std::string part;
    while (std::getline(in, part, ',')) {
      const double v = parse_number(part, "--spec-acceptance");
      if (!(v > 0 && v <= 1)) {
        throw Error("--spec-acceptance: '" + part + "' is not an acceptance in (0, 1] (the probability "
                    "that a draft position is accepted after the ones before it)");
      }
      values.push_back(v);
    }
    if (values.size() == 1) {
      c.acceptance = geometric_acceptance(values[0], d, c.num_speculative_tokens);
    } else if (decay) {
      throw Error("--spec-acceptance-decay: applies to one acceptance value, not to a list of " +
                  std::to_string(values.size()));
    } else {
      c.acceptance = values;
    }
  } else if (m.default_acceptance) {
    c.acceptance = geometric_acceptance(*m.default_acceptance, d, c.num_speculative_tokens);
  } else {
    throw Error("--spec-acceptance: " + m.name + " has no published default acceptance (" + m.source +
                "); give one value in (0, 1] or one per position");
  }
  validate_speculative(c, w);
  return c;
}

std::string led_by_flag(const std::string& flag, const std::string& message) {
  return message.rfind("--", 0) == 0 ? message : flag + ": " + message;
}

Deployment DeploymentSpec::resolve() const {
  Deployment d;
  const auto named = [](const char* flag, const auto& find) {
    try {
      return find();
    } catch (const Error& e) {
      throw Error(led_by_flag(flag, e.what()));
    }
  };
  d.card = named("--card", [&] { return find_card(card); });
  d.model = named("--model", [&] { return find_model(model); });
  // A path to an engine YAML (calibration/engines format) runs a profile outside the catalogue.
  d.engine = named("--engine", [&] {
    return is_engine_file(engine) ? EngineCatalogue::load_file(engine) : find_engine(engine);
  });
  d.tp = tp;
  d.pp = pp;
  d.dp = dp;
  d.expert_parallel = enable_expert_parallel;
  if (expert_imbalance) d.expert_imbalance = *expert_imbalance;
  const Precision half = native_half(d.card);
  if (weights == "auto") {
    // As vLLM loads a checkpoint (its quantization_config decides, not --dtype): gpt-oss's
    // mxfp4 experts beside bf16 attention; DeepSeek-V3's fp8. Where the card has no kernel for
    // the shipped format the 16-bit weights are used, and the memory plan says whether they fit.
    d.weights = half;
    if (d.model.checkpoint_quant == "mxfp4" &&
        !precision_unsupported(d.card, Precision::kMxfp4, half)) {
      d.expert_weights = Precision::kMxfp4;
    } else if (d.model.checkpoint_quant == "fp8" &&
               !precision_unsupported(d.card, Precision::kFp8, half)) {
      d.weights = Precision::kFp8;
    }
  } else {
    d.weights = parse_precision(weights, "--weights");
  }
  if (kv_cache == "auto") {
    d.kv_cache = (d.weights == Precision::kFp32) ? Precision::kFp32 : half;
  } else {
    d.kv_cache = parse_precision(kv_cache, "--kv-cache");
  }
  d.limits = default_limits(d.card, d.engine);
  if (max_num_seqs) d.limits.max_num_seqs = *max_num_seqs;
  if (max_num_batched_tokens) d.limits.max_num_batched_tokens = *max_num_batched_tokens;
  if (block_size) d.limits.block_size = *block_size;
  if (gpu_memory_utilization) d.limits.gpu_memory_utilization = *gpu_memory_utilization;
  if (max_model_len) d.limits.max_model_len = *max_model_len;
  if (async_scheduling) d.engine.async_scheduling = *async_scheduling;
  if (kv_offloading_backend && *kv_offloading_backend != "native") {
    throw Error("--kv-offloading-backend: '" + *kv_offloading_backend +
                "' is not modelled; accepted: native (vLLM's OffloadingConnector CPU tier)");
  }
  if (kv_offloading_backend && !kv_offloading_size) {
    throw Error("--kv-offloading-backend: needs --kv-offloading-size (vLLM offloads only when the size is set)");
  }
  if (kv_offloading_size) {
    if (!(*kv_offloading_size > 0) || *kv_offloading_size > 1'000'000) {
      throw Error("--kv-offloading-size: " + std::to_string(*kv_offloading_size) +
                  " GiB is outside the accepted range (0, 1000000] GiB");
    }
    d.limits.kv_offloading_size = *kv_offloading_size;
  }
  if (speculative_config) {
    d.speculative = parse_speculative(*speculative_config, spec_acceptance, spec_acceptance_decay);
    const Proposer proposer = d.speculative->info().proposer;
    if (d.engine.async_scheduling && (proposer == Proposer::kNgram || proposer == Proposer::kDraftModel)) {
      // vLLM schedules ahead only with drafters that draft from the GPU's sampled tokens
      // (EAGLE/MTP; v0.14 release notes, vllm/config/vllm.py): the n-gram lookup, and in the
      // versions profiled a draft model, wait for the step's tokens on the CPU. Unset, vLLM
      // turns asynchronous scheduling off with a warning; asked for, it refuses to start.
      if (async_scheduling) {
        throw Error("--async-scheduling: vLLM refuses asynchronous scheduling with " + d.speculative->method +
                    " speculative decoding (only EAGLE/MTP drafters support it); accepted with " +
                    d.speculative->method + ": false");
      }
      d.engine.async_scheduling = false;
    }
  } else if (spec_acceptance || spec_acceptance_decay) {
    throw Error("--spec-acceptance: needs --speculative-config (the method and k it applies to)");
  }
  const bool lora_on = enable_lora.value_or(false);
  if (!lora_on && (max_loras || max_lora_rank || max_cpu_loras || lora_rank || lora_target_modules)) {
    throw Error(std::string(max_loras ? "--max-loras" : max_lora_rank ? "--max-lora-rank"
                            : max_cpu_loras ? "--max-cpu-loras" : lora_rank ? "--lora-rank"
                                                                            : "--lora-target-modules") +
                ": needs --enable-lora");
  }
  if (lora_on) {
    LoraConfig l;
    if (max_loras) l.max_loras = *max_loras;
    if (max_lora_rank) l.max_lora_rank = *max_lora_rank;
    if (max_cpu_loras) l.max_cpu_loras = *max_cpu_loras;
    if (lora_rank) l.rank = *lora_rank;
    if (lora_target_modules) {
      l.target_modules.clear();
      std::stringstream in(*lora_target_modules);
      std::string part;
      while (std::getline(in, part, ',')) {
        if (!part.empty()) l.target_modules.push_back(part);
      }
    }
    d.lora = l;
  }
  d.validate();
  return d;
}

}  // namespace capsim::scenario
