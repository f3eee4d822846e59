// What one replica counts over a run (ReplicaStats) and its sampled timeline. Filled by the
// replica only (engine/replica.h); read by the cluster's summary (cluster/simulation.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "sim/core/stats.h"
#include "sim/core/time.h"
#include "sim/core/weighted_samples.h"

namespace capsim {

// One point of a replica's timeline: its state at the start of an engine step.
struct TimelineSample {
  double time_s = 0;
  double kv_used_fraction = 0;
  std::int32_t running = 0;
  std::int32_t waiting = 0;
};

struct ReplicaStats {
  StreamingStats step_seconds;
  StreamingStats batch_tokens;
  StreamingStats batch_sequences;
  WeightedSamples step_ms_distribution;         // every step's duration, ms
  WeightedSamples batch_sequences_distribution; // every step's sequence count
  TimeWeightedStats kv_used_fraction;
  TimeWeightedStats running;
  TimeWeightedStats waiting;
  std::int64_t steps = 0;
  std::int64_t skipped_steps = 0;  // of them, run by fast_forward without the event loop (not a result)
  std::int64_t preemptions = 0;
  std::int64_t prompt_tokens_computed = 0;  // incl. recomputation
  std::int64_t prefix_hit_tokens = 0;
  std::int64_t prefix_lookup_tokens = 0;
  // Speculative decoding: decodes that verified drafts, the drafts verified, those accepted.
  std::int64_t spec_verifies = 0, spec_drafts = 0, spec_accepted = 0;
  // Multi-LoRA: adapters copied to a GPU slot; of them, not in the host cache (max_cpu_loras).
  std::int64_t lora_loads = 0, lora_host_misses = 0;
  // CPU KV tier (--kv-offloading-size): prompt tokens found there at first admission (beyond
  // the GPU prefix hits), loads started and the blocks they moved, and the time requests spent
  // waiting for their load (from the step that started it to the step that admits them).
  std::int64_t cpu_hit_tokens = 0, cpu_loads = 0, cpu_loaded_blocks = 0;
  double cpu_load_wait_s = 0;
  // The tier's own counts, copied at close_stats: blocks stored, evicted, refused (no room).
  std::int64_t cpu_stored_blocks = 0, cpu_evictions = 0, cpu_refused_blocks = 0;
  double busy_seconds = 0, compute_s = 0, memory_s = 0, communication_s = 0, overhead_s = 0;
  double flops = 0, bytes = 0;  // per GPU
  // Sampled state over time, for plots: at most one sample per `timeline_interval` (1 simulated
  // second at first), taken at the first step (or arrival) at or after each interval boundary.
  // Bounded: past kMaxTimelineSamples every other sample is dropped and the interval doubles.
  static constexpr std::size_t kMaxTimelineSamples = 4096;
  std::vector<TimelineSample> timeline;
  SimTime timeline_interval = kNsPerSecond;
  SimTime timeline_next = 0;
};

}  // namespace capsim
