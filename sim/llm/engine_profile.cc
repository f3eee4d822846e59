#include "sim/llm/engine_profile.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/error.h"
#include "sim/core/yaml_fields.h"

namespace capsim {

EngineProfile EngineCatalogue::load_file(const std::string& path) {
  const YamlDoc doc = YamlDoc::load(path);
  check_keys(doc.root(), path, {"name", "display_name", "references", "overhead", "kernels", "communication",
                                "memory", "request_path", "defaults", "scheduler"});
  const std::vector<std::pair<const char*, std::vector<std::string>>> sections = {
      {"overhead", {"step", "per_sequence"}},
      {"kernels", {"compute_efficiency_scale", "bandwidth_efficiency_scale", "attention_bandwidth_scale",
                   "attention_compute_scale", "moe_dispatch_kernels", "moe_compute_scale", "moe_bandwidth_scale",
                   "measured_kernels"}},
      {"communication", {"allreduce_latency_nvlink", "allreduce_latency_pcie", "allreduce_latency_per_peer"}},
      {"memory", {"runtime", "runtime_tp_extra", "outside_budget", "decoder_per_sequence_vocab"}},
      {"request_path", {"frontend", "frontend_per_prompt_token", "return", "return_per_sequence", "async_scheduling"}},
      {"defaults", {"block_size", "gpu_memory_utilization", "enable_prefix_caching", "enable_chunked_prefill"}},
      {"scheduler", {"policy", "init_new_token_ratio", "min_new_token_ratio_factor", "new_token_ratio_decay_steps",
                     "clip_max_new_tokens", "retract_decode_steps"}}};
  for (const auto& [section, keys] : sections) {
    if (const auto n = doc.find(section)) check_keys(n, doc.where(section), keys);
  }
  using units::Kind;
  EngineProfile e;
  e.file = path;
  e.name = doc.string("name");
  e.display_name = doc.optional_string("display_name").value_or(e.name);
  e.step_overhead_s = doc.quantity("overhead.step", Kind::kTime);
  e.per_sequence_overhead_s = doc.quantity("overhead.per_sequence", Kind::kTime);
  e.compute_efficiency_scale = doc.quantity("kernels.compute_efficiency_scale", std::nullopt);
  e.bandwidth_efficiency_scale = doc.quantity("kernels.bandwidth_efficiency_scale", std::nullopt);
  e.attention_compute_scale = doc.quantity("kernels.attention_compute_scale", std::nullopt);
  e.attention_bandwidth_scale = doc.quantity("kernels.attention_bandwidth_scale", std::nullopt);
  {
    const double k = doc.quantity("kernels.moe_dispatch_kernels", std::nullopt);
    if (!(k >= 0 && k <= 64) || k != std::floor(k)) {
      throw Error(doc.where("kernels.moe_dispatch_kernels") + ": " + std::to_string(k) +
                  " is not a whole number of kernels in [0, 64]");
    }
    e.moe_dispatch_kernels = static_cast<int>(k);
  }
  for (const auto& [field, value] : {std::pair{"kernels.moe_compute_scale", &e.moe_compute_scale},
                                     std::pair{"kernels.moe_bandwidth_scale", &e.moe_bandwidth_scale}}) {
    *value = doc.optional_quantity(field, std::nullopt).value_or(1.0);
    if (!(*value > 0 && *value <= 1.5)) {
      throw Error(doc.where(field) + ": " + std::to_string(*value) + " is outside the accepted range (0, 1.5]");
    }
  }
  e.measured_kernels = doc.has("kernels.measured_kernels") && doc.flag("kernels.measured_kernels");
  e.allreduce_latency_nvlink_s = doc.quantity("communication.allreduce_latency_nvlink", Kind::kTime);
  e.allreduce_latency_pcie_s = doc.quantity("communication.allreduce_latency_pcie", Kind::kTime);
  e.allreduce_latency_per_peer_s =
      doc.optional_quantity("communication.allreduce_latency_per_peer", Kind::kTime).value_or(0);
  if (!(e.allreduce_latency_per_peer_s >= 0) || e.allreduce_latency_per_peer_s > 1e-3) {
    throw Error(doc.where("communication.allreduce_latency_per_peer") + ": " +
                std::to_string(e.allreduce_latency_per_peer_s) +
                " s is outside the accepted range [0, 1 ms]");
  }
  e.runtime_memory_bytes = doc.quantity("memory.runtime", Kind::kBytes);
  e.runtime_memory_tp_extra_bytes = doc.quantity("memory.runtime_tp_extra", Kind::kBytes);
  e.outside_budget_bytes = doc.quantity("memory.outside_budget", Kind::kBytes);
  e.decoder_bytes_per_seq_vocab =
      doc.optional_quantity("memory.decoder_per_sequence_vocab", std::nullopt).value_or(0);
  if (!(e.decoder_bytes_per_seq_vocab >= 0) || e.decoder_bytes_per_seq_vocab > 1000) {
    throw Error(doc.where("memory.decoder_per_sequence_vocab") + ": " +
                std::to_string(e.decoder_bytes_per_seq_vocab) +
                " bytes per sequence slot per vocabulary entry is outside the accepted range [0, 1000]");
  }
  e.frontend_s = doc.quantity("request_path.frontend", Kind::kTime);
  e.frontend_per_prompt_token_s = doc.quantity("request_path.frontend_per_prompt_token", Kind::kTime);
  e.return_s = doc.quantity("request_path.return", Kind::kTime);
  e.return_per_sequence_s = doc.quantity("request_path.return_per_sequence", Kind::kTime);
  e.async_scheduling = doc.flag("request_path.async_scheduling");
  for (const char* f : {"request_path.frontend", "request_path.frontend_per_prompt_token",
                        "request_path.return", "request_path.return_per_sequence"}) {
    const double v = doc.quantity(f, Kind::kTime);
    if (!(v >= 0) || v > 10.0) {
      throw Error(doc.where(f) + ": " + std::to_string(v) + " s is outside the accepted range [0, 10 s]");
    }
  }
  if (doc.has("scheduler.policy")) {
    e.scheduler_policy = doc.string("scheduler.policy");
    if (e.scheduler_policy.empty()) throw Error(doc.where("scheduler.policy") + ": must name a scheduler policy (capsim list)");
  }
  // {field, member, low, high}: each optional, its range checked.
  const struct {
    const char* field;
    double* value;
    double lo, hi;
  } admission[] = {{"scheduler.init_new_token_ratio", &e.init_new_token_ratio, 0, 1},
                   {"scheduler.min_new_token_ratio_factor", &e.min_new_token_ratio_factor, 0, 1},
                   {"scheduler.new_token_ratio_decay_steps", &e.new_token_ratio_decay_steps, 1, 1e9},
                   {"scheduler.clip_max_new_tokens", &e.clip_max_new_tokens, 1, 1e9},
                   {"scheduler.retract_decode_steps", &e.retract_decode_steps, 0, 1e9}};
  for (const auto& a : admission) {
    if (!doc.has(a.field)) continue;
    const double v = doc.quantity(a.field, std::nullopt);
    if (!(v >= a.lo && v <= a.hi)) {
      throw Error(doc.where(a.field) + ": " + std::to_string(v) + " is outside the accepted range [" +
                  std::to_string(a.lo) + ", " + std::to_string(a.hi) + "]");
    }
    *a.value = v;
    e.sources[a.field] = doc.source_of(a.field);
  }
  e.block_size = static_cast<int>(doc.quantity("defaults.block_size", std::nullopt));
  e.gpu_memory_utilization = doc.quantity("defaults.gpu_memory_utilization", std::nullopt);
  e.prefix_caching = doc.flag("defaults.enable_prefix_caching");
  e.chunked_prefill = doc.flag("defaults.enable_chunked_prefill");
  for (const char* f : {"kernels.compute_efficiency_scale", "kernels.bandwidth_efficiency_scale",
                        "kernels.attention_compute_scale", "kernels.attention_bandwidth_scale"}) {
    const double v = doc.quantity(f, std::nullopt);
    if (v <= 0 || v > 1.5) throw Error(doc.where(f) + ": " + std::to_string(v) +
                                       " is outside the accepted range (0, 1.5]");
  }
  if (e.gpu_memory_utilization <= 0 || e.gpu_memory_utilization > 1) {
    throw Error(doc.where("defaults.gpu_memory_utilization") + ": must be in (0, 1]");
  }
  if (e.block_size < 1) throw Error(doc.where("defaults.block_size") + ": must be >= 1");
  for (const char* f : {"overhead.step", "overhead.per_sequence", "memory.runtime",
                        "memory.runtime_tp_extra", "memory.outside_budget", "kernels.compute_efficiency_scale",
                        "kernels.bandwidth_efficiency_scale", "kernels.attention_compute_scale",
                        "kernels.attention_bandwidth_scale", "kernels.moe_dispatch_kernels",
                        "kernels.moe_compute_scale", "kernels.moe_bandwidth_scale", "kernels.measured_kernels",
                        "communication.allreduce_latency_nvlink",
                        "communication.allreduce_latency_pcie",
                        "communication.allreduce_latency_per_peer",
                        "memory.decoder_per_sequence_vocab", "request_path.frontend",
                        "request_path.frontend_per_prompt_token", "request_path.return",
                        "request_path.return_per_sequence", "request_path.async_scheduling"}) {
    e.sources[f] = doc.source_of(f);
  }
  return e;
}

EngineCatalogue EngineCatalogue::load_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw Error(dir + ": engine catalogue directory not found");
  std::vector<std::string> files;
  for (const auto& ent : fs::directory_iterator(dir)) {
    if (ent.path().extension() == ".yaml") files.push_back(ent.path().string());
  }
  std::sort(files.begin(), files.end());
  EngineCatalogue cat;
  for (const auto& f : files) cat.engines_.push_back(load_file(f));
  return cat;
}

std::vector<std::string> EngineCatalogue::names() const {
  std::vector<std::string> out;
  for (const auto& e : engines_) out.push_back(e.name);
  return out;
}

const EngineProfile& EngineCatalogue::find(const std::string& name) const {
  for (const auto& e : engines_) {
    if (e.name == name) return e;
  }
  throw Error(unknown_name_message("engine", name, names()));
}

}  // namespace capsim
