// The scenario file's sections as tables: one row per field reads, checks and documents it.
// A row's order is the order `unknown field` messages list the keys in and the order the
// fields are applied in (prefix_caching, then enable_prefix_caching: the later wins).
#include "sim/scenario/scenario_fields.h"

#include <filesystem>

#include "sim/cluster/disaggregation.h"
#include "sim/core/error.h"
#include "sim/core/yaml_fields.h"
#include "sim/scenario/scenario.h"

namespace capsim::scenario {
namespace {

using T = FieldType;
using Row = Field<ScenarioSpec>;
using GroupRow = Field<ScenarioSpec::ExtraGroup>;

// deployment[1..], disaggregation.prefill, disaggregation.decode: a pool of one card type.
const GroupRow kPoolFields[] = {
    {{.key = "card", .type = T::kText, .doc = "the pool's card", .accepted = "a card name (capsim list cards)",
      .missing = "missing (required)"},
     [](ScenarioSpec::ExtraGroup& g, const FieldValue& v) { g.card = v.text; }},
    {{.key = "tp", .type = T::kWhole, .doc = "tensor-parallel GPUs per replica", .default_text = "1", .lo = 1, .hi = 64},
     [](ScenarioSpec::ExtraGroup& g, const FieldValue& v) { g.tp = v.whole(); }},
    {{.key = "replicas", .type = T::kWhole, .doc = "replicas of this pool", .default_text = "1", .lo = 1, .hi = 100000},
     [](ScenarioSpec::ExtraGroup& g, const FieldValue& v) { g.replicas = v.whole(); }},
    {{.key = "weights", .type = T::kText, .doc = "weight precision", .default_text = "auto (the card's 16-bit type)",
      .accepted = "auto, bf16, fp16, fp8, int8, int4, ..."},
     [](ScenarioSpec::ExtraGroup& g, const FieldValue& v) { g.weights = v.text; }},
};

// The first (or only) deployment group; messages about it name these fields (origin).
const Row kDeploymentFields[] = {
    {{.key = "card", .type = T::kText, .doc = "the GPU", .default_text = "h100-sxm",
      .accepted = "a card name (capsim list cards)", .flag = "--card", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.card = v.text; }},
    {{.key = "tp", .type = T::kWhole, .doc = "tensor-parallel GPUs per replica (vLLM --tensor-parallel-size)",
      .default_text = "1", .lo = 1, .hi = 64, .flag = "--tp", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.tp = v.whole(); }},
    {{.key = "replicas", .type = T::kWhole, .doc = "replicas behind the router", .default_text = "1", .lo = 1,
      .hi = 100000, .flag = "--replicas"},
     [](ScenarioSpec& s, const FieldValue& v) { s.replicas = v.whole(); }},
    {{.key = "weights", .type = T::kText, .doc = "weight precision", .default_text = "auto (the card's 16-bit type)",
      .accepted = "auto, bf16, fp16, fp8, int8, int4, ...", .flag = "--weights", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.weights = v.text; }},
    {{.key = "kv_cache", .type = T::kText, .doc = "KV-cache precision", .default_text = "auto (the card's 16-bit type)",
      .accepted = "auto, bf16, fp16, fp8, ...", .flag = "--kv-cache", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.kv_cache = v.text; }},
    {{.key = "engine", .type = T::kText, .doc = "the engine profile", .default_text = "vllm",
      .accepted = "an engine name (capsim list engines) or an engine .yaml file", .flag = "--engine", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.engine = v.text; }},
    {{.key = "pp", .type = T::kWhole, .doc = "pipeline stages of tp GPUs each (vLLM --pipeline-parallel-size)",
      .default_text = "1", .lo = 1, .hi = 64, .flag = "--pp", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.pp = v.whole(); }},
    {{.key = "dp", .type = T::kWhole, .doc = "data-parallel ranks of one engine (vLLM --data-parallel-size; MoE: DP attention)",
      .default_text = "1", .lo = 1, .hi = 1024, .flag = "--dp", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.dp = v.whole(); }},
    {{.key = "enable_expert_parallel", .type = T::kBool,
      .doc = "whole experts over tp x dp GPUs (vLLM --enable-expert-parallel)", .default_text = "false",
      .flag = "--enable-expert-parallel", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.enable_expert_parallel = v.flag; }},
    {{.key = "expert_imbalance", .type = T::kNumber, .doc = "the busiest expert-parallel GPU's load over the mean",
      .default_text = "1.3", .lo = 1, .hi = 64, .range_error = "{} is not a max/mean load ratio; accepted: 1 to 64",
      .flag = "--expert-imbalance", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.expert_imbalance = v.number; }},
};

const Row kEngineFields[] = {
    {{.key = "max_num_seqs", .type = T::kWhole, .doc = "sequences in one batch", .default_text = "the engine's for the card",
      .lo = 1, .hi = 1 << 20, .flag = "--max-num-seqs", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.max_num_seqs = v.whole(); }},
    {{.key = "max_num_batched_tokens", .type = T::kWhole, .doc = "tokens in one step",
      .default_text = "the engine's for the card", .lo = 1, .hi = 1 << 24, .flag = "--max-num-batched-tokens",
      .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.max_num_batched_tokens = v.whole(); }},
    {{.key = "block_size", .type = T::kWhole, .doc = "tokens per KV-cache block", .default_text = "16", .unit = "tokens",
      .lo = 1, .hi = 4096, .flag = "--block-size", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.block_size = v.whole(); }},
    {{.key = "gpu_memory_utilization", .type = T::kNumber, .doc = "share of each GPU's memory the engine takes",
      .default_text = "0.9", .lo = 0.05, .hi = 1, .lo_open = true, .range_error = "must be in (0.05, 1]",
      .flag = "--gpu-memory-utilization", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.gpu_memory_utilization = v.number; }},
    {{.key = "prefix_caching", .type = T::kBool, .doc = "reuse cached KV blocks of shared prefixes",
      .default_text = "true (vLLM V1)", .flag = "--prefix-caching"},
     [](ScenarioSpec& s, const FieldValue& v) { s.prefix_caching = v.flag; }},
    {{.key = "enable_prefix_caching", .type = T::kBool, .doc = "the same as prefix_caching (vLLM's name)",
      .default_text = "true (vLLM V1)", .flag = "--prefix-caching"},
     [](ScenarioSpec& s, const FieldValue& v) { s.prefix_caching = v.flag; }},
    {{.key = "policy", .type = T::kText, .doc = "the engine's scheduler", .default_text = "the engine profile's (vllm-v1; sglang for --engine sglang)",
      .accepted = "vllm-v1, prefill-first, sglang, static", .flag = "--scheduler"},
     [](ScenarioSpec& s, const FieldValue& v) { s.policy = v.text; }},
    {{.key = "max_model_len", .type = T::kWhole,
      .doc = "longest prompt + output served, longer requests rejected; at most the model's context, and the KV "
             "cache must hold one such sequence",
      .default_text = "the model's context, capped by the KV cache", .unit = "tokens", .lo = 1, .hi = 100'000'000,
      .flag = "--max-model-len", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.max_model_len = v.whole(); }},
    {{.key = "async_scheduling", .type = T::kBool, .doc = "schedule the next step while this one runs (vLLM --async-scheduling)",
      .default_text = "the engine profile's", .flag = "--async-scheduling", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.async_scheduling = v.flag; }},
    {{.key = "kv_offloading_size", .type = T::kNumber,
      .doc = "host memory for a CPU tier of KV blocks, all ranks together (vLLM --kv-offloading-size; "
             "docs/cost-model.md#cpu-kv-offloading)",
      .default_text = "none", .unit = "GiB", .lo = 0, .hi = 1e6, .lo_open = true,
      .range_error = "must be in (0, 1000000] GiB", .flag = "--kv-offloading-size", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.kv_offloading_size = v.number; }},
    {{.key = "kv_offloading_backend", .type = T::kText, .doc = "the CPU tier's backend", .default_text = "native",
      .accepted = "native (vLLM's default, the only one modelled)", .flag = "--kv-offloading-backend", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.kv_offloading_backend = v.text; }},
};

// workload.stages: [{rate, duration}, ...] as the flag's text "5@10min,10@10min,20".
void read_stages(ScenarioSpec& s, const FieldValue& v) {
  const YAML::Node& st = v.node;
  if (!st.IsSequence()) throw Error(v.where + ": expected a list of {rate, duration}");
  std::string text;
  for (std::size_t i = 0; i < st.size(); ++i) {
    const std::string sw = v.where + "[" + std::to_string(i) + "]";
    check_keys(st[i], sw, {"rate", "duration"});
    if (!st[i]["rate"]) throw Error(sw + ".rate: missing (required)");
    text += (text.empty() ? "" : ",") + yaml_scalar(st[i]["rate"], sw + ".rate");
    if (st[i]["duration"]) text += "@" + yaml_scalar(st[i]["duration"], sw + ".duration");
  }
  s.rate = text;
}

const char* const kTimeForm = "a time with its unit: 20s, 500ms, 30min";

const Row kWorkloadFields[] = {
    {{.key = "users", .type = T::kWhole, .doc = "closed loop: users who send, wait, think and send again",
      .lo = 1, .hi = 10'000'000, .flag = "--users", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.users = v.whole(); }},
    {{.key = "concurrency", .type = T::kWhole, .doc = "a fixed number of requests in flight (vLLM --max-concurrency)",
      .lo = 1, .hi = 10'000'000, .flag = "--concurrency", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.concurrency = v.whole(); }},
    {{.key = "think_time", .type = T::kDistribution, .doc = "users: the pause between a reply and the next turn",
      .default_text = "0s", .accepted = kTimeForm, .flag = "--think-time", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.think_time = v.text; }},
    {{.key = "turns", .type = T::kDistribution, .doc = "users: turns per session; history is the next prompt's prefix",
      .default_text = "1", .flag = "--turns", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.turns = v.text; }},
    {{.key = "rate", .type = T::kCustom, .doc = "open loop: requests per second", .unit = "requests/s",
      .accepted = "1e-06..1e+07, or stages RATE@DURATION,...,RATE", .flag = "--rate", .origin = true,
      .type_words = "number or text", .json_schema = R"({"oneOf": [{"type": "number"}, {"type": "string"}]})"},
     [](ScenarioSpec& s, const FieldValue& v) { s.rate = yaml_scalar(v.node, v.where); }},
    {{.key = "stages", .type = T::kCustom, .doc = "open loop: rates in turn; only the last may omit its duration (runs to the end)",
      .accepted = "[{rate, duration}, ...], duration > 0", .flag = "--rate", .origin = true,
      .type_words = "list of {rate, duration}",
      .json_schema = R"({"type": "array", "items": {"type": "object", "required": ["rate"], "additionalProperties": false,
        "properties": {"rate": {"type": "number"}, "duration": {"type": "string"}}}})"},
     read_stages},
    {{.key = "arrival", .type = T::kText, .doc = "open loop: how arrivals are spaced", .default_text = "poisson",
      .accepted = "poisson, gamma, constant, offline", .flag = "--arrival", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.arrival = v.text; }},
    {{.key = "burstiness", .type = T::kNumber,
      .doc = "the gamma shape of arrivals (vLLM --burstiness); other than 1 makes poisson gamma, refused with "
             "constant or offline",
      .default_text = "1", .lo = 0, .lo_open = true, .range_error = "must be > 0 (the gamma shape)",
      .accepted = "0.01..100 when the run is built", .flag = "--burstiness", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.burstiness = v.number; }},
    {{.key = "prompt_tokens", .type = T::kDistribution, .doc = "prompt length", .default_text = "512", .unit = "tokens",
      .flag = "--input-tokens", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.input_tokens = v.text; }},
    {{.key = "input_tokens", .type = T::kDistribution, .doc = "the same as prompt_tokens", .default_text = "512",
      .unit = "tokens", .flag = "--input-tokens", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.input_tokens = v.text; }},
    {{.key = "output_tokens", .type = T::kDistribution, .doc = "output length", .default_text = "128", .unit = "tokens",
      .flag = "--output-tokens", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.output_tokens = v.text; }},
    {{.key = "system_prompt_tokens", .type = T::kWhole, .doc = "a shared prefix per group", .default_text = "0",
      .unit = "tokens", .lo = 0, .hi = 10'000'000, .flag = "--system-prompt-tokens"},
     [](ScenarioSpec& s, const FieldValue& v) { s.system_prompt_tokens = v.whole(); }},
    {{.key = "prefix_groups", .type = T::kWhole, .doc = "distinct system prompts", .default_text = "1", .lo = 1,
      .hi = 1'000'000, .flag = "--prefix-groups"},
     [](ScenarioSpec& s, const FieldValue& v) { s.prefix_groups = v.whole(); }},
    {{.key = "prompts_per_group", .type = T::kWhole,
      .doc = "open loop: recurring questions per group; request i sends pool prompt i mod (groups x N), as "
             "inference-perf's shared_prefix generator does",
      .default_text = "0 (all unique)", .lo = 0, .hi = 1'000'000, .flag = "--prompts-per-group"},
     [](ScenarioSpec& s, const FieldValue& v) { s.prompts_per_group = v.whole(); }},
    {{.key = "requests", .type = T::kWhole, .doc = "stop after this many requests",
      .default_text = "1000 (open loop without a duration)", .lo = 1, .hi = 2'000'000'000, .flag = "--requests"},
     [](ScenarioSpec& s, const FieldValue& v) { s.requests = v.whole(); }},
    {{.key = "duration", .type = T::kText, .doc = "stop sending after this long", .accepted = kTimeForm,
      .flag = "--duration", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.duration = v.text; }},
    {{.key = "warmup", .type = T::kText, .doc = "requests arriving earlier are not measured", .default_text = "0s",
      .accepted = kTimeForm, .flag = "--warmup", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.warmup = v.text; }},
    {{.key = "request_timeout", .type = T::kText,
      .doc = "the client gives up on a request after this long: aborted in the engine, counted as failed",
      .default_text = "never", .accepted = kTimeForm, .flag = "--request-timeout", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.request_timeout = v.text; }},
    {{.key = "trace", .type = T::kPath, .doc = "replay a trace file, relative to the scenario file", .flag = "--trace"},
     [](ScenarioSpec& s, const FieldValue& v) { s.trace = v.text; }},
    {{.key = "trace_format", .type = T::kText, .doc = "the trace's format", .default_text = "detected",
      .accepted = "azure, mooncake, burstgpt, csv", .flag = "--trace-format"},
     [](ScenarioSpec& s, const FieldValue& v) { s.trace_format = v.text; }},
    {{.key = "time_scale", .type = T::kNumber, .doc = "multiplies the trace's gaps between arrivals", .default_text = "1",
      .lo = 0, .lo_open = true, .range_error = "must be > 0 (it multiplies the gaps between arrivals)",
      .flag = "--time-scale"},
     [](ScenarioSpec& s, const FieldValue& v) { s.time_scale = v.number; }},
};

// speculative: vLLM's --speculative-config fields, plus capsim's acceptance and its decay.
struct SpeculativeFields {
  nlohmann::json config = nlohmann::json::object();
  std::optional<std::string> acceptance;
  std::optional<double> acceptance_decay;
};
const Field<SpeculativeFields> kSpeculativeFields[] = {
    {{.key = "method", .type = T::kText, .doc = "the drafting method",
      .accepted = "eagle3, eagle, mtp (deepseek_mtp), ngram, draft_model",
      .missing = "missing (eagle3, eagle, mtp, ngram, draft_model)"},
     [](SpeculativeFields& f, const FieldValue& v) { f.config["method"] = v.text; }},
    {{.key = "model", .type = T::kText, .doc = "draft_model only: the draft", .accepted = "a model name"},
     [](SpeculativeFields& f, const FieldValue& v) { f.config["model"] = v.text; }},
    {{.key = "num_speculative_tokens", .type = T::kWhole, .doc = "k, the tokens drafted per step",
      .default_text = "the method's", .lo = 1, .hi = 16},
     [](SpeculativeFields& f, const FieldValue& v) { f.config["num_speculative_tokens"] = v.whole(); }},
    {{.key = "acceptance", .type = T::kList,
      .doc = "alpha per draft position: one value or a list of k (ngram and draft_model must give it)",
      .default_text = "the method's cited value", .flag = "--spec-acceptance"},
     [](SpeculativeFields& f, const FieldValue& v) { f.acceptance = v.text; }},
    {{.key = "acceptance_decay", .type = T::kNumber, .doc = "with one acceptance value: alpha_i = alpha x decay^(i-1)",
      .default_text = "1", .flag = "--spec-acceptance-decay"},
     [](SpeculativeFields& f, const FieldValue& v) { f.acceptance_decay = v.number; }},
};

const Row kLoraFields[] = {
    {{.key = "enable_lora", .type = T::kBool, .doc = "serve LoRA adapters (vLLM --enable-lora)",
      .default_text = "true (with a lora section)", .flag = "--enable-lora"},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.enable_lora = v.flag; }},
    {{.key = "max_loras", .type = T::kWhole, .doc = "adapters in one batch / GPU slots", .default_text = "1",
      .lo = 1, .hi = 4096, .flag = "--max-loras"},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.max_loras = v.whole(); }},
    {{.key = "max_lora_rank", .type = T::kWhole, .doc = "the rank every GPU slot is sized for", .default_text = "16",
      .lo = 1, .hi = 512, .accepted = "vLLM's 1, 8, 16, 32, 64, 128, 256, 320, 512", .flag = "--max-lora-rank"},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.max_lora_rank = v.whole(); }},
    {{.key = "max_cpu_loras", .type = T::kWhole, .doc = "adapters cached in host memory", .default_text = "max_loras",
      .lo = 1, .hi = 1'000'000, .flag = "--max-cpu-loras"},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.max_cpu_loras = v.whole(); }},
    {{.key = "rank", .type = T::kWhole, .doc = "the adapters' own rank (PEFT's r)", .default_text = "max_lora_rank",
      .lo = 1, .hi = 512, .flag = "--lora-rank"},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.lora_rank = v.whole(); }},
    {{.key = "target_modules", .type = T::kList, .doc = "the adapted layers (PEFT's target_modules)",
      .accepted = "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj", .flag = "--lora-target-modules"},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.lora_target_modules = v.text; }},
    {{.key = "adapters", .type = T::kWhole, .doc = "requests name one of this many adapters", .default_text = "0 (base model)",
      .lo = 0, .hi = 1'000'000, .flag = "--lora-adapters", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.lora_adapters = v.whole(); }},
    {{.key = "distribution", .type = T::kText, .doc = "how requests pick adapters", .default_text = "uniform",
      .accepted = "uniform, zipf:S", .flag = "--lora-distribution", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.lora_distribution = v.text; }},
};

// disaggregation: the prefill and decode pools and the link between them.
struct Disaggregation {
  ScenarioSpec::ExtraGroup prefill, decode;
  std::string kv_link;
};
ScenarioSpec::ExtraGroup read_pool(const FieldValue& v) {
  ScenarioSpec::ExtraGroup e;
  e.where = v.where;
  read_fields<ScenarioSpec::ExtraGroup>(v.node, v.where, kPoolFields, e, {.prefix = v.where + "."});
  return e;
}
const char* const kPoolMissing =
    "missing (required); e.g. disaggregation: {prefill: {card: h100-sxm, tp: 1, replicas: 2}, decode: {card: "
    "h100-sxm, tp: 2, replicas: 1}, kv_link: ib-ndr-400}";
const Field<Disaggregation> kDisaggregationFields[] = {
    {{.key = "prefill", .type = T::kSection, .doc = "the prefill pool; replaces deployment's card, tp, replicas, weights",
      .flag = "--prefill-pool", .missing = kPoolMissing, .section = "pool"},
     [](Disaggregation& d, const FieldValue& v) { d.prefill = read_pool(v); }},
    {{.key = "decode", .type = T::kSection, .doc = "the decode pool: the same model, engine, KV precision and limits",
      .flag = "--decode-pool", .missing = kPoolMissing, .section = "pool"},
     [](Disaggregation& d, const FieldValue& v) { d.decode = read_pool(v); }},
    {{.key = "kv_link", .type = T::kText, .doc = "the link the prompt's KV crosses",
      .accepted = "a link name (capsim list links, calibration/links.yaml)", .flag = "--kv-link",
      .missing = kPoolMissing},
     [](Disaggregation& d, const FieldValue& v) { d.kv_link = v.text; }},
};

void read_deployment(ScenarioSpec& s, const FieldValue& v) {
  const auto group = [&](const YAML::Node& g, const std::string& w, bool first) {
    const ReadOptions opt{.prefix = w + ".", .origin = &s.origin};
    if (first) return read_fields<ScenarioSpec>(g, w, kDeploymentFields, s, opt);
    check_keys(g, w, accepted_keys(docs_of<ScenarioSpec>(kDeploymentFields), {}));
    for (const char* k : {"pp", "dp", "enable_expert_parallel", "expert_imbalance"}) {
      if (g[k]) {
        throw Error(w + "." + k + ": pipeline, data and expert parallelism are read from the "
                    "first deployment group only; accepted here: card, tp, replicas, weights");
      }
    }
    ScenarioSpec::ExtraGroup e;
    e.where = w;
    read_fields<ScenarioSpec::ExtraGroup>(g, w, kPoolFields, e, {.prefix = w + ".", .check_unknown = false});
    s.extra_groups.push_back(e);
  };
  if (v.node.IsSequence()) {
    s.extra_groups.clear();  // a list names every group
    for (std::size_t i = 0; i < v.node.size(); ++i) {
      group(v.node[i], v.where + "[" + std::to_string(i) + "]", i == 0);
    }
  } else {
    group(v.node, v.where, true);
  }
}

void read_disaggregation(ScenarioSpec& s, const FieldValue& v) {
  Disaggregation d;
  read_fields<Disaggregation>(v.node, v.where, kDisaggregationFields, d, {.prefix = v.where + "."});
  for (const auto& [flag, key] : {std::pair{"--card", "card"}, {"--tp", "tp"}, {"--weights", "weights"}}) {
    if (v.node["prefill"][key]) s.origin[flag] = d.prefill.where + "." + key;
  }
  s.deployment.card = d.prefill.card;
  s.deployment.tp = d.prefill.tp;
  s.deployment.weights = d.prefill.weights;
  s.replicas = d.prefill.replicas;
  s.decode_pool = d.decode;
  s.kv_link = d.kv_link;
  if (!v.parent["serving"]) s.serving = "pd-disaggregated";
}

void read_slo(ScenarioSpec& s, const FieldValue& v) {
  if (!v.node.IsMap()) throw Error(v.where + ": expected a mapping like {ttft_p95: 1s, tpot_p95: 100ms}");
  s.slos.clear();
  for (const auto& kv : v.node) {
    const std::string k = yaml_scalar(kv.first, v.where);
    s.slos.push_back(parse_slo(k, yaml_scalar(kv.second, v.where + "." + k), v.where + "." + k));
  }
}

ReadOptions section_options(ScenarioSpec& s, const FieldValue& v) {
  return {.prefix = v.where + ".", .base_dir = v.base_dir, .origin = &s.origin};
}

const Row kRootFields[] = {
    {{.key = "name", .type = T::kText, .doc = "a label for reports", .default_text = "command-line"},
     [](ScenarioSpec& s, const FieldValue& v) { s.name = v.text; }},
    {{.key = "description", .type = T::kText, .doc = "free text"},
     [](ScenarioSpec& s, const FieldValue& v) { s.description = v.text; }},
    {{.key = "model", .type = T::kText, .doc = "the model", .default_text = "llama-3.1-8b",
      .accepted = "a catalogue name, Hugging Face id or config.json path", .flag = "--model", .origin = true},
     [](ScenarioSpec& s, const FieldValue& v) { s.deployment.model = v.text; }},
    {{.key = "deployment", .type = T::kCustom,
      .doc = "one group, or a list for a mixed fleet behind one router (further groups: card, tp, replicas, weights)",
      .section = "deployment", .type_words = "mapping or list",
      .json_schema = R"({"oneOf": [{"$section": "deployment"}, {"type": "array", "items": {"$section": "deployment"}}]})"},
     read_deployment},
    {{.key = "engine", .type = T::kSection, .doc = "the engine's settings, by vLLM's names", .section = "engine"},
     [](ScenarioSpec& s, const FieldValue& v) { read_fields<ScenarioSpec>(v.node, v.where, kEngineFields, s, section_options(s, v)); }},
    {{.key = "router", .type = T::kText, .doc = "how the router picks a replica", .default_text = "least-outstanding",
      .accepted = "round-robin, least-outstanding, prefix-aware, size-aware", .flag = "--router"},
     [](ScenarioSpec& s, const FieldValue& v) { s.router = v.text; }},
    {{.key = "workload", .type = T::kSection,
      .doc = "one kind: trace > users > concurrency > rate / offline", .section = "workload"},
     [](ScenarioSpec& s, const FieldValue& v) {
       // A workload kind named here replaces the one `s` had (an override of a scenario file).
       for (const char* k : {"users", "concurrency", "rate", "stages", "trace"}) {
         if (v.node.IsMap() && v.node[k]) {
           s.users.reset();
           s.concurrency.reset();
           s.rate.reset();
           s.trace.reset();
           break;
         }
       }
       read_fields<ScenarioSpec>(v.node, v.where, kWorkloadFields, s, section_options(s, v));
     }},
    {{.key = "slo", .type = T::kCustom, .doc = "bounds the run must meet, as METRIC_STAT: TIME",
      .accepted = "METRIC ttft, tpot, itl, e2el x STAT mean, p50, p90, p95, p99; e.g. {ttft_p95: 1s, tpot_p95: 100ms}",
      .flag = "--slo", .type_words = "mapping",
      .json_schema = R"({"type": "object", "additionalProperties": {"oneOf": [{"type": "string"}, {"type": "number"}]}})"},
     read_slo},
    {{.key = "seed", .type = T::kWhole, .doc = "random seed (same seed, same result)", .default_text = "0", .lo = 0,
      .hi = 2147483647, .flag = "--seed"},
     [](ScenarioSpec& s, const FieldValue& v) { s.seed = static_cast<std::uint64_t>(v.whole()); }},
    {{.key = "references", .type = T::kIgnored, .doc = "sources the file cites"}, nullptr},
    {{.key = "notes", .type = T::kIgnored, .doc = "free text"}, nullptr},
    {{.key = "serving", .type = T::kText, .doc = "the serving model", .default_text = "aggregated",
      .accepted = "aggregated, pd-disaggregated (capsim list serving)", .flag = "--serving"},
     [](ScenarioSpec& s, const FieldValue& v) { s.serving = find_serving_model(v.text, v.where).name; }},
    {{.key = "disaggregation", .type = T::kSection,
      .doc = "prefill and decode pools (vLLM NixlConnector, Dynamo, llm-d); sets serving to pd-disaggregated",
      .section = "disaggregation"},
     read_disaggregation},
    {{.key = "speculative", .type = T::kSection, .doc = "speculative decoding (vLLM --speculative-config)",
      .section = "speculative"},
     [](ScenarioSpec& s, const FieldValue& v) {
       SpeculativeFields f;
       read_fields<SpeculativeFields>(v.node, v.where, kSpeculativeFields, f, {.prefix = v.where + "."});
       s.deployment.speculative_config = f.config.dump();
       s.deployment.spec_acceptance = f.acceptance;
       s.deployment.spec_acceptance_decay = f.acceptance_decay;
     }},
    {{.key = "lora", .type = T::kSection, .doc = "multi-LoRA serving (vLLM --enable-lora and its limits)",
      .section = "lora"},
     [](ScenarioSpec& s, const FieldValue& v) {
       s.deployment.enable_lora = true;
       read_fields<ScenarioSpec>(v.node, v.where, kLoraFields, s, section_options(s, v));
     }},
};

}  // namespace

void load_scenario_file(const std::string& path, ScenarioSpec& s) {
  const YamlDoc doc = YamlDoc::load(path);
  s.file = path;
  apply_scenario_yaml(doc.root(), path, path + ": ", std::filesystem::path(path).parent_path().string(), s);
}

void apply_scenario_yaml(const YAML::Node& root, const std::string& label, const std::string& prefix,
                         const std::string& base_dir, ScenarioSpec& s, const std::vector<std::string>& own_keys) {
  if (!root || root.IsNull()) return;
  if (!root.IsMap()) throw Error(label + ": expected a mapping of scenario fields");
  read_fields<ScenarioSpec>(root, label, kRootFields, s,
                            {.prefix = prefix, .base_dir = base_dir, .origin = &s.origin, .own_keys = own_keys});
  if (s.serving == "pd-disaggregated" && !s.decode_pool) {
    throw Error(prefix + "serving: pd-disaggregated needs a disaggregation: {prefill, decode, kv_link} section");
  }
}

std::vector<SectionDoc> scenario_field_sections() {
  return {
      {"", "every field is optional; a flag of the same name overrides it", docs_of<ScenarioSpec>(kRootFields)},
      {"deployment", "the deployment group (the first of a list); pp, dp and expert parallelism are read from it only",
       docs_of<ScenarioSpec>(kDeploymentFields)},
      {"pool", "a further deployment group, or disaggregation's prefill or decode pool",
       docs_of<ScenarioSpec::ExtraGroup>(kPoolFields)},
      {"engine", "vLLM's names; defaults from the engine profile and the card", docs_of<ScenarioSpec>(kEngineFields)},
      {"workload", "one kind: trace > users > concurrency > rate / offline", docs_of<ScenarioSpec>(kWorkloadFields)},
      {"disaggregation", "prefill and decode pools (docs/deployment-options.md#prefilldecode-disaggregation)",
       docs_of<Disaggregation>(kDisaggregationFields)},
      {"speculative", "vLLM --speculative-config (docs/deployment-options.md#speculative-decoding)",
       docs_of<SpeculativeFields>(kSpeculativeFields)},
      {"lora", "vLLM --enable-lora and its limits (docs/deployment-options.md#multi-lora-serving)",
       docs_of<ScenarioSpec>(kLoraFields)},
  };
}

std::string scenario_fields_markdown() { return fields_markdown(scenario_field_sections()); }

nlohmann::ordered_json scenario_json_schema() { return fields_json_schema(scenario_field_sections()); }

}  // namespace capsim::scenario
