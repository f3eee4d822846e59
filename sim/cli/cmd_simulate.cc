// `capsim simulate`: a discrete-event simulation of a serving cluster under a workload, with
// latency percentiles, throughput, goodput and what the engine spent its time on.
#include <cstdio>
#include <iostream>
#include <vector>

#include "sim/cli/commands.h"
#include "sim/cli/report_charts.h"
#include "sim/core/error.h"
#include "sim/flags/scenario_flags.h"
#include "sim/plan/search.h"
#include "sim/report/html.h"
#include "sim/report/json_output.h"
#include "sim/report/plot.h"

namespace capsim::cli {
namespace {

struct SimulateOptions {
  std::string scenario;
  ScenarioFlags flags;
  std::string json;
  std::string report;
  std::string plot;
  int replications = 1;
  bool quiet = false;
  bool bounded_memory = false;
};

}  // namespace

int run_scenario(const ScenarioSpec& spec, const std::string& json, bool progress,
                 const std::string& report, const std::string& plot_file, int replications) {
  // Fail before the run, not after it, when the report or chart cannot be drawn.
  if (!report.empty()) plot::require_gnuplot("--report");
  if (!plot_file.empty()) plot::check_plot_path(plot_file, "--plot");
  BuiltScenario b = build_scenario(spec);
  b.config.progress = progress;
  const SimulationResult r = simulate(b.config, *b.workload);
  // --replications N: the next seeds in parallel, each the run `--seed` would give.
  const std::vector<SimulationResult> others = plan::run_next_seeds(spec, replications - 1, plan::default_threads());
  std::vector<const SimulationResult*> runs{&r};
  for (const SimulationResult& o : others) runs.push_back(&o);
  // Built only when asked for: for a 10k-request run the JSON is ~4% of the whole process.
  nlohmann::json j = json.empty() ? nlohmann::json() : simulation_json(spec, b, r);
  if (!json.empty() && runs.size() > 1) j["capsim"]["over_seeds"] = answers::replications_json(spec, runs);
  if (json != "-") {
    print_simulation(std::cout, spec, b, r);
    if (runs.size() > 1) answers::print_replications(std::cout, spec, runs);
  }
  // Everything is drawn before anything is written: a failing chart leaves no file behind.
  std::string chart, page_html;
  if (!plot_file.empty()) {
    chart = plot::chart_bytes(latency_cdf_chart(r, spec.slos, "Latency CDF: " + spec.name), plot_file, "--plot");
  }
  if (!report.empty()) {
    // The title names the model, each group's cards and replicas, and the scenario.
    std::string fleet;
    for (const ReplicaGroup& g : b.config.groups) {
      fleet += (fleet.empty() ? "" : " + ") + std::to_string(g.replicas) + " x " + g.deployment.card.name +
               (g.deployment.tp > 1 ? " tp" + std::to_string(g.deployment.tp) : "");
    }
    HtmlReport page("capsim simulate: " + b.config.groups.front().deployment.model.name + " on " + fleet + " (" +
                        spec.name + ")",
                    "--report");
    if (!spec.description.empty()) page.paragraph(spec.description);
    if (runs.size() > 1) {
      // The verdicts to act on come first: the sections below are one seed's run.
      const answers::ReplicationsTable over = answers::replications_table(spec, runs);
      page.heading("SLOs over " + std::to_string(runs.size()) + " seeds", 2);
      page.paragraph(over.caption + ".");
      std::vector<std::string> cls;
      for (plan::Decision d : over.decisions) {
        cls.push_back(d == plan::Decision::kPass ? "pass" : d == plan::Decision::kFail ? "fail" : "");
      }
      page.table(over.table.header(), over.table.rows(), cls);
      for (const std::string& w : over.why) page.paragraph(w);
      page.heading("Seed " + std::to_string(spec.seed) + " alone", 2);
    }
    add_simulation_section(page, spec, b, r);
    page_html = page.render();
  }
  OutputSet outputs;
  outputs.add_json(json, j);
  outputs.add("--plot", plot_file, std::move(chart));
  outputs.add("--report", report, std::move(page_html));
  outputs.commit();
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
      "      --think-time exponential:20s --duration 30min --warmup 5min --slo 'ttft_p95<=1s'\n"
      "  capsim simulate --trace conversation_trace.jsonl --model llama-3.1-8b --card h100-sxm --json out.json\n"
      "  capsim simulate workloads/chat-8b-1x-h100.yaml --report chat.html --plot latency.svg\n"
      "  capsim simulate workloads/chatbot-500-users.yaml --replications 4   # SLOs decided over seeds 1-4\n"
      "  capsim simulate --trace AzureLLMInferenceTrace_conv_1week.csv --model llama-3.1-8b --card h100-sxm --bounded-memory   # millions of requests\n"
      "  capsim simulate --model llama-3.1-8b --prefill-pool '1x h100-sxm' --decode-pool '1x h100-sxm' \\\n"
      "      --kv-link ib-ndr-400 --rate 3 --input-tokens 8000 --output-tokens 300 --duration 3min\n"
      "flags override the scenario file's fields; results are identical for the same inputs and --seed");
  cmd->add_option("scenario", o->scenario, "scenario YAML file (workloads/*.yaml)");
  o->flags.add_to(*cmd);
  cmd->add_option("--json", o->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->add_option("--report", o->report, "also write a self-contained HTML report (tables, charts by gnuplot) to FILE.html");
  cmd->add_option("--plot", o->plot, "also draw the latency CDF chart to FILE.svg or FILE.png (gnuplot)");
  cmd->add_option("--replications", o->replications,
                  "also run seeds seed+1 .. seed+N-1 (in parallel) and decide each SLO over the N seeds' steady-state "
                  "estimates (a t interval over the seeds: use it when one run's batch-means interval is in doubt); "
                  "the report, --report and --plot show the scenario's own seed (default 1)")
      ->check(CLI::Range(1, 32));
  cmd->add_flag("--quiet,-q", o->quiet, "no progress line on stderr");
  // simulate only: plan, capacity and compare decide SLOs, which must not rest on approximate
  // percentiles.
  cmd->add_flag("--bounded-memory", o->bounded_memory,
                "memory flat in the run's length apart from the per-request records: ITL, step-time and batch-size "
                "distributions kept as histograms, their percentiles within 0.1% (counts, min, max, mean and every "
                "per-request latency stay exact); for traces of millions of requests");
  cmd->callback([o, &exit_code] {
    ScenarioSpec spec = o->flags.resolve(o->scenario);
    spec.bounded_memory = o->bounded_memory;
    exit_code = run_scenario(spec, o->json, !o->quiet, o->report, o->plot, o->replications);
  });
}

}  // namespace capsim::cli
