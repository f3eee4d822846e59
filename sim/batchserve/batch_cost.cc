#include "sim/batchserve/batch_cost.h"

#include <cassert>
#include <cmath>

#include "sim/core/error.h"

namespace capsim {

ItemWork encoder_item_work(const ModelSpec& m, long long seq_len, Precision precision) {
  if (!m.encoder_only) {
    throw Error("--model: " + m.name +
                " is a decoder LLM; batch-serve runs one forward pass per item (encoder-only "
                "models such as bert-base-uncased, or any model via --flops-per-item and "
                "--weights-bytes); use capsim simulate for LLM serving");
  }
  if (seq_len < 1 || (m.max_context > 0 && seq_len > m.max_context)) {
    throw Error("--seq-len: " + std::to_string(seq_len) + " is outside what " + m.name +
                " takes; accepted: 1 to " + std::to_string(m.max_context) + " tokens");
  }
  // linear_flops_per_token() is 2 x the matmul parameters of the layers (attention projections
  // and MLP, with their biases), the FLOPs one token costs outside attention.
  const double matmul_params = m.linear_flops_per_token() / 2.0;
  const double s = static_cast<double>(seq_len);
  ItemWork w;
  w.flops_per_item = 2.0 * matmul_params * s + m.attention_flops_per_token(s) * s;
  w.weight_bytes = matmul_params * element_bytes(precision);
  w.model_bytes = static_cast<double>(m.total_params()) * element_bytes(precision);
  w.description = "2 x " + std::to_string(static_cast<long long>(matmul_params)) +
                  " matmul parameters x " + std::to_string(seq_len) + " tokens + attention 4 x " +
                  std::to_string(m.layers) + " layers x " + std::to_string(m.hidden) + " x " +
                  std::to_string(seq_len) + "^2";
  return w;
}

ItemWork generic_item_work(double flops_per_item, double weight_bytes) {
  ItemWork w;
  w.flops_per_item = flops_per_item;
  w.weight_bytes = weight_bytes;
  w.model_bytes = weight_bytes;
  w.description = "--flops-per-item and --weights-bytes";
  return w;
}

double BatchCost::seconds(int items) const {
  assert(items >= 1);
  return std::hypot(compute_seconds(items), memory_seconds()) + overhead_s;
}

BatchCost make_batch_cost(const ItemWork& work, const Card& card, Precision precision,
                          double overhead_s) {
  if (!card.supports(precision)) {
    throw Error("--precision " + std::string(precision_name(precision)) + ": " + card.name +
                " has no " + std::string(precision_name(precision)) + " peak (" + card.file +
                " dense_peak); supported: " + card.supported_precisions());
  }
  BatchCost c;
  c.flops_per_item = work.flops_per_item;
  c.weight_bytes = work.weight_bytes;
  c.compute_rate = card.peak(precision) * card.compute_efficiency;
  c.memory_rate = card.memory_bandwidth * card.bandwidth_efficiency;
  c.overhead_s = overhead_s;
  return c;
}

}  // namespace capsim
