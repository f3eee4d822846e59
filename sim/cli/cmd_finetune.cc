// `capsim finetune`: does fine-tuning a model fit in one card's memory (full, LoRA, QLoRA), where
// the memory goes, which term binds, how much is missing, and how many GPUs ZeRO-3 would need.
#include <algorithm>
#include <cmath>
#include <iostream>

#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/plan/finetune.h"
#include "sim/plan/prices.h"
#include "sim/report/json_output.h"
#include "sim/report/table.h"

namespace capsim::cli {
namespace {

struct FinetuneOptions {
  std::string model = "llama-2-13b";
  std::string method = "full";
  std::string optimizer = "adamw";
  long long batch = 1;
  long long seq_len = 512;
  std::optional<int> lora_rank;
  bool gradient_checkpointing = false;
  bool flash_attention = false;
  std::vector<std::string> cards;
  int gpus = 1;
  std::vector<std::string> prices;
  std::string prices_file;
  std::string json;
};

double gb(double b) { return b / 1e9; }
double gib(double b) { return b / 1073741824.0; }

std::string optimizer_note(FinetuneOptimizer o) {
  switch (o) {
    case FinetuneOptimizer::kAdamW:
      return "AdamW: fp32 master 4 B + two fp32 moments 8 B per trainable";
    case FinetuneOptimizer::kAdamW8bit:
      return "8-bit AdamW: fp32 master 4 B + two 1-byte moments per trainable";
    case FinetuneOptimizer::kSgd:
      return "SGD: fp32 master 4 B per trainable";
  }
  return "";
}

std::vector<const Card*> chosen_cards(const FinetuneOptions& o) {
  std::vector<const Card*> out;
  if (o.cards.empty()) {
    for (const Card& c : cards().cards()) {
      if (!c.is_cpu) out.push_back(&c);
    }
    std::stable_sort(out.begin(), out.end(), [](const Card* a, const Card* b) {
      return a->visible_memory_bytes < b->visible_memory_bytes;
    });
    return out;
  }
  for (const auto& name : o.cards) {
    try {
      out.push_back(&cards().find(name));
    } catch (const Error& e) {
      throw Error(std::string("--cards: ") + e.what());
    }
  }
  return out;
}

int run_finetune(const FinetuneOptions& o) {
  FinetuneSetup s;
  s.method = parse_finetune_method(o.method);
  s.optimizer = parse_finetune_optimizer(o.optimizer);
  s.batch = o.batch;
  s.seq_len = o.seq_len;
  s.lora_rank = o.lora_rank;
  s.gradient_checkpointing = o.gradient_checkpointing;
  s.flash_attention = o.flash_attention;
  s.gpus = o.gpus;
  s.validate();
  const ModelSpec m = models().find(o.model);
  const std::vector<const Card*> list = chosen_cards(o);
  const PriceBook prices = load_prices_with_overrides(
      o.prices_file.empty() ? data_dir() + "/calibration/prices.yaml" : o.prices_file, cards(),
      o.prices);
  // The breakdown of the first GPU card (every GPU card shares it; a CPU card lacks the runtime).
  const Card& first = *list.front();
  const FinetuneMemory mem = plan_finetune(m, s, first);

  const std::string method_text = s.method == FinetuneMethod::kFull ? "full fine-tuning"
                                  : s.method == FinetuneMethod::kLora
                                      ? "LoRA (rank " + std::to_string(s.rank()) + ", bf16 base)"
                                      : "QLoRA (rank " + std::to_string(s.rank()) + ", NF4 base)";
  nlohmann::json j = {
      {"model", m.name},
      {"method", finetune_method_name(s.method)},
      {"optimizer", finetune_optimizer_name(s.optimizer)},
      {"batch", s.batch},
      {"seq_len", s.seq_len},
      {"lora_rank", s.adapters() ? nlohmann::json(s.rank()) : nlohmann::json(nullptr)},
      {"gradient_checkpointing", s.gradient_checkpointing},
      {"flash_attention", s.flash_attention},
      {"gpus", s.gpus},
      {"sharding", s.gpus > 1 ? "zero3" : "none"},
      {"params", mem.params},
      {"trainable_params", mem.trainable_params},
      {"adapter_params", mem.adapter_params},
      {"per_gpu",
       {{"weights_bytes", mem.weights},
        {"gradients_bytes", mem.gradients},
        {"optimizer_bytes", mem.optimizer},
        {"gather_bytes", mem.gather},
        {"activations_bytes", mem.activations},
        {"logits_bytes", mem.logits},
        {"runtime_bytes", mem.runtime},
        {"total_bytes", mem.total()}}},
      {"largest_term", mem.largest_term()},
  };

  std::vector<FinetuneFit> fits;
  nlohmann::json cards_json = nlohmann::json::array();
  for (const Card* c : list) {
    const FinetuneFit f = fit_finetune(m, s, *c);
    fits.push_back(f);
    const CardPrice* p = prices.find(c->name);
    nlohmann::json cj = {{"card", c->name},
                         {"visible_bytes", f.visible},
                         {"need_bytes", f.need},
                         {"fits", f.fits},
                         {"missing_bytes", f.missing},
                         {"zero3_gpus_needed", f.gpus_needed > 0 ? nlohmann::json(f.gpus_needed)
                                                                 : nlohmann::json(nullptr)}};
    cj["usd_per_hour"] = p ? nlohmann::json(p->rent.value * s.gpus) : nlohmann::json(nullptr);
    cards_json.push_back(cj);
  }
  j["cards"] = cards_json;
  const bool any_fits =
      std::any_of(fits.begin(), fits.end(), [](const FinetuneFit& f) { return f.fits; });
  j["fits_any"] = any_fits;

  if (o.json != "-") {
    std::cout << "capsim finetune: " << m.name << " (" << fmt("%.2f", mem.params / 1e9)
              << "B parameters), " << method_text << ", " << finetune_optimizer_name(s.optimizer)
              << ", micro-batch " << s.batch << " x " << s.seq_len << " tokens"
              << (s.gradient_checkpointing ? ", gradient checkpointing" : "")
              << (s.flash_attention ? ", FlashAttention" : "") << ", " << s.gpus
              << (s.gpus > 1
                      ? " GPUs with ZeRO-3/FSDP sharding of weights, gradients and optimizer states"
                      : " GPU")
              << "\n\n";
    const std::string per = s.gpus > 1 ? ", 1/" + std::to_string(s.gpus) + " per GPU" : "";
    const double trainable_b = mem.trainable_params / 1e9;
    std::string weights_note;
    if (s.method == FinetuneMethod::kQlora) {
      weights_note = "NF4 0.5 B + 0.127 bit constants per linear weight, rest bf16";
    } else {
      weights_note = "bf16, 2 B x " + fmt("%.2f", mem.params / 1e9) + "B";
    }
    if (s.adapters())
      weights_note += "; + adapters " + fmt("%.1f", mem.adapter_params / 1e6) + "M x 2 B";
    TextTable t({"per GPU", "GB", "GiB", "note"});
    t.row({"weights", fmt("%.2f", gb(mem.weights)), fmt("%.2f", gib(mem.weights)),
           weights_note + per});
    t.row({"gradients", fmt("%.2f", gb(mem.gradients)), fmt("%.2f", gib(mem.gradients)),
           "bf16, 2 B x " +
               (s.adapters() ? fmt("%.1f", mem.trainable_params / 1e6) + "M adapter"
                             : fmt("%.2f", trainable_b) + "B") +
               " trainable" + per});
    t.row({"optimizer states", fmt("%.2f", gb(mem.optimizer)), fmt("%.2f", gib(mem.optimizer)),
           optimizer_note(s.optimizer) + per});
    if (s.gpus > 1) {
      t.row({"ZeRO-3 gather buffer", fmt("%.2f", gb(mem.gather)), fmt("%.2f", gib(mem.gather)),
             "running and next layer, unsharded"});
    }
    t.row({"activations", fmt("%.2f", gb(mem.activations)), fmt("%.2f", gib(mem.activations)),
           s.gradient_checkpointing
               ? "layer inputs 2sbh x " + std::to_string(m.layers) + " + one layer recomputed"
               : "Korthikanti et al. 2022: " + std::to_string(m.layers) + " layers x sbh(34" +
                     std::string(s.flash_attention ? "" : " + 5as/h") + ")"});
    if (!m.encoder_only) {
      t.row({"logits", fmt("%.2f", gb(mem.logits)), fmt("%.2f", gib(mem.logits)),
             "s x b x vocab " + std::to_string(m.vocab) + " x (bf16 + fp32 copy)"});
    }
    t.row({"runtime", fmt("%.2f", gb(mem.runtime)), fmt("%.2f", gib(mem.runtime)),
           first.is_cpu
               ? "none on a CPU"
               : "CUDA context, cuBLAS, allocator" + std::string(s.gpus > 1 ? ", NCCL" : "")});
    t.rule();
    t.row({"total", fmt("%.2f", gb(mem.total())), fmt("%.2f", gib(mem.total())),
           "largest: " + mem.largest_term() + " (" +
               fmt("%.0f", 100.0 * mem.largest_bytes() / mem.total()) + "%)"});
    t.print(std::cout);
    std::cout << "\n";

    TextTable ct({"card", "usable GiB", "need GiB", "fits", "missing GiB", "ZeRO-3 GPUs", "$/h"});
    for (std::size_t i = 0; i < list.size(); ++i) {
      const FinetuneFit& f = fits[i];
      const CardPrice* p = prices.find(list[i]->name);
      std::string need_gpus = f.fits              ? std::to_string(s.gpus)
                              : f.gpus_needed > 0 ? std::to_string(f.gpus_needed)
                                                  : "> " + std::to_string(kMaxFinetuneGpus);
      ct.row({f.card, fmt("%.2f", gib(f.visible)), fmt("%.2f", gib(f.need)), f.fits ? "yes" : "no",
              f.fits ? "-" : fmt("%.2f", gib(f.missing)), need_gpus,
              p ? fmt("%.2f", p->rent.value * s.gpus) : "-"});
    }
    ct.print(std::cout);
    std::cout << "\n";
    std::vector<std::string> yes;
    for (const auto& f : fits) {
      if (f.fits) yes.push_back(f.card);
    }
    if (any_fits) {
      std::cout << "  fits on: ";
      for (std::size_t i = 0; i < yes.size(); ++i) std::cout << (i ? ", " : "") << yes[i];
      std::cout << "\n";
    } else {
      std::cout << "  fits on none of these cards with " << s.gpus << " GPU"
                << (s.gpus > 1 ? "s" : "") << "; the largest term is " << mem.largest_term() << " ("
                << units::format_bytes(mem.largest_bytes()) << " per GPU).\n";
    }
    if (s.method != FinetuneMethod::kQlora && !any_fits) {
      std::cout << "  to shrink it: --method qlora (4-bit base weights, adapters only trained)";
      if (!s.gradient_checkpointing) std::cout << ", --gradient-checkpointing";
      std::cout << ", or more GPUs (--gpus N, ZeRO-3 column)\n";
    } else if (mem.largest_term() == "activations" && !s.gradient_checkpointing) {
      std::cout
          << "  activations dominate: --gradient-checkpointing keeps only each layer's input\n";
    }
    if (s.seq_len > m.max_context && m.max_context > 0) {
      std::cout << "  note: --seq-len " << s.seq_len << " exceeds the model's context ("
                << m.max_context << " tokens)\n";
    }
    std::cout << "  usable = what the driver lets a process allocate (torch total_memory); the "
                 "batch is per GPU\n";
  }
  if (!o.json.empty()) write_json(o.json, j);
  return any_fits ? 0 : 1;
}

}  // namespace

void add_finetune_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<FinetuneOptions>();
  CLI::App* cmd = app.add_subcommand(
      "finetune", "does fine-tuning fit (full, LoRA, QLoRA): memory per GPU by term, per card");
  cmd->footer(
      "examples:\n"
      "  capsim finetune --model llama-2-13b                              # full, AdamW: ~208 GB "
      "of states\n"
      "  capsim finetune --model llama-2-13b --method qlora --cards rtx-4090,l4,t4\n"
      "  capsim finetune --model llama-2-13b --gpus 4 --cards a100-80gb-sxm "
      "--gradient-checkpointing\n"
      "exit status: 0 fits on at least one card, 1 fits on none, 2 bad input");
  cmd->add_option(
         "--model,-m", o->model,
         "model: catalogue name (capsim list models), Hugging Face id, or config.json path")
      ->capture_default_str();
  cmd->add_option("--method", o->method, "full, lora (bf16 base) or qlora (4-bit NF4 base)")
      ->capture_default_str();
  cmd->add_option("--optimizer", o->optimizer, "adamw, adamw-8bit (bitsandbytes) or sgd")
      ->capture_default_str();
  cmd->add_option("--batch", o->batch, "micro-batch: sequences per GPU per step")
      ->capture_default_str();
  cmd->add_option("--seq-len", o->seq_len, "tokens per sequence")->capture_default_str();
  cmd->add_option("--lora-rank", o->lora_rank, "LoRA rank r (lora, qlora; default 8 as PEFT)");
  cmd->add_flag("--gradient-checkpointing", o->gradient_checkpointing,
                "full activation recomputation: keep only each layer's input");
  cmd->add_flag("--flash-attention", o->flash_attention,
                "attention scores not stored (FlashAttention, PyTorch SDPA)");
  cmd->add_option("--cards", o->cards, "cards to check, comma-separated (default: every GPU card)")
      ->delimiter(',');
  cmd->add_option("--gpus", o->gpus,
                  "data-parallel GPUs; > 1 shards weights, gradients and optimizer (ZeRO-3/FSDP)")
      ->capture_default_str();
  cmd->add_option("--price", o->prices,
                  "override a rent: CARD=USD_PER_HOUR (per GPU), e.g. h100-sxm=2.49; repeatable");
  cmd->add_option("--prices", o->prices_file, "price file (default calibration/prices.yaml)");
  cmd->add_option("--json", o->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->callback([o, &exit_code] { exit_code = run_finetune(*o); });
}

}  // namespace capsim::cli
