// Multi-LoRA residency of one replica: which adapters sit in the GPU slots (at most max_loras)
// and in the host cache (at most max_cpu_loras), least recently used first, as vLLM's
// LRUCacheWorkerLoRAManager keeps them.
//
// Owns: the two LRU lists. Invariant: a step's adapters (StepPlan::adapters) are never more
// than max_loras, because admission keeps the running batch within max_loras distinct adapters
// (admissible); so load() always finds a slot to evict that the step does not need.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/engine/replica_stats.h"
#include "sim/engine/sequence.h"
#include "sim/llm/lora.h"

namespace capsim {

class LoraResidency {
 public:
  // Makes the plan's adapters resident in the GPU slots (LRU), counting the loads in the plan's
  // shape and in `stats` (lora_loads, lora_host_misses).
  void load(const LoraConfig& c, StepPlan& plan, ReplicaStats& stats);
  // Whether admitting a sequence of adapter `adapter` (-1: none) keeps the running sequences
  // (`running`, slots into `seqs`) within `max_loras` distinct adapters (vLLM V1's scheduler
  // skips a waiting request that would exceed it). Counts every running sequence's adapter, so
  // that no later step can exceed the GPU slots either.
  static bool admissible(std::int32_t adapter, int max_loras, const std::vector<std::int32_t>& running,
                         const std::vector<Sequence>& seqs);

 private:
  std::vector<std::int32_t> gpu_, host_;  // most recently used last
};

}  // namespace capsim
