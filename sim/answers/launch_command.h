// The config to launch: the command line that starts, on real hardware, the engine a simulation
// assumed — `vllm serve` with the flags capsim simulated (docs/deployment-options.md#the-config-to-launch),
// and the engine profile's own server where capsim knows its flags (TensorRT-LLM's trtllm-serve,
// SGLang's launch_server).
//
// Contract: every flag printed is a flag of the named program, spelled as its documentation spells
// it; tests/scenario/launch_command_test.cc checks each name against the cited lists in
// calibration/launch/. A value the simulation assumed but the program has no flag for (a
// checkpoint to use, replicas behind a router, a scheduler vLLM does not have) becomes a note,
// never a guessed flag.
//
// Extending: a new mechanism (speculative decoding, LoRA, pipeline/expert parallelism, a P/D
// role) adds its fields to LaunchTarget and one block to vllm_serve_flags() (and
// trtllm_serve_flags() where TensorRT-LLM has it), then lists its flags in
// calibration/launch/*.yaml with their citation.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/llm/deployment.h"
#include "sim/scenario/scenario.h"

namespace capsim::answers {

struct LaunchFlag {
  std::string name;   // "--max-num-seqs", as the program spells it
  std::string value;  // empty for a switch ("--enable-prefix-caching")
};

struct LaunchCommand {
  std::string program;  // "vllm serve", "trtllm-serve"
  std::string model;    // the Hugging Face id (or the config path for a local model): positional,
  std::string model_flag;  // or after this flag ("--model-path" for SGLang's launch_server)
  std::vector<LaunchFlag> flags;
  // What the line cannot carry: replicas behind a router, a checkpoint to download, a config
  // file's content. Printed under the line.
  std::vector<std::string> notes;

  // One shell line: program, model, flags in order; values with characters a POSIX shell reads
  // specially are single-quoted.
  std::string line() const;
  // {"program", "model", "flags": [{"name", "value"}], "line", "notes"}.
  nlohmann::json to_json() const;
};

// What the simulation ran: one deployment (resolved: card, TP, precisions, engine profile and
// scheduler limits), how many replicas of it behind which router, with which scheduler policy.
struct LaunchTarget {
  Deployment deployment;
  // How the precisions were asked for: "auto" runs the checkpoint as shipped (no --quantization).
  std::string weights_spec = "auto";
  int replicas = 1;
  std::string router = "least-outstanding";
  std::string policy = "vllm-v1";
  // The context the simulated replica served (MemoryPlan::max_model_len): printed as
  // --max-model-len so that vLLM starts with the same limit even where --max-model-len was not
  // given (vLLM refuses to start when the model's full context does not fit the KV cache).
  // 0 = limits.max_model_len (or nothing when that is unset).
  long long served_max_model_len = 0;
  // "prefill" or "decode" for a pool of a disaggregated deployment (serving pd-disaggregated),
  // empty otherwise: the pool's engines get vLLM's NixlConnector.
  std::string pd_role;
  // A chat workload (closed-loop users, several turns or a system prompt): the line names the
  // model's instruct/chat checkpoint where the catalogue lists one among its aliases
  // (meta-llama/Llama-3.1-8B-Instruct for llama-3.1-8b, whose hf_id is the base checkpoint);
  // the twins have the same shapes, so the simulation holds for either.
  bool chat = false;
};

// The ordered flags of `vllm serve` for the target, with notes appended to `notes`.
std::vector<LaunchFlag> vllm_serve_flags(const LaunchTarget& t, std::vector<std::string>& notes);
// The ordered flags of SGLang's `python3 -m sglang.launch_server` for the target (the sglang
// engine profile), in SGLang's names; what it has no flag for capsim knows becomes a note.
std::vector<LaunchFlag> sglang_launch_flags(const LaunchTarget& t, std::vector<std::string>& notes);
// The ordered flags of `trtllm-serve` (TensorRT-LLM) for the target; KV-cache settings that
// trtllm-serve only takes from its --extra_llm_api_options YAML are written as a note.
std::vector<LaunchFlag> trtllm_serve_flags(const LaunchTarget& t, std::vector<std::string>& notes);

// The commands for the target: `vllm serve` first, then the engine profile's own server when the
// profile is TensorRT-LLM's (trtllm-serve) or SGLang's (sglang.launch_server). A model without a
// Hugging Face id (a config.json given by path) is named by its directory, which every server
// accepts for a local checkpoint.
std::vector<LaunchCommand> launch_commands(const LaunchTarget& t);

// The targets a scenario ran: one per deployment group (the main one, then each extra group),
// with the spec's replicas, router and scheduler, and the context each group's replicas served
// (the memory plan the simulation makes for them). Throws capsim::Error for an unknown name, as
// build_scenario does.
std::vector<LaunchTarget> launch_targets(const scenario::ScenarioSpec& spec);

// Convenience for front ends: the commands as JSON (an array of LaunchCommand::to_json()) and as
// indented text lines ("    vllm serve ...", "      # note").
nlohmann::json launch_json(const std::vector<LaunchCommand>& commands);
std::string launch_text(const std::vector<LaunchCommand>& commands, const std::string& indent);

}  // namespace capsim::answers
