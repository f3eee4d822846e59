#include "sim/cluster/simulation.h"

#include <algorithm>
#include <limits>

#include "sim/cluster/cluster.h"
#include "sim/core/checked.h"
#include "sim/core/error.h"
#include "sim/core/run_limits.h"

namespace capsim {

void check_kv_bookkeeping(const SimulationConfig& cfg, const std::string& offloading_where) {
  constexpr std::int64_t kBlockIds = std::numeric_limits<std::int32_t>::max();
  double gpu_bytes = 0, cpu_bytes = 0, replicas = 0;
  std::int64_t gpu_blocks = 0, cpu_blocks = 0;  // the most per replica, for the message
  double offloading_gib = 0;
  const auto add = [&](const std::vector<ReplicaGroup>& groups) {
    for (const ReplicaGroup& g : groups) {
      const Deployment& d = g.deployment;
      // As Cluster::build_pool plans it; a deployment that does not fit is refused there.
      const MemoryPlan plan = plan_memory(d, 1, cfg.policy == "vllm-v1");
      if (!plan.fits) continue;
      const bool tier = d.limits.kv_offloading_size > 0;
      if (plan.kv_blocks > kBlockIds) {
        throw Error("the KV cache of " + d.model.name + " on " + d.card.name + ": " + std::to_string(plan.kv_blocks) +
                    " blocks per replica; a replica's block ids hold at most " + std::to_string(kBlockIds) +
                    " (a larger --block-size)");
      }
      if (tier && plan.cpu_kv_blocks > kBlockIds) {
        throw Error(offloading_where + ": " + checked::show(d.limits.kv_offloading_size) + " GiB is " +
                    std::to_string(plan.cpu_kv_blocks) + " CPU KV blocks per replica; a replica's block ids hold at most " +
                    std::to_string(kBlockIds) + " (give a smaller size)");
      }
      const double n = static_cast<double>(g.replicas) * d.dp;
      replicas += n;
      gpu_bytes += n * KvBlockManager::bookkeeping_bytes(plan.kv_blocks, d.limits.enable_prefix_caching);
      gpu_blocks = std::max<std::int64_t>(gpu_blocks, plan.kv_blocks);
      if (tier) {
        cpu_bytes += n * CpuKvTier::bookkeeping_bytes(plan.cpu_kv_blocks);
        cpu_blocks = std::max<std::int64_t>(cpu_blocks, plan.cpu_kv_blocks);
        offloading_gib = d.limits.kv_offloading_size;
      }
    }
  };
  add(cfg.groups);
  if (cfg.decode_pool) add(cfg.decode_pool->groups);
  const std::string count = checked::show(replicas) + (replicas == 1 ? " replica" : " replicas");
  const std::string where =
      cpu_bytes >= gpu_bytes
          ? offloading_where + ": " + checked::show(offloading_gib) + " GiB is " + std::to_string(cpu_blocks) +
                " CPU KV blocks per replica, x " + count
          : "the cluster: " + count + " x " + std::to_string(gpu_blocks) + " GPU KV blocks per replica";
  check_run_limit(RunLimit::kKvBookkeepingBytes, gpu_bytes + cpu_bytes, where);
}

SimulationResult simulate(const SimulationConfig& config, Workload& workload) {
  Cluster c(config, workload);
  return c.run();
}

}  // namespace capsim
