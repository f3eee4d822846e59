#include "sim/scenario/deployment_spec.h"

#include "sim/hardware/precision_support.h"
#include "sim/scenario/catalogues.h"

namespace capsim::scenario {

bool is_engine_file(const std::string& engine) {
  return engine.size() > 5 && engine.compare(engine.size() - 5, 5, ".yaml") == 0;
}

Deployment DeploymentSpec::resolve() const {
  Deployment d;
  d.card = find_card(card);
  d.model = find_model(model);
  // A path to an engine YAML (calibration/engines format) runs a profile outside the catalogue.
  d.engine = is_engine_file(engine) ? EngineCatalogue::load_file(engine) : find_engine(engine);
  d.tp = tp;
  const Precision half = native_half(d.card);
  if (weights == "auto") {
    // As vLLM loads a checkpoint (its quantization_config decides, not --dtype): gpt-oss's
    // mxfp4 experts beside bf16 attention; DeepSeek-V3's fp8. Where the card has no kernel for
    // the shipped format the 16-bit weights are used, and the memory plan says whether they fit.
    d.weights = half;
    if (d.model.checkpoint_quant == "mxfp4" &&
        !precision_unsupported(d.card, Precision::kMxfp4, half)) {
      d.expert_weights = Precision::kMxfp4;
    } else if (d.model.checkpoint_quant == "fp8" &&
               !precision_unsupported(d.card, Precision::kFp8, half)) {
      d.weights = Precision::kFp8;
    }
  } else {
    d.weights = parse_precision(weights, "--weights");
  }
  if (kv_cache == "auto") {
    d.kv_cache = (d.weights == Precision::kFp32) ? Precision::kFp32 : half;
  } else {
    d.kv_cache = parse_precision(kv_cache, "--kv-cache");
  }
  d.limits = default_limits(d.card, d.engine);
  if (max_num_seqs) d.limits.max_num_seqs = *max_num_seqs;
  if (max_num_batched_tokens) d.limits.max_num_batched_tokens = *max_num_batched_tokens;
  if (block_size) d.limits.block_size = *block_size;
  if (gpu_memory_utilization) d.limits.gpu_memory_utilization = *gpu_memory_utilization;
  if (max_model_len) d.limits.max_model_len = *max_model_len;
  if (async_scheduling) d.engine.async_scheduling = *async_scheduling;
  d.validate();
  return d;
}

}  // namespace capsim::scenario
