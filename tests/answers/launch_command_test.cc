// The config to launch (sim/answers/launch_command.h): the `vllm serve` line carries the
// engine flags the simulation assumed, every flag name is one vLLM documents (the cited list in
// calibration/launch/vllm-serve-flags.yaml), and the TensorRT-LLM and SGLang profiles get their servers' lines.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include <yaml-cpp/yaml.h>

#include "sim/llm/memory_plan.h"
#include "sim/scenario/catalogues.h"
#include "sim/scenario/deployment_spec.h"
#include "sim/answers/launch_command.h"

namespace {

using namespace capsim;
using namespace capsim::scenario;
using namespace capsim::answers;

LaunchTarget target(const std::string& model, const std::string& card, int tp, const std::string& weights,
                    const std::string& kv = "auto", const std::string& engine = "vllm") {
  DeploymentSpec s;
  s.model = model;
  s.card = card;
  s.tp = tp;
  s.weights = weights;
  s.kv_cache = kv;
  s.engine = engine;
  LaunchTarget t;
  t.deployment = s.resolve();
  t.weights_spec = weights;
  return t;
}

// The documented flag names of `program` from calibration/launch/<file>, each with a source that
// the file's `sources` cites.
std::set<std::string> documented(const std::string& file) {
  const YAML::Node root = YAML::LoadFile(data_dir() + "/calibration/launch/" + file);
  std::set<std::string> names;
  for (const auto& kv : root["flags"]) {
    const std::string source = kv.second.as<std::string>();
    INFO(file << ": " << kv.first.as<std::string>() << " cites '" << source << "'");
    REQUIRE(root["sources"][source]);
    names.insert(kv.first.as<std::string>());
  }
  return names;
}

void require_documented(const LaunchCommand& c, const std::set<std::string>& names) {
  for (const LaunchFlag& f : c.flags) {
    INFO(c.program << " prints " << f.name);
    CHECK(names.count(f.name) == 1);
  }
}

}  // namespace

TEST_CASE("launch: Llama-3.1-70B fp8 TP2 on H100 gives the exact vllm serve line", "[launch]") {
  LaunchTarget t = target("llama-3.1-70b", "h100-sxm", 2, "fp8");
  // The served context: the model's 131072 tokens (max_position_embeddings), because the KV
  // cache holds more. By hand: weights 70.55e9 params x 1 B (fp8) / 2 GPUs = 35.3 GB per GPU;
  // budget 0.9 x 79.6 GiB visible = 76.9 GB; KV per token per GPU = 80 layers x (8 KV heads / 2)
  // x 128 x 2 (K and V) x 2 B (bf16 cache) = 163840 B; (76.9 - 35.3 - runtime ~3.6 -
  // activations ~2) GB / 163840 B = ~220k tokens > 131072.
  const MemoryPlan plan = plan_memory(t.deployment, 4096);
  REQUIRE(plan.kv_longest_sequence > 131072);
  t.served_max_model_len = plan.max_model_len;
  CHECK(plan.max_model_len == 131072);
  const auto cmds = launch_commands(t);
  REQUIRE(cmds.size() == 1);
  // H100 (>= 70 GiB, not an A100): vLLM's server defaults 1024 sequences and 8192 tokens per
  // step (default_limits); vLLM V1 defaults: block 16, memory 0.9, prefix caching, chunked
  // prefill, asynchronous scheduling (0.14+). fp8 weights on a 16-bit checkpoint: vLLM's online
  // FP8 (--quantization fp8) with the rest in bf16; the KV cache stays 16-bit (auto).
  CHECK(cmds[0].line() ==
        "vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 2 --dtype bfloat16 "
        "--quantization fp8 --kv-cache-dtype auto --max-model-len 131072 --max-num-seqs 1024 "
        "--max-num-batched-tokens 8192 --gpu-memory-utilization 0.9 --block-size 16 "
        "--enable-prefix-caching --enable-chunked-prefill --async-scheduling");
  CHECK(cmds[0].notes.empty());
}

TEST_CASE("launch: precisions, limits and scheduler follow what was simulated", "[launch]") {
  SECTION("an fp8 KV cache on an L40S with vLLM's defaults for GPUs under 70 GiB") {
    // L40S (48 GB < 70 GiB): 256 sequences, 2048 tokens per step.
    LaunchTarget t = target("llama-3.1-8b", "l40s", 1, "auto", "fp8");
    const std::string line = launch_commands(t)[0].line();
    CHECK(line.find("--kv-cache-dtype fp8") != std::string::npos);
    CHECK(line.find("--max-num-seqs 256 --max-num-batched-tokens 2048") != std::string::npos);
    CHECK(line.find("--quantization") == std::string::npos);  // as shipped: vLLM reads the config
  }
  SECTION("a checkpoint shipped in FP8 needs no --quantization") {
    LaunchTarget t = target("deepseek-v3", "h200", 8, "fp8");
    CHECK(launch_commands(t)[0].line().find("--quantization") == std::string::npos);
  }
  SECTION("int4 weights: the line cannot quantise; a note names the checkpoint to use") {
    LaunchTarget t = target("llama-3.1-8b", "rtx-4090", 1, "int4");
    const auto c = launch_commands(t)[0];
    CHECK(c.line().find("--quantization") == std::string::npos);
    REQUIRE(c.notes.size() == 1);
    CHECK(c.notes[0].find("AWQ or GPTQ int4 checkpoint of meta-llama/Llama-3.1-8B") != std::string::npos);
  }
  SECTION("a T4 runs fp16; prefix caching off and the prefill-first scheduler") {
    LaunchTarget t = target("llama-3.2-1b", "t4", 1, "auto");
    t.deployment.limits.enable_prefix_caching = false;
    t.policy = "prefill-first";
    const std::string line = launch_commands(t)[0].line();
    CHECK(line.find("--dtype float16") != std::string::npos);
    CHECK(line.find("--no-enable-prefix-caching --no-enable-chunked-prefill") != std::string::npos);
  }
  SECTION("replicas: one line per replica, the router in a note") {
    LaunchTarget t = target("llama-3.1-8b", "h100-sxm", 1, "auto");
    t.replicas = 3;
    t.router = "prefix-aware";
    const auto c = launch_commands(t)[0];
    REQUIRE(!c.notes.empty());
    CHECK(c.notes[0] == "3 replicas of this command (3 GPUs of h100-sxm) behind a prefix-aware router");
    CHECK(c.line().find("--data-parallel-size") == std::string::npos);
  }
}

TEST_CASE("launch: every printed flag is a documented vllm serve / trtllm-serve flag", "[launch]") {
  const std::set<std::string> vllm = documented("vllm-serve-flags.yaml");
  const std::set<std::string> trt = documented("trtllm-serve-flags.yaml");
  // The list itself must not accept a misspelling (a check that cannot fail is no check).
  CHECK(vllm.count("--max-num-seq") == 0);
  CHECK(vllm.count("--tensor-parallel-size") == 1);
  int commands = 0;
  for (const std::string engine : {"vllm", "tensorrt-llm", "lmdeploy"}) {
    for (const std::string weights : {"auto", "fp8", "int4"}) {
      for (const std::string kv : {"auto", "fp8"}) {
        for (const std::string policy : {"vllm-v1", "prefill-first", "static"}) {
          for (bool prefix : {true, false}) {
            LaunchTarget t = target("llama-3.1-70b", "h100-sxm", 4, weights, kv, engine);
            t.policy = policy;
            t.deployment.limits.enable_prefix_caching = prefix;
            t.deployment.engine.async_scheduling = prefix;  // both forms of the switch
            t.served_max_model_len = 8192;
            t.replicas = 2;
            for (const LaunchCommand& c : launch_commands(t)) {
              ++commands;
              if (c.program == "vllm serve") require_documented(c, vllm);
              else if (c.program == "trtllm-serve") require_documented(c, trt);
              else FAIL("unexpected program " << c.program);
            }
          }
        }
      }
    }
  }
  // 3 engines x 3 weights x 2 KV x 3 policies x 2 = 108 vllm lines + 36 trtllm-serve lines.
  CHECK(commands == 144);
}

TEST_CASE("launch: the TensorRT-LLM profile also gets a trtllm-serve line", "[launch]") {
  LaunchTarget t = target("llama-3.1-8b", "h100-sxm", 1, "auto", "fp8", "tensorrt-llm");
  t.served_max_model_len = 32768;
  const auto cmds = launch_commands(t);
  REQUIRE(cmds.size() == 2);
  // The tensorrt-llm profile: 64 tokens per block, 0.9 of free memory, no block reuse, no chunked
  // context (calibration/engines/tensorrt-llm.yaml defaults).
  CHECK(cmds[1].line() ==
        "trtllm-serve meta-llama/Llama-3.1-8B --tp_size 1 --max_batch_size 1024 "
        "--max_num_tokens 8192 --max_seq_len 32768 --kv_cache_free_gpu_memory_fraction 0.9 "
        "--extra_llm_api_options capsim-extra-llm-api-options.yaml");
  REQUIRE(!cmds[1].notes.empty());
  CHECK(cmds[1].notes[0] ==
        "capsim-extra-llm-api-options.yaml: kv_cache_config: {dtype: fp8, tokens_per_block: 64, "
        "enable_block_reuse: false}, enable_chunked_prefill: false");
  // The vLLM line says its step costs are not the ones simulated.
  CHECK(cmds[0].notes.back().find("tensorrt-llm engine profile") != std::string::npos);
}

TEST_CASE("launch: the SGLang profile gets an sglang.launch_server line in SGLang's names", "[launch]") {
  // calibration/engines/sglang.yaml: page size 1, mem_fraction_static 0.835 (H100 at TP 1), radix
  // cache on, overlap scheduling on, chunked prefill at 8192 tokens on an 80 GB card, 2048 running
  // requests.
  LaunchTarget t = target("llama-3.1-8b", "h100-sxm", 1, "auto", "fp8", "sglang");
  t.served_max_model_len = 32768;
  const auto cmds = launch_commands(t);
  REQUIRE(cmds.size() == 2);
  CHECK(cmds[0].program == "vllm serve");
  CHECK(cmds[1].line() ==
        "python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B --tp-size 1 --dtype bfloat16 "
        "--kv-cache-dtype fp8_e4m3 --context-length 32768 --max-running-requests 2048 --chunked-prefill-size 8192 "
        "--mem-fraction-static 0.835 --page-size 1");
  CHECK(cmds[1].to_json()["model_flag"] == "--model-path");
  CHECK(cmds[1].to_json()["line"] == cmds[1].line());

  // Every switch the simulation can turn: radix cache and overlap off, prefill-first (whole
  // prompts: -1), DP attention with EP over 8 GPUs (SGLang's --tp-size is the whole group).
  LaunchTarget m = target("deepseek-v3", "h200", 1, "auto", "auto", "sglang");
  m.deployment.dp = 8;
  m.deployment.expert_parallel = true;
  m.deployment.limits.enable_prefix_caching = false;
  m.deployment.engine.async_scheduling = false;
  m.policy = "prefill-first";
  const std::string line = launch_commands(m)[1].line();
  CHECK(line.find(" --tp-size 8 --dp-size 8 --enable-dp-attention --ep-size 8 ") != std::string::npos);
  CHECK(line.find(" --chunked-prefill-size -1 ") != std::string::npos);
  CHECK(line.find(" --disable-radix-cache --disable-overlap-schedule") != std::string::npos);

  const std::set<std::string> sglang = documented("sglang-launch-server-flags.yaml");
  CHECK(sglang.count("--max-num-seqs") == 0);  // vLLM's name is not SGLang's
  for (const std::string weights : {"auto", "fp8", "int4"}) {
    for (const std::string kv : {"auto", "fp8"}) {
      for (bool on : {true, false}) {
        LaunchTarget v = target("llama-3.1-70b", "h100-sxm", 4, weights, kv, "sglang");
        v.deployment.limits.enable_prefix_caching = on;
        v.deployment.engine.async_scheduling = on;
        v.pd_role = on ? "" : "decode";
        const auto c = launch_commands(v);
        REQUIRE(c.size() == 2);
        require_documented(c[1], sglang);
      }
    }
  }
}

TEST_CASE("launch: values a shell would split are quoted", "[launch]") {
  LaunchCommand c;
  c.program = "vllm serve";
  c.model = "/models/my model";
  c.flags = {{"--kv-transfer-config", "{\"kv_connector\":\"NixlConnector\"}"}};
  CHECK(c.line() == "vllm serve '/models/my model' --kv-transfer-config '{\"kv_connector\":\"NixlConnector\"}'");
}

TEST_CASE("launch: speculative decoding and LoRA print vLLM's flags as simulated", "[launch][speculative][lora]") {
  const std::set<std::string> names = documented("vllm-serve-flags.yaml");
  SECTION("EAGLE-3, k 4: --speculative-config with the method and k; the head and acceptance as notes") {
    DeploymentSpec s;
    s.model = "llama-3.1-8b";
    s.speculative_config = R"({"method": "eagle3", "num_speculative_tokens": 4})";
    LaunchTarget t;
    t.deployment = s.resolve();
    const LaunchCommand c = launch_commands(t)[0];
    require_documented(c, names);
    // Flags are printed in order; the JSON value is single-quoted for the shell.
    CHECK(c.line().find(R"( --speculative-config '{"method":"eagle3","num_speculative_tokens":4}')") != std::string::npos);
    REQUIRE(c.notes.size() == 2);
    CHECK(c.notes[0].find("add \"model\": the eagle3 head trained for meta-llama/Llama-3.1-8B") != std::string::npos);
    // Default acceptance 0.65 x 4 positions: 1 + 0.65 + 0.4225 + 0.274625 + 0.17850625 = 2.52563.
    CHECK(c.notes[1] == "speculative decoding simulated at acceptance 0.65, 0.65, 0.65, 0.65 per draft position "
                        "(2.52563 tokens per verify); vLLM logs the measured acceptance");
  }
  SECTION("a draft model is named by its Hugging Face id; DeepSeek's MTP is vLLM's deepseek_mtp") {
    DeploymentSpec s;
    s.model = "llama-3.1-70b";
    s.tp = 4;
    s.speculative_config = R"({"method": "draft_model", "model": "llama-3.2-1b", "num_speculative_tokens": 3})";
    s.spec_acceptance = "0.7";
    LaunchTarget t;
    t.deployment = s.resolve();
    CHECK(launch_commands(t)[0].line().find(
              R"(--speculative-config '{"method":"draft_model","model":"meta-llama/Llama-3.2-1B","num_speculative_tokens":3}')") !=
          std::string::npos);
    LaunchTarget m = target("deepseek-v3", "h200", 8, "fp8");
    m.deployment.speculative = parse_speculative(R"({"method": "mtp"})", std::nullopt, std::nullopt);
    CHECK(launch_commands(m)[0].line().find(R"('{"method":"deepseek_mtp","num_speculative_tokens":1}')") != std::string::npos);
  }
  SECTION("LoRA: --enable-lora with the slots, rank and host cache simulated") {
    DeploymentSpec s;
    s.model = "llama-3.1-8b";
    s.enable_lora = true;
    s.max_loras = 8;
    s.max_lora_rank = 32;
    LaunchTarget t;
    t.deployment = s.resolve();
    const LaunchCommand c = launch_commands(t)[0];
    require_documented(c, names);
    // max_cpu_loras unset: vLLM's default, max_loras.
    CHECK(c.line().find(" --enable-lora --max-loras 8 --max-lora-rank 32 --max-cpu-loras 8") != std::string::npos);
    REQUIRE(c.notes.size() == 1);
    CHECK(c.notes[0].find("--lora-modules NAME=PATH") != std::string::npos);
  }
}

TEST_CASE("launch: pipeline, data and expert parallelism print vLLM's flags, all documented", "[launch][parallelism]") {
  const std::set<std::string> vllm = documented("vllm-serve-flags.yaml");
  const std::set<std::string> trt = documented("trtllm-serve-flags.yaml");
  const auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  // Llama-3.1-405B bf16 as TP 8 x PP 2 (16 GPUs, two servers), TensorRT-LLM profile: both lines.
  DeploymentSpec s;
  s.model = "llama-3.1-405b";
  s.card = "h100-sxm";
  s.tp = 8;
  s.pp = 2;
  s.weights = "bf16";
  s.engine = "tensorrt-llm";
  LaunchTarget t;
  t.deployment = s.resolve();
  t.weights_spec = "bf16";
  t.replicas = 2;
  const auto cmds = launch_commands(t);
  REQUIRE(cmds.size() == 2);
  CHECK(has(cmds[0].line(), " --tensor-parallel-size 8 --pipeline-parallel-size 2 --dtype bfloat16 "));
  CHECK_FALSE(has(cmds[0].line(), "--data-parallel-size"));
  CHECK(has(cmds[1].line(), " --tp_size 8 --pp_size 2 "));
  require_documented(cmds[0], vllm);
  require_documented(cmds[1], trt);
  bool servers = false, gpus = false;
  for (const auto& n : cmds[0].notes) {
    servers = servers || has(n, "spans 2 servers of 8 GPUs");
    gpus = gpus || has(n, "2 replicas of this command (32 GPUs of h100-sxm)");  // 2 x 8 x 2
  }
  CHECK(servers);
  CHECK(gpus);

  // DeepSeek-V3 with DP attention over 8 H200s: --data-parallel-size 8 --enable-expert-parallel.
  DeploymentSpec e;
  e.model = "deepseek-v3";
  e.card = "h200";
  e.tp = 1;
  e.dp = 8;
  e.enable_expert_parallel = true;
  LaunchTarget u;
  u.deployment = e.resolve();
  const auto dpl = launch_commands(u);
  REQUIRE(dpl.size() == 1);
  CHECK(has(dpl[0].line(),
            " --tensor-parallel-size 1 --data-parallel-size 8 --enable-expert-parallel --dtype bfloat16 "));
  require_documented(dpl[0], vllm);
  bool dp_note = false;
  for (const auto& n : dpl[0].notes) dp_note = dp_note || has(n, "DP attention: each of the 8 ranks");
  CHECK(dp_note);
}

TEST_CASE("launch: a chat workload serves the model's instruct checkpoint where the catalogue lists one",
          "[launch]") {
  // llama-3.1-8b's hf_id is the base checkpoint (meta-llama/Llama-3.1-8B); its aliases list the
  // Instruct twin, which a chat service serves. An open-loop single-turn workload keeps the hf_id.
  ScenarioSpec chat;
  chat.deployment.model = "llama-3.1-8b";
  chat.deployment.card = "h100-sxm";
  chat.users = 50;
  CHECK(launch_commands(launch_targets(chat).front()).front().line().rfind(
            "vllm serve meta-llama/Llama-3.1-8B-Instruct --tensor-parallel-size 1 ", 0) == 0);
  ScenarioSpec turns = chat;
  turns.users.reset();
  turns.turns = "3";
  CHECK(launch_commands(launch_targets(turns).front()).front().model == "meta-llama/Llama-3.1-8B-Instruct");
  ScenarioSpec open_loop = turns;
  open_loop.turns = "1";
  CHECK(launch_commands(launch_targets(open_loop).front()).front().model == "meta-llama/Llama-3.1-8B");
  // Gemma's instruct twin is "-it"; an hf_id that is already instruct-tuned stays; a model with
  // no instruct alias (qwen2-7b) keeps its hf_id.
  chat.deployment.model = "gemma-2-9b";
  CHECK(launch_commands(launch_targets(chat).front()).front().model == "google/gemma-2-9b-it");
  chat.deployment.model = "mistral-7b";
  CHECK(launch_commands(launch_targets(chat).front()).front().model == "mistralai/Mistral-7B-Instruct-v0.3");
  chat.deployment.model = "qwen2-7b";
  CHECK(launch_commands(launch_targets(chat).front()).front().model == "Qwen/Qwen2-7B");
  // int4 weights: the note names the checkpoint the line serves.
  chat.deployment.model = "llama-3.1-8b";
  chat.deployment.weights = "int4";
  const LaunchCommand int4 = launch_commands(launch_targets(chat).front()).front();
  bool note = false;
  for (const std::string& n : int4.notes) {
    note = note || n.rfind("weights int4: serve an AWQ or GPTQ int4 checkpoint of meta-llama/Llama-3.1-8B-Instruct (", 0) == 0;
  }
  CHECK(note);
}
