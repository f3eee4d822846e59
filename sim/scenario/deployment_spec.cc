#include "sim/scenario/deployment_spec.h"

#include "sim/scenario/catalogues.h"

namespace capsim::scenario {

bool is_engine_file(const std::string& engine) {
  return engine.size() > 5 && engine.compare(engine.size() - 5, 5, ".yaml") == 0;
}

Deployment DeploymentSpec::resolve() const {
  Deployment d;
  d.card = cards().find(card);
  d.model = models().find(model);
  // A path to an engine YAML (calibration/engines format) runs a profile outside the catalogue.
  d.engine = is_engine_file(engine) ? EngineCatalogue::load_file(engine) : engines().find(engine);
  d.tp = tp;
  const Precision half = native_half(d.card);
  d.weights = weights == "auto" ? half : parse_precision(weights, "--weights");
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
