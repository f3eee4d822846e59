#include "sim/answers/launch_command.h"

#include <cctype>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "sim/report/table.h"
#include "sim/hardware/precision.h"
#include "sim/llm/memory_plan.h"
#include "sim/scenario/catalogues.h"

namespace capsim::answers {

// The scenario layer's specs and catalogues, which every answer reads.
using namespace capsim::scenario;
namespace {

// vLLM's --dtype choices (auto, half, float16, bfloat16, float, float32).
std::string vllm_dtype(Precision half) {
  switch (half) {
    case Precision::kFp32: return "float32";
    case Precision::kFp16: return "float16";
    default: return "bfloat16";
  }
}

std::string number(double v) { return fmt("%g", v); }

// Single-quotes a value a POSIX shell would split or expand.
std::string shell_word(const std::string& s) {
  if (s.empty()) return "''";
  bool plain = true;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_' || c == '.' || c == '/' || c == ':' || c == '=' || c == ',';
    if (!ok) plain = false;
  }
  if (plain) return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The model as both servers take it: the Hugging Face id, else the local checkpoint directory.
std::string model_argument(const ModelSpec& m) {
  if (!m.hf_id.empty()) return m.hf_id;
  if (!m.config_path.empty()) return std::filesystem::path(m.config_path).parent_path().string();
  return m.name;
}

// Whether a Hugging Face id names an instruction-tuned checkpoint: "...-Instruct...", "...-Chat...",
// "...-it" (Gemma), "...-chat-hf" (Llama 2).
bool names_chat_checkpoint(const std::string& id) {
  std::string name = id.substr(id.find('/') + 1);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name.find("instruct") != std::string::npos || name.find("chat") != std::string::npos ||
         (name.size() > 3 && name.compare(name.size() - 3, 3, "-it") == 0);
}

// The checkpoint the line serves: for a chat workload the instruct/chat twin of a base hf_id
// when an alias names one (a Hugging Face id, with its organisation), else model_argument.
std::string served_model(const LaunchTarget& t) {
  const ModelSpec& m = t.deployment.model;
  if (t.chat && !m.hf_id.empty() && !names_chat_checkpoint(m.hf_id)) {
    if (const ModelEntry* e = models().entry(m.name)) {
      for (const std::string& alias : e->aliases) {
        if (alias.find('/') != std::string::npos && names_chat_checkpoint(alias)) return alias;
      }
    }
  }
  return model_argument(m);
}

// The context the replica served: the simulation's memory plan, else --max-model-len as given.
long long served_len(const LaunchTarget& t) {
  return t.served_max_model_len > 0 ? t.served_max_model_len : t.deployment.limits.max_model_len;
}

// Weights that are not the checkpoint as shipped and that the server cannot quantise on load
// need a checkpoint in that format; the note names it.
void weights_note(const LaunchTarget& t, const std::string& server, std::vector<std::string>& notes) {
  const Deployment& d = t.deployment;
  const std::string fmt_name(precision_name(d.weights));
  const std::string id = served_model(t);
  if (d.weights == Precision::kInt4) {
    notes.push_back("weights int4: serve an AWQ or GPTQ int4 checkpoint of " + id + " (" + server +
                    " reads its quantization_config); the line names the 16-bit checkpoint");
  } else if (d.weights == Precision::kInt8) {
    notes.push_back("weights int8: serve a W8A8 int8 checkpoint of " + id + " (" + server +
                    " reads its quantization_config); the line names the 16-bit checkpoint");
  } else if (is_fp4(d.weights)) {
    notes.push_back("weights " + fmt_name + ": serve an " + fmt_name + " checkpoint of " + id + " (" + server +
                    " reads its quantization_config); the line names the 16-bit checkpoint");
  }
}

}  // namespace

std::vector<LaunchFlag> vllm_serve_flags(const LaunchTarget& t, std::vector<std::string>& notes) {
  const Deployment& d = t.deployment;
  const SchedulerLimits& lim = d.limits;
  const bool as_shipped = t.weights_spec == "auto";
  std::vector<LaunchFlag> f;

  // Parallelism. One command per replica: capsim simulates independent replicas behind its own
  // router. Within one replica: pipeline stages, the engine's own data-parallel ranks (DP
  // attention on an MoE model) and expert parallelism, as simulated (sim/llm/parallelism.h).
  f.push_back({"--tensor-parallel-size", std::to_string(d.tp)});
  if (d.pp > 1) f.push_back({"--pipeline-parallel-size", std::to_string(d.pp)});
  if (d.dp > 1) f.push_back({"--data-parallel-size", std::to_string(d.dp)});
  if (d.expert_parallel) f.push_back({"--enable-expert-parallel", ""});
  if (d.gpus() > 8) {
    notes.push_back("this engine spans " + std::to_string((d.gpus() + 7) / 8) +
                    " servers of 8 GPUs: start it across them (Ray for pipeline stages, vLLM's "
                    "multi-node data-parallel options for DP ranks); capsim assumed a 400 Gb/s "
                    "network port per GPU between servers");
  }
  if (d.dp > 1 && d.expert_parallel) {
    notes.push_back("DP attention: each of the " + std::to_string(d.dp) +
                    " ranks keeps its own requests and KV cache, the experts are shared over " +
                    std::to_string(d.tp * d.dp) + " GPUs; capsim assumed an expert load imbalance of " +
                    number(d.expert_imbalance) + " (busiest GPU over the mean) and the ranks balanced by the router");
  }

  // Precision. --dtype is the 16-bit type the unquantised layers run at (bf16 where the card has
  // it, else fp16; capsim's native_half). Online FP8 quantisation of a 16-bit checkpoint is
  // --quantization fp8 (vLLM's dynamic per-tensor FP8); a checkpoint shipped in FP8 needs none.
  const Precision half = d.weights == Precision::kFp32 ? Precision::kFp32 : native_half(d.card);
  f.push_back({"--dtype", vllm_dtype(half)});
  if (!as_shipped && d.weights == Precision::kFp8 && d.model.checkpoint_quant != "fp8") {
    f.push_back({"--quantization", "fp8"});
  }
  if (!as_shipped) weights_note(t, "vLLM", notes);
  f.push_back({"--kv-cache-dtype", d.kv_cache == Precision::kFp8 ? "fp8" : "auto"});

  // Limits the simulation ran with (SchedulerLimits, vLLM's names).
  if (const long long len = served_len(t); len > 0) f.push_back({"--max-model-len", std::to_string(len)});
  f.push_back({"--max-num-seqs", std::to_string(lim.max_num_seqs)});
  f.push_back({"--max-num-batched-tokens", std::to_string(lim.max_num_batched_tokens)});
  f.push_back({"--gpu-memory-utilization", number(lim.gpu_memory_utilization)});
  f.push_back({"--block-size", std::to_string(lim.block_size)});
  f.push_back({lim.enable_prefix_caching ? "--enable-prefix-caching" : "--no-enable-prefix-caching", ""});

  // Scheduler: vLLM V1's token-budget scheduler is capsim's vllm-v1 policy; prefill-first runs
  // whole prompts (the nearest vLLM setting: chunked prefill off); static batching has no vLLM
  // equivalent.
  const bool chunked = t.policy == "vllm-v1" && lim.enable_chunked_prefill;
  f.push_back({chunked ? "--enable-chunked-prefill" : "--no-enable-chunked-prefill", ""});
  if (t.policy == "static") {
    notes.push_back("scheduler static: vLLM has no static batching; the line runs continuous batching");
  }
  f.push_back({d.engine.async_scheduling ? "--async-scheduling" : "--no-async-scheduling", ""});
  if (lim.kv_offloading_size > 0) {  // the CPU tier simulated (vLLM's OffloadingConnector)
    f.push_back({"--kv-offloading-size", number(lim.kv_offloading_size)});
    f.push_back({"--kv-offloading-backend", "native"});
  }

  // Disaggregated pools: vLLM's NixlConnector on both sides (kv_both, as in vLLM's
  // docs/features/nixl_connector_usage.md); a proxy (vLLM's disagg proxy, llm-d, Dynamo) sends
  // each request to a prefill instance with max_tokens 1, then to a decode instance.
  if (!t.pd_role.empty()) {
    f.push_back({"--kv-transfer-config", R"({"kv_connector":"NixlConnector","kv_role":"kv_both"})"});
    notes.push_back(t.pd_role == "prefill"
                        ? "prefill pool: a P/D proxy sends each request here first with max_tokens 1"
                        : "decode pool: the proxy then sends the request here; it pulls the prompt's KV over NIXL");
  }
  // Speculative decoding: vLLM's --speculative-config JSON with the method and k simulated.
  // capsim's acceptance is its own input (vLLM measures it), so it is a note, not a field.
  if (d.speculative) {
    const SpeculativeConfig& sc = *d.speculative;
    nlohmann::json j = nlohmann::json::object();
    // vLLM names DeepSeek's MTP module "deepseek_mtp" (docs/features/spec_decode); other
    // models' MTP layers "mtp".
    j["method"] = sc.method == "mtp" && d.model.model_type.rfind("deepseek", 0) == 0 ? "deepseek_mtp" : sc.method;
    if (sc.draft) {
      j["model"] = model_argument(*sc.draft);
    } else if (!sc.draft_model.empty()) {
      j["model"] = sc.draft_model;
    } else if (sc.method == "eagle" || sc.method == "eagle3") {
      notes.push_back("--speculative-config: add \"model\": the " + sc.method + " head trained for " +
                      model_argument(d.model) + " (capsim costs a one-layer head; it needs no checkpoint)");
    }
    j["num_speculative_tokens"] = sc.num_speculative_tokens;
    f.push_back({"--speculative-config", j.dump()});
    std::string alphas;
    for (double a : sc.acceptance) alphas += (alphas.empty() ? "" : ", ") + number(a);
    notes.push_back("speculative decoding simulated at acceptance " + alphas + " per draft position (" +
                    number(sc.expected_tokens()) + " tokens per verify); vLLM logs the measured acceptance");
  }
  // Multi-LoRA: the slots and caches simulated; the adapters themselves are named at launch.
  if (d.lora) {
    const LoraConfig& lc = *d.lora;
    f.push_back({"--enable-lora", ""});
    f.push_back({"--max-loras", std::to_string(lc.max_loras)});
    f.push_back({"--max-lora-rank", std::to_string(lc.max_lora_rank)});
    f.push_back({"--max-cpu-loras", std::to_string(lc.cpu_slots())});
    notes.push_back("LoRA: name the adapters with --lora-modules NAME=PATH ... (or load them at run time); "
                    "capsim simulated rank-" + std::to_string(lc.adapter_rank()) + " adapters on " +
                    std::to_string(lc.target_modules.size()) + " linear layer kinds");
  }
  if (d.engine.name != "vllm") {
    notes.push_back("simulated with the " + d.engine.name +
                    " engine profile: this vLLM line has the same limits; the profile's scheduler, memory defaults "
                    "or step costs may differ from vLLM's");
  }
  return f;
}

std::vector<LaunchFlag> trtllm_serve_flags(const LaunchTarget& t, std::vector<std::string>& notes) {
  const Deployment& d = t.deployment;
  const SchedulerLimits& lim = d.limits;
  std::vector<LaunchFlag> f;
  f.push_back({"--tp_size", std::to_string(d.tp)});
  if (d.pp > 1) f.push_back({"--pp_size", std::to_string(d.pp)});
  if (d.dp > 1 || d.expert_parallel) {
    notes.push_back("expert parallelism / DP attention: set moe_expert_parallel_size and "
                    "enable_attention_dp in capsim-extra-llm-api-options.yaml (not trtllm-serve flags)");
  }
  f.push_back({"--max_batch_size", std::to_string(lim.max_num_seqs)});
  f.push_back({"--max_num_tokens", std::to_string(lim.max_num_batched_tokens)});
  if (const long long len = served_len(t); len > 0) f.push_back({"--max_seq_len", std::to_string(len)});
  // The profile's gpu_memory_utilization is TensorRT-LLM's kv_cache_free_gpu_memory_fraction
  // (calibration/engines/tensorrt-llm.yaml, source trtllm-docs).
  f.push_back({"--kv_cache_free_gpu_memory_fraction", number(lim.gpu_memory_utilization)});
  f.push_back({"--extra_llm_api_options", "capsim-extra-llm-api-options.yaml"});
  const bool chunked = t.policy == "vllm-v1" && lim.enable_chunked_prefill;
  notes.push_back(std::string("capsim-extra-llm-api-options.yaml: kv_cache_config: {dtype: ") +
                  (d.kv_cache == Precision::kFp8 ? "fp8" : "auto") +
                  ", tokens_per_block: " + std::to_string(lim.block_size) +
                  ", enable_block_reuse: " + (lim.enable_prefix_caching ? "true" : "false") +
                  "}, enable_chunked_prefill: " + (chunked ? "true" : "false"));
  if (t.weights_spec != "auto" && d.weights == Precision::kFp8 && d.model.checkpoint_quant != "fp8") {
    notes.push_back("weights fp8: serve an FP8 checkpoint of " + served_model(t) +
                    " (NVIDIA ModelOpt); trtllm-serve does not quantise on load");
  }
  if (t.weights_spec != "auto") weights_note(t, "TensorRT-LLM", notes);
  if (d.speculative || d.lora) {
    notes.push_back(std::string("capsim-extra-llm-api-options.yaml: ") +
                    (d.speculative ? "speculative decoding (speculative_config) " : "") +
                    (d.speculative && d.lora ? "and " : "") + (d.lora ? "LoRA (lora_config) " : "") +
                    "as simulated go in this file too; capsim prints no TensorRT-LLM values for them");
  }
  notes.push_back("the tensorrt-llm profile was measured on TensorRT engines (trtllm-serve's default "
                  "backend before 1.0; on 1.x add --backend tensorrt)");
  return f;
}

std::vector<LaunchFlag> sglang_launch_flags(const LaunchTarget& t, std::vector<std::string>& notes) {
  const Deployment& d = t.deployment;
  const SchedulerLimits& lim = d.limits;
  const bool as_shipped = t.weights_spec == "auto";
  std::vector<LaunchFlag> f;
  // Parallelism: TP; DP attention with expert parallelism over the TP x DP group (SGLang's
  // --enable-dp-attention splits the TP group into DP ranks, so --tp-size is the whole group).
  f.push_back({"--tp-size", std::to_string(d.tp * (d.dp > 1 && d.expert_parallel ? d.dp : 1))});
  if (d.dp > 1) {
    f.push_back({"--dp-size", std::to_string(d.dp)});
    if (d.expert_parallel) f.push_back({"--enable-dp-attention", ""});
  }
  if (d.expert_parallel) f.push_back({"--ep-size", std::to_string(d.tp * d.dp)});
  if (d.pp > 1) {
    notes.push_back("pipeline parallelism (" + std::to_string(d.pp) +
                    " stages) as simulated: capsim prints no SGLang flag for it; see SGLang's server arguments");
  }
  const Precision half = d.weights == Precision::kFp32 ? Precision::kFp32 : native_half(d.card);
  f.push_back({"--dtype", vllm_dtype(half)});
  if (!as_shipped && d.weights == Precision::kFp8 && d.model.checkpoint_quant != "fp8") {
    f.push_back({"--quantization", "fp8"});
  }
  if (!as_shipped) weights_note(t, "SGLang", notes);
  f.push_back({"--kv-cache-dtype", d.kv_cache == Precision::kFp8 ? "fp8_e4m3" : "auto"});
  // Limits the simulation ran with, in SGLang's names: max_num_seqs is --max-running-requests,
  // the step's token budget --chunked-prefill-size (-1: whole prompts), the KV page --page-size,
  // the memory share --mem-fraction-static (calibration/engines/sglang.yaml).
  if (const long long len = served_len(t); len > 0) f.push_back({"--context-length", std::to_string(len)});
  f.push_back({"--max-running-requests", std::to_string(lim.max_num_seqs)});
  const bool chunked = t.policy != "prefill-first" && t.policy != "static" && lim.enable_chunked_prefill;
  f.push_back({"--chunked-prefill-size", chunked ? std::to_string(lim.max_num_batched_tokens) : "-1"});
  f.push_back({"--mem-fraction-static", number(lim.gpu_memory_utilization)});
  f.push_back({"--page-size", std::to_string(lim.block_size)});
  if (!lim.enable_prefix_caching) f.push_back({"--disable-radix-cache", ""});
  if (!d.engine.async_scheduling) f.push_back({"--disable-overlap-schedule", ""});
  if (t.policy == "static") {
    notes.push_back("scheduler static: SGLang has no static batching; the line runs continuous batching");
  }
  if (lim.kv_offloading_size > 0) {
    notes.push_back("CPU KV tier of " + number(lim.kv_offloading_size) +
                    " GiB as simulated: SGLang's hierarchical cache (HiCache) is the nearest; capsim prints no value for it");
  }
  if (!t.pd_role.empty()) {
    f.push_back({"--disaggregation-mode", t.pd_role});
    f.push_back({"--disaggregation-transfer-backend", "nixl"});
    notes.push_back(t.pd_role == "prefill" ? "prefill pool: SGLang's router (PD mode) sends each request here first"
                                           : "decode pool: it pulls the prompt's KV from the prefill pool over NIXL");
  }
  if (d.speculative) {
    const SpeculativeConfig& sc = *d.speculative;
    // SGLang's names: NEXTN for a model's own MTP layers, EAGLE / EAGLE3 for a trained head.
    std::string algorithm;
    if (sc.method == "mtp") algorithm = "NEXTN";
    else if (sc.method == "eagle") algorithm = "EAGLE";
    else if (sc.method == "eagle3") algorithm = "EAGLE3";
    if (algorithm.empty()) {
      notes.push_back("speculative decoding (" + sc.method + ", " + std::to_string(sc.num_speculative_tokens) +
                      " tokens) as simulated: capsim prints SGLang flags only for MTP and EAGLE");
    } else {
      f.push_back({"--speculative-algorithm", algorithm});
      f.push_back({"--speculative-num-steps", std::to_string(sc.num_speculative_tokens)});
      f.push_back({"--speculative-eagle-topk", "1"});  // one chain of drafts, as capsim costs it
      f.push_back({"--speculative-num-draft-tokens", std::to_string(sc.num_speculative_tokens + 1)});
      if (algorithm != "NEXTN") {
        notes.push_back("add --speculative-draft-model-path: the " + sc.method + " head trained for " +
                        model_argument(d.model));
      }
    }
  }
  if (d.lora) {
    f.push_back({"--enable-lora", ""});
    f.push_back({"--max-loras-per-batch", std::to_string(d.lora->max_loras)});
    notes.push_back("LoRA: name the adapters with --lora-paths NAME=PATH ...; capsim simulated rank-" +
                    std::to_string(d.lora->adapter_rank()) + " adapters");
  }
  notes.push_back("the sglang profile's step costs are vLLM's, borrowed (calibration/engines/sglang.yaml); "
                  "its scheduler and memory defaults are SGLang's");
  return f;
}

std::vector<LaunchCommand> launch_commands(const LaunchTarget& t) {
  std::vector<LaunchCommand> out;
  std::string replicas_note;
  if (t.replicas > 1) {
    replicas_note = std::to_string(t.replicas) + " replicas of this command (" +
                    std::to_string(t.replicas * t.deployment.gpus()) + " GPUs of " + t.deployment.card.name +
                    ") behind a " + t.router + " router";
  }
  LaunchCommand v;
  v.program = "vllm serve";
  v.model = served_model(t);
  if (!replicas_note.empty()) v.notes.push_back(replicas_note);
  v.flags = vllm_serve_flags(t, v.notes);
  out.push_back(v);
  if (t.deployment.engine.name == "sglang") {
    LaunchCommand g;
    g.program = "python3 -m sglang.launch_server";
    g.model_flag = "--model-path";
    g.model = v.model;
    if (!replicas_note.empty()) g.notes.push_back(replicas_note);
    g.flags = sglang_launch_flags(t, g.notes);
    out.push_back(g);
  }
  if (t.deployment.engine.name == "tensorrt-llm" && t.pd_role.empty()) {
    LaunchCommand r;
    r.program = "trtllm-serve";
    r.model = v.model;
    if (!replicas_note.empty()) r.notes.push_back(replicas_note);
    r.flags = trtllm_serve_flags(t, r.notes);
    out.push_back(r);
  }
  return out;
}

std::vector<LaunchTarget> launch_targets(const ScenarioSpec& spec) {
  std::vector<LaunchTarget> out;
  const std::vector<ReplicaGroup> groups = resolve_groups(spec);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    LaunchTarget t;
    t.deployment = groups[g].deployment;
    t.weights_spec = g == 0 ? spec.deployment.weights : spec.extra_groups[g - 1].weights;
    t.replicas = groups[g].replicas;
    t.router = spec.router;
    t.policy = scheduler_policy(spec);
    t.chat = spec.users.has_value() || spec.turns != "1" || spec.system_prompt_tokens > 0;
    // The context the simulated replicas served: the same memory plan the simulation makes
    // (sim/cluster/cluster.cc: plan_memory(d, 1, policy == vllm-v1)).
    const MemoryPlan plan = plan_memory(t.deployment, 1, scheduler_policy(spec) == "vllm-v1");
    if (plan.fits) t.served_max_model_len = plan.max_model_len;
    out.push_back(t);
  }
  if (spec.serving == "pd-disaggregated") {
    out.front().pd_role = "prefill";
    const DecodePool pool = resolve_decode_pool(spec);
    LaunchTarget t = out.front();
    t.deployment = pool.groups.front().deployment;
    t.weights_spec = spec.decode_pool->weights;
    t.replicas = pool.groups.front().replicas;
    t.pd_role = "decode";
    const MemoryPlan plan = plan_memory(t.deployment, 1, scheduler_policy(spec) == "vllm-v1");
    t.served_max_model_len = plan.fits ? plan.max_model_len : 0;
    out.push_back(t);
  }
  return out;
}

std::string LaunchCommand::line() const {
  std::string s = program + " " + (model_flag.empty() ? "" : model_flag + " ") + shell_word(model);
  for (const LaunchFlag& f : flags) {
    s += " " + f.name;
    if (!f.value.empty()) s += " " + shell_word(f.value);
  }
  return s;
}

nlohmann::json LaunchCommand::to_json() const {
  nlohmann::json fl = nlohmann::json::array();
  for (const LaunchFlag& f : flags) fl.push_back({{"name", f.name}, {"value", f.value}});
  nlohmann::json j = {{"program", program}, {"model", model}, {"flags", fl}, {"line", line()}, {"notes", notes}};
  if (!model_flag.empty()) j["model_flag"] = model_flag;
  return j;
}

nlohmann::json launch_json(const std::vector<LaunchCommand>& commands) {
  nlohmann::json a = nlohmann::json::array();
  for (const LaunchCommand& c : commands) a.push_back(c.to_json());
  return a;
}

std::string launch_text(const std::vector<LaunchCommand>& commands, const std::string& indent) {
  std::string s;
  for (const LaunchCommand& c : commands) {
    s += indent + c.line() + "\n";
    for (const std::string& n : c.notes) s += indent + "  # " + n + "\n";
  }
  return s;
}

}  // namespace capsim::answers
