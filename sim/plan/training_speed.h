// How fast fine-tuning runs (capsim finetune; docs/beyond-llm.md#training-speed): the hardware
// FLOPs one trained token costs, and the hardware FLOP rate a card sustains in training, read from
// measured training runs (calibration/training/llm-foundry.csv) where the card has them.
//
// Contract: a rate is a hardware FLOP utilisation (HFU: achieved / the card's dense 16-bit peak,
// recomputed forward passes counted) taken from the measured row nearest the question in model
// size and sequence length (|ln P/P_row| + |ln s/s_row|, the median of ties), among the rows with
// the same activation checkpointing when the card has any. A card without rows gets the same rule
// over every measured card's rows, marked assumed. Nothing is fitted.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/hardware/card.h"
#include "sim/llm/model_spec.h"
#include "sim/plan/finetune.h"

namespace capsim {

// One measured training run.
struct TrainingRun {
  std::string card, model;
  double params = 0;   // parameters of the model trained
  double seq_len = 0;  // tokens per sequence
  int gpus = 0;
  double mfu = 0, hfu = 0;  // fractions of the dense 16-bit peak
  bool checkpointing = false;
  double tokens_per_s_per_gpu = 0;
};

struct TrainingTable {
  std::string file, source, licence;
  std::vector<TrainingRun> runs;
};

// Reads the CSV (docs/data-formats.md#training-throughput). Throws capsim::Error naming the file,
// line and column for anything else.
TrainingTable load_training_table(const std::string& path);

// Hardware FLOPs of one trained token of a `seq_len`-token sequence: the forward pass's matmuls
// (every layer's linear layers at the experts a token uses, and a decoder's LM head) M, attention over the
// whole sequence A (as llm-foundry counts it: 4 x heads x head_dim x seq_len per layer) and the
// adapters' 2 x adapter_params; full fine-tuning runs 3 (M + A) (forward, input gradients, weight
// gradients); LoRA and QLoRA 2 M + 3 A + 6 adapter_params (a frozen base has no weight
// gradients); activation checkpointing adds one more forward pass.
struct TrainingFlops {
  double forward = 0;   // M + A + 2 x adapter params
  double hardware = 0;  // all of a step's FLOPs per token, recomputation included
};
TrainingFlops training_flops_per_token(const ModelSpec& m, const FinetuneSetup& s, std::int64_t adapter_params);

struct TrainingRate {
  double hfu = 0;            // achieved / peak
  double peak = 0;           // FLOP/s: the card's dense bf16 peak (fp16 where it has no bf16)
  double flops_per_s = 0;    // hfu x peak, per GPU
  bool measured = false;     // from this card's own runs
  const TrainingRun* nearest = nullptr;  // one row the rate came from (of the median's ties, the first)
  int ties = 0;              // rows at the nearest distance (their median HFU is the rate)
  // In words: "measured: mpt-13b at 2048 tokens on h100-sxm (median of 4 runs)", or "assumed: ..."
  // naming the other cards' runs a card without runs borrows.
  std::string basis;
};

// None for a card without a 16-bit tensor peak (a CPU). `params`: the parameters one token uses.
std::optional<TrainingRate> training_rate(const TrainingTable& t, const Card& card, double params, double seq_len,
                                          bool checkpointing);

// One training step on one GPU: its tokens (batch x seq_len) at the rate, and with gpus > 1 the
// ZeRO-3 / FSDP traffic over the data-parallel ring's slowest link (sim/llm/parallelism.h
// link_between, at kLinkEfficiency): each GPU gathers the whole model's weights for the forward
// and again for the backward pass, and full fine-tuning reduce-scatters the gradients, so
// 3 (full) or 2 (LoRA, QLoRA: only the adapters have gradients) x weight_bytes x (G - 1) / G
// cross each GPU's link per step (Rajbhandari et al. 2020, "ZeRO", section 7.2.2: 1.5x data
// parallelism's 2 Psi). FSDP prefetches the next layer's weights while this one computes, so the
// step takes the longer of the two (ASSUMED perfect overlap: a lower bound on the step).
struct TrainingStep {
  double tokens = 0;     // per GPU per step
  double compute_s = 0;  // tokens x FLOPs per token / rate
  double comm_s = 0;     // 0 on one GPU
  double seconds = 0;    // max(compute_s, comm_s)
  std::string link;      // the ring's slowest link ("NVLink", "PCIe via host (no P2P)", ...); "" on one GPU
  bool link_bound() const { return comm_s > compute_s; }
  double tokens_per_s_per_gpu() const { return tokens / seconds; }
};
// `weight_bytes`: the whole model's weights as trained (all GPUs' shards together).
TrainingStep training_step(const Card& card, const FinetuneSetup& s, const TrainingFlops& f, const TrainingRate& r,
                           double weight_bytes);

// How well the rule predicts runs it did not see, each run's HFU predicted from the others:
// leaving out every run of its model on its card (a measured card asked about another model
// size), and leaving out its whole card (a card without runs). Errors are |predicted / measured - 1|.
struct TrainingRateCheck {
  std::size_t runs = 0;
  double model_out_median = 0, model_out_p90 = 0;  // percentiles as numpy's default (Samples)
  double card_out_median = 0;        // over every run
  double card_out_worst_median = 0;  // the card whose runs are predicted worst, by median
  std::string worst_card;
};
TrainingRateCheck check_training_rates(const TrainingTable& t);

}  // namespace capsim
