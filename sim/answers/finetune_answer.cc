#include "sim/answers/finetune_answer.h"

#include <algorithm>
#include <cmath>

#include "sim/core/error.h"
#include "sim/core/units.h"
#include "sim/report/table.h"
#include "sim/scenario/catalogues.h"

namespace capsim::answers {

// The scenario layer's specs and catalogues, which every answer reads.
using namespace capsim::scenario;
namespace {

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

std::vector<Card> chosen_cards(const FinetuneRequest& o) {
  std::vector<Card> out;
  if (o.cards.empty()) {
    for (const Card& c : cards().cards()) {
      if (!c.is_cpu) out.push_back(c);
    }
    std::stable_sort(out.begin(), out.end(), [](const Card& a, const Card& b) {
      return a.visible_memory_bytes < b.visible_memory_bytes;
    });
    return out;
  }
  for (const auto& name : o.cards) {
    try {
      out.push_back(cards().find(name));
    } catch (const Error& e) {
      throw Error(std::string("--cards: ") + e.what());
    }
  }
  return out;
}

// calibration/training/llm-foundry.csv of the data root, read once (a throw leaves it unread, so
// the next call tries again and says why).
struct CheckedTable {
  TrainingTable table;
  TrainingRateCheck check;
};
const CheckedTable& training_table() {
  static const CheckedTable t = [] {
    CheckedTable c{load_training_table(data_dir() + "/calibration/training/llm-foundry.csv"), {}};
    c.check = check_training_rates(c.table);
    return c;
  }();
  return t;
}

std::string duration_text(double s) {
  if (s < 3600) return fmt("%.0f min", s / 60);
  if (s < 2 * 86400) return fmt("%.1f h", s / 3600);
  return fmt("%.1f days", s / 86400);
}

// The speed table: per card the rate it trains at, where that comes from, and with --tokens the
// run's time and rent.
void print_training_speed(std::ostream& os, const FinetuneAnswer& a) {
  const FinetuneSetup& s = a.setup;
  os << "\n  training speed: " << fmt("%.1f", a.flops.hardware / 1e9) << " GFLOP per trained token ("
     << (s.adapters() ? "2 x matmuls + 3 x attention + 3 x adapters: the frozen base has no weight gradients"
                      : "3 x (matmuls + attention): forward, input and weight gradients")
     << (s.gradient_checkpointing ? ", + a recomputed forward" : "") << ")";
  if (a.tokens) os << "; " << fmt("%.3g", *a.tokens) << " tokens on " << s.gpus << " GPU" << (s.gpus > 1 ? "s" : "");
  os << "\n";
  TextTable t({"card", "HFU", "TFLOP/s", "tokens/s/GPU", "bound", "time", "$ total", "rate from"});
  for (std::size_t i = 0; i < a.cards.size(); ++i) {
    const std::optional<CardTraining>& ct = a.training[i];
    if (!ct) {
      t.row({a.cards[i].name, "-", "-", "-", "-", "-", "-", "no 16-bit tensor peak: not estimated"});
      continue;
    }
    const TrainingRate& r = ct->rate;
    t.row({a.cards[i].name, fmt("%.1f%%", 100 * r.hfu), fmt("%.0f", r.flops_per_s / 1e12),
           fmt("%.0f", ct->step.tokens_per_s_per_gpu()),
           ct->step.link_bound()
               ? ct->step.link + ", GPUs " + fmt("%.0f%%", 100 * ct->step.compute_s / ct->step.comm_s) + " busy"
               : std::string("compute"),
           ct->seconds ? duration_text(*ct->seconds) : (a.tokens ? "does not fit" : "-"),
           ct->usd ? fmt("%.0f", *ct->usd) : "-", r.basis});
  }
  t.print(os);
  os << "  rates: the hardware FLOP utilisation of the nearest measured training run (model size, sequence "
        "length, checkpointing) in calibration/training/llm-foundry.csv (MosaicML llm-foundry, FSDP on 8-512 "
        "GPUs); cards without runs borrow the other cards' (assumed). Out of sample (each of the "
     << a.check.runs << " runs predicted without it): a measured card's rate for a model size it has no run of is off by "
     << fmt("%.0f%%", 100 * a.check.model_out_median) << " (median; p90 " << fmt("%.0f%%", 100 * a.check.model_out_p90)
     << "), a borrowed rate by " << fmt("%.0f%%", 100 * a.check.card_out_median) << " (median; "
     << fmt("%.0f%%", 100 * a.check.card_out_worst_median) << " for " << a.check.worst_card << " left out)";
  if (s.adapters()) os << "; LoRA and QLoRA assumed to train at full fine-tuning's rate (optimistic: small adapter "
                          "matmuls" << (s.method == FinetuneMethod::kQlora ? ", NF4 dequantisation" : "") << ")";
  if (s.gpus > 1) {
    os << "; with " << s.gpus << " GPUs each step also moves the model's weights " << (s.adapters() ? "2" : "3")
       << " times over the ring's slowest link (ZeRO-3/FSDP: gathers for the forward and backward pass"
       << (s.adapters() ? "" : ", the gradients' reduce-scatter") << "), overlapped with compute; 'bound' says which "
       << "takes longer (a larger --batch hides the link)";
  }
  if (!a.tokens) os << "; --tokens N gives each run's time and cost";
  os << "\n";
}

}  // namespace

FinetuneAnswer answer_finetune(const FinetuneRequest& o) {
  FinetuneAnswer a;
  FinetuneSetup& s = a.setup;
  s.method = parse_finetune_method(o.method);
  s.optimizer = parse_finetune_optimizer(o.optimizer);
  s.batch = o.batch;
  s.seq_len = o.seq_len;
  s.lora_rank = o.lora_rank;
  s.gradient_checkpointing = o.gradient_checkpointing;
  s.flash_attention = o.flash_attention;
  s.gpus = o.gpus;
  s.validate();
  if (o.tokens && !(std::isfinite(*o.tokens) && *o.tokens >= 1 && *o.tokens <= 1e14)) {
    throw Error("--tokens: " + fmt("%g", *o.tokens) + " is not a token count in 1..1e14 (dataset tokens x epochs)");
  }
  a.model = models().find(o.model);
  a.cards = chosen_cards(o);
  a.prices = load_prices_with_overrides(
      o.prices_file.empty() ? data_dir() + "/calibration/prices.yaml" : o.prices_file, cards(),
      o.price_overrides);
  // The breakdown of the first GPU card (every GPU card shares it; a CPU card lacks the runtime).
  a.memory = plan_finetune(a.model, s, a.cards.front());
  for (const Card& c : a.cards) a.fits.push_back(fit_finetune(a.model, s, c));
  a.fits_any = std::any_of(a.fits.begin(), a.fits.end(), [](const FinetuneFit& f) { return f.fits; });
  const CheckedTable& runs = training_table();
  a.training_source = runs.table.source;
  a.check = runs.check;
  a.tokens = o.tokens;
  a.flops = training_flops_per_token(a.model, s, a.memory.adapter_params);
  for (std::size_t i = 0; i < a.cards.size(); ++i) {
    const Card& c = a.cards[i];
    const auto rate = training_rate(runs.table, c, static_cast<double>(a.model.active_params()),
                                    static_cast<double>(s.seq_len), s.gradient_checkpointing);
    if (!rate) {
      a.training.emplace_back();
      continue;
    }
    CardTraining ct;
    ct.rate = *rate;
    // The memory plan's weights are one GPU's shard (ZeRO-3 divides them by gpus).
    ct.step = training_step(c, s, a.flops, ct.rate, a.memory.weights * s.gpus);
    if (a.tokens && a.fits[i].fits) {
      ct.seconds = *a.tokens / (ct.step.tokens_per_s_per_gpu() * s.gpus);
      if (const CardPrice* p = a.prices.find(c.name)) ct.usd = *ct.seconds / 3600 * p->rent.value * s.gpus;
    }
    a.training.push_back(std::move(ct));
  }
  return a;
}

nlohmann::json finetune_json(const FinetuneAnswer& a) {
  const FinetuneSetup& s = a.setup;
  const FinetuneMemory& mem = a.memory;
  nlohmann::json j = {
      {"model", a.model.name},
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
  nlohmann::json cards_json = nlohmann::json::array();
  for (std::size_t i = 0; i < a.cards.size(); ++i) {
    const FinetuneFit& f = a.fits[i];
    const CardPrice* p = a.prices.find(a.cards[i].name);
    nlohmann::json cj = {{"card", a.cards[i].name},
                         {"visible_bytes", f.visible},
                         {"need_bytes", f.need},
                         {"fits", f.fits},
                         {"missing_bytes", f.missing},
                         {"zero3_gpus_needed", f.gpus_needed > 0 ? nlohmann::json(f.gpus_needed)
                                                                 : nlohmann::json(nullptr)}};
    cj["usd_per_hour"] = p ? nlohmann::json(p->rent.value * s.gpus) : nlohmann::json(nullptr);
    nlohmann::json tj = nullptr;
    if (const std::optional<CardTraining>& ct = a.training[i]) {
      const TrainingRate& r = ct->rate;
      const TrainingStep& st = ct->step;
      const auto optional = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
      tj = {{"hfu", r.hfu},
            {"peak_flops_per_s", r.peak},
            {"achieved_flops_per_s", r.flops_per_s},
            {"measured", r.measured},
            {"basis", r.basis},
            {"tokens_per_s_per_gpu", st.tokens_per_s_per_gpu()},
            {"step",
             {{"tokens", st.tokens},
              {"compute_seconds", st.compute_s},
              {"communication_seconds", st.comm_s},
              {"link", st.link.empty() ? nlohmann::json(nullptr) : nlohmann::json(st.link)},
              {"bound", st.link_bound() ? "link" : "compute"}}},
            {"seconds", optional(ct->seconds)},
            {"usd", optional(ct->usd)}};
    }
    cj["training"] = tj;
    cards_json.push_back(cj);
  }
  j["cards"] = cards_json;
  j["fits_any"] = a.fits_any;
  j["training"] = {{"forward_flops_per_token", a.flops.forward},
                   {"flops_per_token", a.flops.hardware},
                   {"tokens", a.tokens ? nlohmann::json(*a.tokens) : nlohmann::json(nullptr)},
                   {"table", "calibration/training/llm-foundry.csv"},
                   {"source", a.training_source},
                   {"out_of_sample",
                    {{"runs", a.check.runs},
                     {"model_out_median_error", a.check.model_out_median},
                     {"model_out_p90_error", a.check.model_out_p90},
                     {"card_out_median_error", a.check.card_out_median},
                     {"card_out_worst_median_error", a.check.card_out_worst_median},
                     {"card_out_worst_card", a.check.worst_card}}}};
  return j;
}

void print_finetune(std::ostream& os, const FinetuneAnswer& a) {
  const FinetuneSetup& s = a.setup;
  const FinetuneMemory& mem = a.memory;
  const ModelSpec& m = a.model;
  const std::string method_text = s.method == FinetuneMethod::kFull ? "full fine-tuning"
                                  : s.method == FinetuneMethod::kLora
                                      ? "LoRA (rank " + std::to_string(s.rank()) + ", bf16 base)"
                                      : "QLoRA (rank " + std::to_string(s.rank()) + ", NF4 base)";
  os << "capsim finetune: " << m.name << " (" << fmt("%.2f", mem.params / 1e9)
     << "B parameters), " << method_text << ", " << finetune_optimizer_name(s.optimizer)
     << ", micro-batch " << s.batch << " x " << s.seq_len << " tokens"
     << (s.gradient_checkpointing ? ", gradient checkpointing" : "")
     << (s.flash_attention ? ", FlashAttention" : "") << ", " << s.gpus
     << (s.gpus > 1 ? " GPUs with ZeRO-3/FSDP sharding of weights, gradients and optimizer states"
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
         a.cards.front().is_cpu
             ? "none on a CPU"
             : "CUDA context, cuBLAS, allocator" + std::string(s.gpus > 1 ? ", NCCL" : "")});
  t.rule();
  t.row({"total", fmt("%.2f", gb(mem.total())), fmt("%.2f", gib(mem.total())),
         "largest: " + mem.largest_term() + " (" +
             fmt("%.0f", 100.0 * mem.largest_bytes() / mem.total()) + "%)"});
  t.print(os);
  os << "\n";

  TextTable ct({"card", "usable GiB", "need GiB", "fits", "missing GiB", "ZeRO-3 GPUs", "$/h"});
  for (std::size_t i = 0; i < a.cards.size(); ++i) {
    const FinetuneFit& f = a.fits[i];
    const CardPrice* p = a.prices.find(a.cards[i].name);
    std::string need_gpus = f.fits              ? std::to_string(s.gpus)
                            : f.gpus_needed > 0 ? std::to_string(f.gpus_needed)
                                                : "> " + std::to_string(kMaxFinetuneGpus);
    ct.row({f.card, fmt("%.2f", gib(f.visible)), fmt("%.2f", gib(f.need)), f.fits ? "yes" : "no",
            f.fits ? "-" : fmt("%.2f", gib(f.missing)), need_gpus,
            p ? fmt("%.2f", p->rent.value * s.gpus) : "-"});
  }
  ct.print(os);
  os << "\n";
  std::vector<std::string> yes;
  for (const auto& f : a.fits) {
    if (f.fits) yes.push_back(f.card);
  }
  if (a.fits_any) {
    os << "  fits on: ";
    for (std::size_t i = 0; i < yes.size(); ++i) os << (i ? ", " : "") << yes[i];
    os << "\n";
  } else {
    os << "  fits on none of these cards with " << s.gpus << " GPU" << (s.gpus > 1 ? "s" : "")
       << "; the largest term is " << mem.largest_term() << " ("
       << units::format_bytes(mem.largest_bytes()) << " per GPU).\n";
  }
  if (s.method != FinetuneMethod::kQlora && !a.fits_any) {
    os << "  to shrink it: --method qlora (4-bit base weights, adapters only trained)";
    if (!s.gradient_checkpointing) os << ", --gradient-checkpointing";
    os << ", or more GPUs (--gpus N, ZeRO-3 column)\n";
  } else if (mem.largest_term() == "activations" && !s.gradient_checkpointing) {
    os << "  activations dominate: --gradient-checkpointing keeps only each layer's input\n";
  }
  if (s.seq_len > m.max_context && m.max_context > 0) {
    os << "  note: --seq-len " << s.seq_len << " exceeds the model's context (" << m.max_context
       << " tokens)\n";
  }
  os << "  usable = what the driver lets a process allocate (torch total_memory); the "
        "batch is per GPU\n";
  print_training_speed(os, a);
}

}  // namespace capsim::answers
