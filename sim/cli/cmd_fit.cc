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

namespace capsim::cli {
namespace {

struct FitOptions {
  DeploymentFlags deployment;
  std::optional<long long> context;  // default: --max-model-len when set, else 4096
  std::string json;
};

double gib(double b) { return b / 1073741824.0; }

nlohmann::json plan_json(const Deployment& d, const MemoryPlan& p) {
  const ModelSpec& m = d.model;
  return {
      {"model", m.name},
      {"card", d.card.name},
      {"tp", d.tp},
      {"weights", precision_name(d.weights)},
      {"kv_cache", precision_name(d.kv_cache)},
      {"engine", d.engine.name},
      {"gpu_memory_utilization", d.limits.gpu_memory_utilization},
      {"max_num_batched_tokens", d.limits.max_num_batched_tokens},
      {"max_num_seqs", d.limits.max_num_seqs},
      {"block_size", d.limits.block_size},
      {"total_params", m.total_params()},
      {"active_params", m.active_params()},
      {"weight_bytes_total", m.weight_bytes(d.weights)},
      {"kv_bytes_per_token_total", m.kv_bytes_per_token(d.kv_cache)},
      {"per_gpu",
       {{"visible_bytes", p.visible},
        {"budget_bytes", p.budget},
        {"weights_bytes", p.weights},
        {"activations_bytes", p.activations},
        {"runtime_bytes", p.runtime},
        {"kv_cache_bytes", p.kv_cache},
        {"outside_budget_bytes", p.outside_budget},
        {"kv_bytes_per_token", p.kv_bytes_per_token_per_gpu}}},
      {"kv_blocks", p.kv_blocks},
      {"kv_tokens", p.kv_tokens},
      {"kv_block_bytes", p.kv_block_bytes},
      {"kv_longest_sequence_tokens", p.kv_longest_sequence},
      {"checkpoint_quantization", d.model.checkpoint_quant},
      {"checkpoint_weight_bytes", d.model.checkpoint_weight_bytes()},
      {"kv_layers_per_block", p.layout.layers_per_group},
      {"sliding_window", d.model.sliding_window},
      {"sliding_layers", d.model.sliding_layers},
      {"max_model_len", p.max_model_len},
      {"context", p.context},
      {"max_sequences_at_context", p.max_sequences_at_context},
      {"fits", p.fits},
      {"shortfall_bytes_per_gpu", p.shortfall},
      {"reason", p.reason},
  };
}

// Alternatives worth trying when a deployment does not fit, each re-planned: on the same card
// the least change first (KV precision, then weights, then more GPUs), then bigger cards at the
// same precision, smallest memory first.
std::vector<std::pair<std::string, MemoryPlan>> alternatives(const Deployment& base,
                                                             long long context) {
  std::vector<std::pair<std::string, MemoryPlan>> out;
  const auto fits = [&](Deployment d, MemoryPlan& plan) {
    try {
      d.validate();
    } catch (const Error&) {
      return false;
    }
    plan = plan_memory(d, context);
    return plan.fits;
  };
  std::vector<Precision> weight_options = {base.weights};
  for (Precision w : {Precision::kFp8, Precision::kInt4}) {
    if (element_bytes(w) < element_bytes(base.weights)) weight_options.push_back(w);
  }
  std::vector<Precision> kv_options = {base.kv_cache};
  if (base.kv_cache != Precision::kFp8 && !base.model.encoder_only) kv_options.push_back(Precision::kFp8);
  std::vector<int> tps = {base.tp};
  for (int t : {2, 4, 8}) {
    if (t > base.tp) tps.push_back(t);
  }
  for (int tp : tps) {
    bool found = false;
    for (Precision w : weight_options) {
      for (Precision kv : kv_options) {
        if (found || (tp == base.tp && w == base.weights && kv == base.kv_cache)) continue;
        Deployment d = base;
        d.tp = tp;
        d.weights = w;
        d.kv_cache = kv;
        MemoryPlan plan;
        if (!fits(d, plan)) continue;
        std::string label;
        if (w != base.weights) label += "--weights " + std::string(precision_name(w)) + " ";
        if (kv != base.kv_cache) label += "--kv-cache " + std::string(precision_name(kv)) + " ";
        if (tp != base.tp) {
          label += "--tp " + std::to_string(tp) + " (" + base.card.tp_link(tp).name() + ") ";
        }
        label.pop_back();
        out.emplace_back(label, plan);
        found = true;
      }
    }
  }
  std::vector<const Card*> others;
  for (const Card& c : cards().cards()) {
    if (c.name != base.card.name && !c.is_cpu) others.push_back(&c);
  }
  std::stable_sort(others.begin(), others.end(), [](const Card* a, const Card* b) {
    return a->visible_memory_bytes < b->visible_memory_bytes;
  });
  int bigger = 0;
  for (const Card* c : others) {
    if (bigger >= 3) break;
    Deployment d = base;
    d.card = *c;
    d.limits = default_limits(*c, base.engine);
    d.limits.block_size = base.limits.block_size;
    d.limits.max_model_len = base.limits.max_model_len;
    MemoryPlan plan;
    if (fits(d, plan)) {
      out.emplace_back("--card " + c->name, plan);
      ++bigger;
    }
  }
  return out;
}

int run_fit(const FitOptions& o) {
  const Deployment d = o.deployment.resolve();
  const long long context =
      o.context ? *o.context : (d.limits.max_model_len > 0 ? d.limits.max_model_len : 4096);
  const MemoryPlan p = plan_memory(d, context);
  const ModelSpec& m = d.model;
  nlohmann::json j = plan_json(d, p);
  const auto alts = p.fits ? decltype(alternatives(d, context)){} : alternatives(d, context);
  nlohmann::json alt_json = nlohmann::json::array();
  for (const auto& [label, ap] : alts) {
    alt_json.push_back({{"change", label}, {"kv_tokens", ap.kv_tokens},
                        {"max_sequences_at_context", ap.max_sequences_at_context}});
  }
  j["alternatives"] = alt_json;

  if (o.json != "-") {
    std::cout << "capsim fit: " << m.name << " on " << d.tp << " x " << d.card.name << " (TP "
              << d.tp << "), weights " << precision_name(d.weights) << ", KV cache "
              << precision_name(d.kv_cache) << ", engine " << d.engine.name << "\n\n";
    std::cout << "  model: " << fmt("%.2f", m.total_params() / 1e9) << "B parameters";
    if (m.is_moe()) std::cout << " (" << fmt("%.2f", m.active_params() / 1e9) << "B active per token)";
    std::cout << "; weights " << units::format_bytes(m.weight_bytes(d.weights)) << " ("
              << units::format_bytes_gib(m.weight_bytes(d.weights)) << ") in "
              << precision_name(d.weights) << "; KV cache "
              << fmt("%.1f", m.kv_bytes_per_token(d.kv_cache) / 1024) << " KiB per token\n";
    if (!m.checkpoint_quant.empty()) {
      // What the upstream checkpoint ships; the plan below uses --weights.
      std::cout << "  checkpoint as shipped: " << m.checkpoint_quant << " (quantization_config), "
                << units::format_bytes(m.checkpoint_weight_bytes()) << " ("
                << units::format_bytes_gib(m.checkpoint_weight_bytes())
                << "); the plan uses --weights " << precision_name(d.weights) << "\n";
    }
    std::cout << "\n";
    TextTable t({"per GPU", "GiB", "GB", "note"});
    t.row({"visible memory", fmt("%.2f", gib(p.visible)), fmt("%.2f", p.visible / 1e9),
           "what the driver reports"});
    t.row({"budget", fmt("%.2f", gib(p.budget)), fmt("%.2f", p.budget / 1e9),
           "gpu_memory_utilization " + fmt("%.2f", d.limits.gpu_memory_utilization) + " x visible"});
    t.row({"- weights", fmt("%.2f", gib(p.weights)), fmt("%.2f", p.weights / 1e9),
           std::string(precision_name(d.weights)) + (d.tp > 1 ? ", 1/" + std::to_string(d.tp) + " per GPU" : "")});
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
  opts->deployment.add_to(*cmd);
  cmd->add_option("--context", opts->context,
                  "sequence length (prompt + output) for the concurrency figure (default: "
                  "--max-model-len when given, else 4096)")
      ->check(CLI::Range(1LL, 100'000'000LL));
  cmd->add_option("--json", opts->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->callback([opts, &exit_code] { exit_code = run_fit(*opts); });
}

}  // namespace capsim::cli
