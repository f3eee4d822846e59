// `capsim simulate`: a discrete-event simulation of a serving cluster under a workload, with
// latency percentiles, throughput, goodput and what the engine spent its time on.
#include <cstdio>
#include <iostream>

#include "sim/cli/commands.h"
#include "sim/cli/scenario.h"
#include "sim/cli/simulate_report.h"
#include "sim/core/error.h"
#include "sim/report/json_output.h"

namespace capsim::cli {
namespace {

struct SimulateOptions {
  std::string scenario;
  ScenarioFlags flags;
  std::string json;
  bool quiet = false;
};

}  // namespace

int run_scenario(const ScenarioSpec& spec, const std::string& json, bool progress) {
  BuiltScenario b = build_scenario(spec);
  b.config.progress = progress;
  const SimulationResult r = simulate(b.config, *b.workload);
  const nlohmann::json j = simulation_json(spec, b, r);
  if (json != "-") print_simulation(std::cout, spec, b, r);
  if (!json.empty()) write_json(json, j);
  return 0;
}

void add_simulate_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand(
      "simulate", "simulate a serving cluster under load: TTFT/TPOT/ITL/E2E, throughput, goodput");
  cmd->footer(
      "examples:\n"
      "  capsim simulate workloads/chatbot-500-users.yaml\n"
      "  capsim simulate --model llama-3.1-8b --card h100-sxm --rate 10 --requests 2000 \\\n"
      "      --input-tokens lognormal:600:4000 --output-tokens lognormal:200:800\n"
      "  capsim simulate --model mistral-7b --card rtx-4090 --replicas 4 --users 500 \\\n"
      "      --think-time exponential:20s --duration 30min --warmup 5min --slo ttft_p95<=1s\n"
      "  capsim simulate --trace conversation_trace.jsonl --model llama-3.1-8b --card h100-sxm --json out.json\n"
      "flags override the scenario file's fields; results are identical for the same inputs and --seed");
  cmd->add_option("scenario", o->scenario, "scenario YAML file (workloads/*.yaml)");
  o->flags.add_to(*cmd);
  cmd->add_option("--json", o->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->add_flag("--quiet,-q", o->quiet, "no progress line on stderr");
  cmd->callback([o, &exit_code] {
    exit_code = run_scenario(o->flags.resolve(o->scenario), o->json, !o->quiet);
  });
}

}  // namespace capsim::cli
