// `capsim fit`: does a model fit on a card, where does the memory go, how much KV cache is left,
// and — when it does not fit — by how much and what would.
#include <algorithm>
#include <iostream>
#include <optional>

#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/llm/memory_plan.h"
#include "sim/report/json_output.h"
#include "sim/report/table.h"
#include "sim/answers/fit_answer.h"

namespace capsim::cli {
namespace {

struct FitOptions {
  DeploymentSpec deployment;
  std::optional<long long> context;  // default: --max-model-len when set, else 4096
  std::string json;
};

double gib(double b) { return b / 1073741824.0; }

int run_fit(const FitOptions& o) {
  const answers::FitAnswer a = answers::answer_fit(o.deployment, o.context);
  const Deployment& d = a.deployment;
  const long long context = a.context;
  const MemoryPlan& p = a.plan;
  const ModelSpec& m = d.model;
  const nlohmann::json& j = a.json;
  const auto& alts = a.alternatives;

  if (o.json != "-") {
    const std::string layout =
        !d.beyond_tp() ? "TP " + std::to_string(d.tp)
                       : "TP " + std::to_string(d.tp) + " x PP " + std::to_string(d.pp) + " x DP " +
                             std::to_string(d.dp) +
                             (d.expert_parallel ? ", experts over " + std::to_string(d.tp * d.dp) + " GPUs" : "");
    std::cout << "capsim fit: " << m.name << " on " << d.gpus() << " x " << d.card.name << " ("
              << layout << "), weights " << d.weights_label() << ", KV cache "
              << precision_name(d.kv_cache) << ", engine " << d.engine.name << "\n\n";
    std::cout << "  model: " << fmt("%.2f", m.total_params() / 1e9) << "B parameters";
    if (m.is_moe()) std::cout << " (" << fmt("%.2f", m.active_params() / 1e9) << "B active per token)";
    std::cout << "; weights " << units::format_bytes(d.weight_bytes()) << " ("
              << units::format_bytes_gib(d.weight_bytes()) << ") in " << precision_name(d.weights)
              << (d.expert_weights ? std::string(", routed experts in ") +
                                         std::string(precision_name(*d.expert_weights))
                                   : std::string())
              << "; KV cache "
              << fmt("%.1f", m.kv_bytes_per_token(d.kv_cache) / 1024) << " KiB per token\n";
    if (!m.checkpoint_quant.empty()) {
      // What the upstream checkpoint ships; `--weights auto` (the default) runs it as shipped.
      std::cout << "  checkpoint as shipped: " << m.checkpoint_quant << " (quantization_config), "
                << units::format_bytes(m.checkpoint_weight_bytes()) << " ("
                << units::format_bytes_gib(m.checkpoint_weight_bytes()) << "); "
                << ((m.checkpoint_quant == "mxfp4" && d.expert_weights == Precision::kMxfp4) ||
                            (m.checkpoint_quant == "fp8" && d.weights == Precision::kFp8)
                        ? std::string("the plan below runs it as shipped (--weights auto)")
                        : "the plan below re-quantises it to --weights " +
                              std::string(precision_name(d.weights)))
                << "\n";
    }
    std::cout << "\n";
    TextTable t({"per GPU", "GiB", "GB", "note"});
    t.row({"visible memory", fmt("%.2f", gib(p.visible)), fmt("%.2f", p.visible / 1e9),
           "what the driver reports"});
    t.row({"budget", fmt("%.2f", gib(p.budget)), fmt("%.2f", p.budget / 1e9),
           "gpu_memory_utilization " + fmt("%.2f", d.limits.gpu_memory_utilization) + " x visible"});
    t.row({"- weights", fmt("%.2f", gib(p.weights)), fmt("%.2f", p.weights / 1e9),
           d.weights_label() + (d.beyond_tp() ? ", per GPU of the stage with the least KV room"
                                : d.tp > 1 ? ", 1/" + std::to_string(d.tp) + " per GPU" : "")});
    t.row({"- activations", fmt("%.2f", gib(p.activations)), fmt("%.2f", p.activations / 1e9),
           "peak at max_num_batched_tokens " + std::to_string(d.limits.max_num_batched_tokens)});
    t.row({"- runtime", fmt("%.2f", gib(p.runtime)), fmt("%.2f", p.runtime / 1e9),
           "NCCL, cuBLAS, allocator (" + d.engine.name + ")"});
    t.row({"= KV cache", fmt("%.2f", gib(p.kv_cache)), fmt("%.2f", p.kv_cache / 1e9),
           p.kv_cache > 0 ? "what remains" : "nothing remains"});
    t.row({"outside budget", fmt("%.2f", gib(p.outside_budget)), fmt("%.2f", p.outside_budget / 1e9),
           "CUDA context and graphs, in the headroom"});
    t.print(std::cout);
    std::cout << "\n";
    if (p.fits) {
      if (p.layout.hybrid()) {
        // Sliding-window layers: blocks are per layer group, so tokens are an effective figure.
        std::cout << "  fits. KV cache: " << p.kv_blocks << " blocks of " << d.limits.block_size
                  << " tokens x " << p.layout.layers_per_group << " layers ("
                  << m.full_attention_layers() << " full-attention layers, "
                  << m.sliding_layers << " with a " << m.sliding_window
                  << "-token window) = " << p.kv_tokens
                  << " tokens per group; the longest sequence it holds: " << p.kv_longest_sequence
                  << " tokens\n";
      } else {
        std::cout << "  fits. KV cache: " << p.kv_blocks << " blocks of " << d.limits.block_size
                  << " tokens = " << p.kv_tokens << " tokens ("
                  << fmt("%.1f", p.kv_bytes_per_token_per_gpu / 1024) << " KiB per token per GPU)\n";
      }
      if (p.cpu_kv_blocks > 0) {
        std::cout << "  CPU KV tier (--kv-offloading-size " << fmt("%g", d.limits.kv_offloading_size)
                  << " GiB over " << d.tp * d.pp << " GPU(s) x " << fmt("%.0f", p.kv_block_bytes)
                  << " B per block): " << p.cpu_kv_blocks << " blocks = "
                  << p.cpu_kv_blocks * d.limits.block_size << " tokens\n";
      }
      std::cout << "  concurrent sequences of " << context << " tokens: "
                << p.max_sequences_at_context << " (KV-limited; max_num_seqs "
                << d.limits.max_num_seqs << ")\n";
      if (d.limits.max_model_len == 0 && m.max_context > p.kv_longest_sequence) {
        std::cout << "  note: the model's context (" << m.max_context
                  << " tokens) exceeds the KV cache; vLLM needs --max-model-len <= "
                  << p.kv_longest_sequence
                  << "\n";
      }
      if (p.outside_budget > p.visible - p.budget) {
        std::cout << "  warning: context and CUDA graphs (" << units::format_bytes_gib(p.outside_budget)
                  << ") exceed the headroom (" << units::format_bytes_gib(p.visible - p.budget)
                  << "); lower --gpu-memory-utilization\n";
      }
    } else {
      std::cout << "  does not fit: " << p.reason << ".\n  short by "
                << units::format_bytes_gib(p.shortfall) << " per GPU ("
                << units::format_bytes(p.shortfall) << ").\n";
      if (alts.empty()) {
        std::cout << "  nothing in reach fits: no smaller precision, TP up to 8, or catalogue card\n";
      } else {
        std::cout << "  what would fit:\n";
        for (const auto& [label, ap] : alts) {
          std::cout << "    " << label << ": " << ap.kv_tokens << " KV tokens, "
                    << ap.max_sequences_at_context << " sequences of " << context << " tokens\n";
        }
      }
    }
  }
  if (!o.json.empty()) write_json(o.json, j);
  return p.fits ? 0 : 1;
}

}  // namespace

void add_fit_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<FitOptions>();
  CLI::App* cmd = app.add_subcommand(
      "fit", "does a model fit on a card: memory breakdown, KV capacity, what would fit");
  cmd->footer(
      "examples:\n"
      "  capsim fit --model llama-3.1-8b --card h100-sxm\n"
      "  capsim fit --model llama-3.1-70b --card rtx-4090          # does not fit: says what would\n"
      "  capsim fit --model mixtral-8x7b --card a100-80gb-sxm --tp 2 --kv-cache fp8 --context 8192\n"
      "exit status: 0 fits, 1 does not fit, 2 bad input");
  add_deployment_flags(*cmd, opts->deployment);
  cmd->add_option("--context", opts->context,
                  "sequence length (prompt + output) for the concurrency figure (default: "
                  "--max-model-len when given, else 4096)")
      ->check(CLI::Range(1LL, 100'000'000LL));
  cmd->add_option("--json", opts->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->callback([opts, &exit_code] { exit_code = run_fit(*opts); });
}

}  // namespace capsim::cli
