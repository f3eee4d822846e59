// `finetune`'s answer as every front end gives it: does fine-tuning a model fit in one card's
// memory (full, LoRA, QLoRA), where the memory goes, which term binds, how much is missing, and
// how many GPUs ZeRO-3 would need. finetune_json is exactly what `capsim finetune --json -`
// prints (docs/json-output.md#capsim-finetune---json).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "sim/hardware/card.h"
#include "sim/llm/model_spec.h"
#include "sim/plan/finetune.h"
#include "sim/plan/training_speed.h"
#include "sim/plan/prices.h"

namespace capsim::answers {

// The flags of `capsim finetune`. Messages name the flags (--method, --cards, ...).
struct FinetuneRequest {
  std::string model = "llama-2-13b";
  std::string method = "full";
  std::string optimizer = "adamw";
  long long batch = 1;
  long long seq_len = 512;
  std::optional<int> lora_rank;
  bool gradient_checkpointing = false;
  bool flash_attention = false;
  std::vector<std::string> cards;  // empty: every GPU card, smallest memory first
  int gpus = 1;
  std::vector<std::string> price_overrides;  // "h100-sxm=2.49"
  std::string prices_file;                   // empty: calibration/prices.yaml of the data root
  // Tokens to train on (dataset tokens x epochs): the time and cost of the whole run per card.
  std::optional<double> tokens;
};

// One card's training speed (docs/beyond-llm.md#training-speed): the rate measured runs give it,
// one step on one GPU at that rate, and with --tokens the whole run's time and rent (none where
// the card does not fit, or has no price).
struct CardTraining {
  TrainingRate rate;
  TrainingStep step;
  std::optional<double> seconds, usd;
};

struct FinetuneAnswer {
  FinetuneSetup setup;
  ModelSpec model;
  std::vector<Card> cards;      // as checked, in order
  FinetuneMemory memory;        // per GPU, on the first card (every GPU card shares it)
  std::vector<FinetuneFit> fits;  // one per card
  bool fits_any = false;        // the CLI's exit status 0, else 1
  PriceBook prices;
  // Training speed: FLOPs per trained token, and per card (as `cards`) its speed; none for a card
  // without a 16-bit tensor peak (a CPU).
  TrainingFlops flops;
  std::vector<std::optional<CardTraining>> training;
  std::optional<double> tokens;
  std::string training_source;  // the measured runs' provenance (the table's `# source:`)
  TrainingRateCheck check;      // how sure the rates are, out of sample
};

// Throws capsim::Error naming the flag for bad input.
FinetuneAnswer answer_finetune(const FinetuneRequest& request);

nlohmann::json finetune_json(const FinetuneAnswer& a);
// The readable report `capsim finetune` prints: the memory table, the card table, the verdict.
void print_finetune(std::ostream& os, const FinetuneAnswer& a);

}  // namespace capsim::answers
