// `capsim finetune`: does fine-tuning a model fit in one card's memory (full, LoRA, QLoRA), where
// the memory goes, which term binds, how much is missing, and how many GPUs ZeRO-3 would need.
#include <iostream>

#include "sim/answers/finetune_answer.h"
#include "sim/cli/commands.h"
#include "sim/cli/common.h"
#include "sim/report/json_output.h"

namespace capsim::cli {
namespace {

struct FinetuneOptions {
  answers::FinetuneRequest request;
  std::string json;
};

int run_finetune(const FinetuneOptions& o) {
  const answers::FinetuneAnswer a = answers::answer_finetune(o.request);
  if (o.json != "-") answers::print_finetune(std::cout, a);
  if (!o.json.empty()) write_json(o.json, answers::finetune_json(a));
  return a.fits_any ? 0 : 1;
}

}  // namespace

void add_finetune_command(CLI::App& app, int& exit_code) {
  auto opts = std::make_shared<FinetuneOptions>();
  answers::FinetuneRequest* o = &opts->request;
  CLI::App* cmd = app.add_subcommand(
      "finetune", "does fine-tuning fit (full, LoRA, QLoRA): memory per GPU by term, per card; training speed, time and cost");
  cmd->footer(
      "examples:\n"
      "  capsim finetune --model llama-2-13b                              # full, AdamW: ~208 GB "
      "of states\n"
      "  capsim finetune --model llama-2-13b --method qlora --cards rtx-4090,l4,t4\n"
      "  capsim finetune --model llama-2-13b --gpus 4 --cards a100-80gb-sxm "
      "--gradient-checkpointing\n"
      "  capsim finetune --model llama-2-7b --method lora --cards a100-80gb-sxm,h100-sxm --tokens 1e9\n"
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
  cmd->add_option("--price", o->price_overrides,
                  "override a rent: CARD=USD_PER_HOUR (per GPU), e.g. h100-sxm=2.49; repeatable");
  cmd->add_option("--prices", o->prices_file, "price file (default calibration/prices.yaml)");
  cmd->add_option("--tokens", o->tokens,
                  "tokens to train on (dataset tokens x epochs): each card's time and cost for the whole run");
  cmd->add_option("--json", opts->json, "also write the result as JSON to FILE ('-' = stdout only)");
  cmd->callback([opts, &exit_code] { exit_code = run_finetune(*opts); });
}

}  // namespace capsim::cli
