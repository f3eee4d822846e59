#include "sim/engine/lora_residency.h"

#include <algorithm>

namespace capsim {

void LoraResidency::load(const LoraConfig& c, StepPlan& plan, ReplicaStats& stats) {
  for (const std::int32_t a : plan.adapters) {
    const auto gpu = std::find(gpu_.begin(), gpu_.end(), a);
    if (gpu != gpu_.end()) {
      gpu_.erase(gpu);
      gpu_.push_back(a);
    } else {
      // Evict the least recently used slot not needed by this step (the scheduler keeps a
      // step's adapters within max_loras, so one exists).
      if (static_cast<int>(gpu_.size()) >= c.max_loras) {
        for (auto it = gpu_.begin(); it != gpu_.end(); ++it) {
          if (std::find(plan.adapters.begin(), plan.adapters.end(), *it) == plan.adapters.end()) {
            gpu_.erase(it);
            break;
          }
        }
      }
      gpu_.push_back(a);
      plan.shape.lora_loads += 1;
      ++stats.lora_loads;
    }
    const auto host = std::find(host_.begin(), host_.end(), a);
    if (host != host_.end()) {
      host_.erase(host);
    } else {
      ++stats.lora_host_misses;
      if (static_cast<int>(host_.size()) >= c.cpu_slots()) host_.erase(host_.begin());
    }
    host_.push_back(a);
  }
}

bool LoraResidency::admissible(std::int32_t adapter, int max_loras, const std::vector<std::int32_t>& running,
                               const std::vector<Sequence>& seqs) {
  if (adapter < 0) return true;
  std::vector<std::int32_t> distinct;
  for (const std::int32_t slot : running) {
    const std::int32_t a = seqs[static_cast<std::size_t>(slot)].req.adapter;
    if (a == adapter) return true;
    if (a >= 0 && std::find(distinct.begin(), distinct.end(), a) == distinct.end()) distinct.push_back(a);
  }
  return static_cast<int>(distinct.size()) < max_loras;
}

}  // namespace capsim
