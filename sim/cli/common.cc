#include "sim/cli/common.h"

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/run_limits.h"
#include "sim/flags/engine_flags.h"
#include "sim/report/json_output.h"

namespace capsim::cli {

void add_deployment_flags(CLI::App& app, DeploymentSpec& d, bool with_limits) {
  app.add_option("--model,-m", d.model,
                 "model: catalogue name (capsim list models), Hugging Face id, or config.json path")
      ->capture_default_str();
  app.add_option("--card,-c", d.card, "card type (capsim list cards) or a card .yaml path")
      ->capture_default_str();
  app.add_option("--tp,--tensor-parallel-size", d.tp, "tensor-parallel GPUs per replica")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--pp,--pipeline-parallel-size", d.pp,
                 "pipeline stages of --tp GPUs each (layers split as vLLM splits them)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  app.add_option("--dp,--data-parallel-size", d.dp,
                 "data-parallel ranks of one engine; with --enable-expert-parallel, DP attention")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_flag("--enable-expert-parallel", d.enable_expert_parallel,
               "MoE: whole experts over the TP x DP GPUs instead of TP slices of every expert");
  app.add_option("--expert-imbalance", d.expert_imbalance,
                 "expert-parallel load imbalance, busiest GPU over the mean (default 1.3)")
      ->check(CLI::Range(1.0, 64.0));
  app.add_option("--weights,--dtype", d.weights,
                 "weight precision: auto (the checkpoint as shipped: its quantization_config, e.g. "
                 "gpt-oss's mxfp4 experts or DeepSeek-V3's fp8; else bf16, or fp16 where the card "
                 "lacks bf16), fp32, bf16, fp16, fp8, int8, int4, nvfp4, mxfp4")
      ->capture_default_str();
  app.add_option("--kv-cache,--kv-cache-dtype", d.kv_cache,
                 "KV-cache precision: auto (the 16-bit type of the card), bf16, fp16, fp8")
      ->capture_default_str();
  app.add_option("--engine", d.engine, "serving engine profile (capsim list engines), or a path to an engine .yaml")
      ->capture_default_str();
  if (!with_limits) return;
  // The engine options that size memory, from their table (sim/scenario/engine_options.h).
  flags::add_engine_flags(app, flags::EngineFlagSet::kSchedulerLimits, d, nullptr);
}

void refuse_non_finite(CLI::App& app) {
  const CLI::Validator finite(
      [](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (end != text.c_str() && !std::isfinite(v)) {
          return "'" + text + "' is not a finite number";
        }
        return "";
      },
      "");
  for (CLI::Option* o : app.get_options()) {
    if (o->get_type_name().find("FLOAT") != std::string::npos) o->check(finite);
  }
  for (CLI::App* sub : app.get_subcommands({})) refuse_non_finite(*sub);
}

void add_allow_large(CLI::App& app) {
  app.add_flag_callback("--allow-large", [] { lift_run_limits(); },
                        "run even beyond the limits on requests (2e6), users (1e6), replicas "
                        "(1000) and cards (8192) one run may ask for")
      ->trigger_on_parse();
  for (CLI::App* sub : app.get_subcommands({})) add_allow_large(*sub);
}

namespace {

// The flags that name a file a command writes: one list for every command, so that a new
// command's --json is checked as the others' are.
constexpr const char* kOutputFlags[] = {"json", "csv", "report", "plot", "junit", "out"};

void collect_outputs(const CLI::App& cmd, std::vector<OutputRequest>& outputs) {
  for (const CLI::Option* opt : cmd.get_options()) {
    if (opt->count() == 0) continue;
    for (const char* name : kOutputFlags) {
      if (opt->check_lname(name)) outputs.push_back({std::string("--") + name, opt->as<std::string>()});
    }
  }
  for (const CLI::App* sub : cmd.get_subcommands()) collect_outputs(*sub, outputs);  // the parsed ones
}

}  // namespace

void add_output_checks(CLI::App& app) {
  // The root's parse-complete callback runs after every option is parsed and validated and
  // before the subcommands' callbacks, which do the commands' work inside parse().
  app.parse_complete_callback([&app] {
    std::vector<OutputRequest> outputs;
    collect_outputs(app, outputs);
    check_outputs(outputs);
  });
}

int report_error(const std::exception& e) {
  std::cerr << "capsim: error: " << e.what() << "\n";
  return 2;
}

}  // namespace capsim::cli
