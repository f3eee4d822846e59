// `capsim roofline`: one engine step's time, operator group by operator group, with its bound.
#include <iostream>

#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/cost/registry.h"
#include "sim/cost/roofline_cost.h"
#include "sim/report/json_output.h"
#include "sim/report/table.h"

namespace capsim::cli {
namespace {

struct RooflineOptions {
  DeploymentSpec deployment;
  long long batch = 1;
  long long context = 1024;
  long long prefill = 0;
  long long prefill_cached = 0;
  std::string json;
};

int run_roofline(const RooflineOptions& o) {
  const Deployment d = o.deployment.resolve();
  if (d.model.encoder_only) {
    throw Error("--model: " + d.model.name + " is encoder-only; roofline models decoder steps");
  }
  BatchShape b;
  for (long long i = 0; i < o.batch; ++i) b.add_decode(o.context);
  if (o.prefill > 0) b.add_prefill_chunk(o.prefill_cached, o.prefill, true);
  const RooflineCost cost(d);  // its achieved rates are every model's
  const StepBreakdown s = d.beyond_tp() ? make_step_cost(d)->breakdown(b) : cost.breakdown(b);

  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : s.groups) {
    groups.push_back({{"group", g.group}, {"flops", g.flops}, {"bytes", g.bytes},
                      {"compute_s", g.compute_s}, {"memory_s", g.memory_s},
                      {"seconds", g.seconds}, {"bound", bound_name(g.bound)},
                      {"source", g.measured ? "measured" : "roofline"}});
  }
  const double tokens_per_s = static_cast<double>(o.batch) / s.seconds;
  nlohmann::json j = {
      {"model", d.model.name}, {"card", d.card.name}, {"tp", d.tp},
      {"weights", precision_name(d.weights)}, {"kv_cache", precision_name(d.kv_cache)},
      {"compute_precision", precision_name(d.compute_precision())}, {"engine", d.engine.name},
      {"batch", o.batch}, {"context", o.context}, {"prefill_tokens", o.prefill},
      {"step_seconds", s.seconds}, {"flops_per_gpu", s.flops}, {"bytes_per_gpu", s.bytes},
      {"compute_seconds", s.compute_s}, {"memory_seconds", s.memory_s},
      {"communication_seconds", s.communication_s}, {"overhead_seconds", s.overhead_s},
      {"mfu", s.mfu}, {"mbu", s.mbu}, {"decode_tokens_per_s", tokens_per_s},
      {"achieved_flops_per_s", cost.gemm_flops_per_s()},
      {"achieved_bytes_per_s", cost.bytes_per_s()}, {"gemm_source", cost.gemm_source()},
      {"moe_source", cost.moe_source()}, {"allreduce_source", cost.allreduce_source()},
      {"attention_source", cost.attention_source()}, {"groups", groups}};
  if (d.beyond_tp()) {
    j["pp"] = d.pp;
    j["dp"] = d.dp;
    j["expert_parallel"] = d.expert_parallel;
    j["cost_model"] = step_cost_model_name(d);
  }
  if (o.json != "-") {
    std::cout << "capsim roofline: " << d.model.name << " on " << d.tp << " x " << d.card.name
              << (d.pp > 1 ? " x " + std::to_string(d.pp) + " pipeline stages" : std::string())
              << (d.expert_parallel ? ", expert parallel over " + std::to_string(d.tp * d.dp) +
                                          " GPUs (DP " + std::to_string(d.dp) + ")"
                                    : std::string())
              << ", weights " << precision_name(d.weights) << " (math "
              << precision_name(d.compute_precision()) << "), KV " << precision_name(d.kv_cache)
              << ", engine " << d.engine.name << "\n";
    std::cout << "  step: " << o.batch << " decode sequences of " << o.context << " tokens";
    if (o.prefill > 0) std::cout << " + a prefill chunk of " << o.prefill << " tokens";
    std::cout << "\n  achieved rates per GPU: " << units::format_rate(cost.gemm_flops_per_s(), "FLOP/s")
              << " (GEMM), " << units::format_rate(cost.bytes_per_s(), "B/s") << " (memory)\n"
              << "  linear layers: " << cost.gemm_source() << "\n"
              << "  attention: " << cost.attention_source() << "\n";
    if (!cost.moe_source().empty()) std::cout << "  MoE layers: " << cost.moe_source() << "\n";
    if (!cost.allreduce_source().empty()) std::cout << "  all-reduce: " << cost.allreduce_source() << "\n";
    std::cout << "\n";
    TextTable t({"group", "GFLOP/GPU", "MB/GPU", "compute", "memory", "time", "share", "bound"});
    for (const auto& g : s.groups) {
      t.row({g.group, fmt("%.2f", g.flops / 1e9), fmt("%.1f", g.bytes / 1e6),
             units::format_time(g.compute_s), units::format_time(g.memory_s),
             units::format_time(g.seconds), fmt("%.1f%%", 100 * g.seconds / s.seconds),
             g.measured ? std::string("measured") : std::string(bound_name(g.bound))});
    }
    t.rule();
    t.row({"step", fmt("%.2f", s.flops / 1e9), fmt("%.1f", s.bytes / 1e6), "", "",
           units::format_time(s.seconds), "100%", ""});
    t.print(std::cout);
    std::cout << "\n  MFU " << fmt("%.1f%%", 100 * s.mfu) << ", MBU " << fmt("%.1f%%", 100 * s.mbu)
              << "; decode throughput " << fmt("%.0f", tokens_per_s) << " tokens/s ("
              << units::format_time(s.seconds) << " per output token per sequence)\n";
    std::cout << "  time by bound: compute " << units::format_time(s.compute_s) << ", memory "
              << units::format_time(s.memory_s) << ", communication "
              << units::format_time(s.communication_s) << ", overhead "
              << units::format_time(s.overhead_s) << "\n";
  }
  if (!o.json.empty()) write_json(o.json, j);
  return 0;
}

}  // namespace

void add_roofline_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<RooflineOptions>();
  CLI::App* cmd = app.add_subcommand(
      "roofline", "one engine step's time by operator group, with bound, MFU and MBU");
  cmd->footer(
      "examples:\n"
      "  capsim roofline --model llama-3.1-8b --card h100-sxm --batch 1 --context 1024\n"
      "  capsim roofline --model llama-3.1-70b --card h100-sxm --tp 4 --batch 64 --context 2048\n"
      "  capsim roofline --model mistral-7b --card rtx-4090 --batch 8 --context 512 --prefill 2048\n"
      "  capsim roofline --model llama-3.1-405b --card h100-sxm --tp 8 --pp 2 --batch 64 --context 2048\n"
      "  capsim roofline --model deepseek-v3 --card h200 --dp 8 --enable-expert-parallel --batch 64");
  add_deployment_flags(*cmd, opts->deployment, false);
  cmd->add_option("--batch,-b", opts->batch, "decode sequences in the step")
      ->capture_default_str()->check(CLI::Range(0LL, 1'000'000LL));
  cmd->add_option("--context,-l", opts->context, "context length of each decode sequence (tokens)")
      ->capture_default_str()->check(CLI::Range(1LL, 100'000'000LL));
  cmd->add_option("--prefill,-p", opts->prefill, "tokens of one prefill chunk in the same step")
      ->capture_default_str()->check(CLI::Range(0LL, 100'000'000LL));
  cmd->add_option("--prefill-cached", opts->prefill_cached,
                  "tokens already cached before that chunk (prefix hits, earlier chunks)")
      ->capture_default_str()->check(CLI::Range(0LL, 100'000'000LL));
  cmd->add_option("--json", opts->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->callback([opts, &exit_code] {
    if (opts->batch == 0 && opts->prefill == 0) {
      throw Error("--batch, --prefill: the step is empty; give --batch >= 1 or --prefill >= 1");
    }
    exit_code = run_roofline(*opts);
  });
}

}  // namespace capsim::cli
