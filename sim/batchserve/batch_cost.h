// The time one batch of items takes on a card, for a model that does one forward pass per item
// (an encoder such as BERT, an image classifier): a roofline over the batch
// (docs/beyond-llm.md#batch-time).
//
//   t(n) = hypot(n x flops_per_item / (peak x compute_efficiency),
//                weight_bytes / (bandwidth x bandwidth_efficiency)) + overhead
//
// The weights are read once per batch whatever its size; the arithmetic grows with it. The two
// times are combined as a 2-norm, as sim/cost/roofline_cost.cc does for LLM kernels
// (docs/cost-model.md#step-time). Activation traffic is not counted.
#pragma once

#include <string>

#include "sim/hardware/card.h"
#include "sim/hardware/precision.h"
#include "sim/llm/model_spec.h"

namespace capsim {

// What one item costs, independent of the card.
struct ItemWork {
  double flops_per_item = 0;  // floating-point (or integer) operations per item
  double weight_bytes = 0;    // bytes of weights read from memory once per batch
  double model_bytes = 0;     // whole model at the precision (for the memory check and reports)
  std::string description;    // how the numbers were obtained, for the report
};

// An encoder-only catalogue model over `seq_len` tokens per item:
//   flops  = 2 x matmul parameters x seq_len + 4 x layers x hidden x seq_len^2 (QK^T and PV)
//   weight_bytes = matmul parameters x element_bytes(precision)
// where matmul parameters are those of the encoder layers' linear maps (embeddings are looked
// up, not multiplied, and only the rows of the item's tokens are read).
// Throws capsim::Error for a decoder model or a seq_len outside 1..max positions.
ItemWork encoder_item_work(const ModelSpec& m, long long seq_len, Precision precision);

// A model known only by its FLOPs per item and the bytes of weights each batch reads.
ItemWork generic_item_work(double flops_per_item, double weight_bytes);

struct BatchCost {
  double flops_per_item = 0;
  double weight_bytes = 0;
  double compute_rate = 0;  // operations/s achieved: peak(precision) x compute_efficiency
  double memory_rate = 0;   // bytes/s achieved: bandwidth x bandwidth_efficiency
  double overhead_s = 0;    // fixed time per batch (dispatch, host transfers)

  double compute_seconds(int items) const { return items * flops_per_item / compute_rate; }
  double memory_seconds() const { return weight_bytes / memory_rate; }
  // REQUIRES: items >= 1.
  double seconds(int items) const;
  // Items per second when batches of `items` run back to back.
  double throughput(int items) const { return items / seconds(items); }
};

// Resolves the card's peak and efficiencies for `precision`. Throws capsim::Error naming
// --precision when the card has no peak for it (e.g. bf16 on a T4), listing what it has.
BatchCost make_batch_cost(const ItemWork& work, const Card& card, Precision precision,
                          double overhead_s);

}  // namespace capsim
