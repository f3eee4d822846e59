// A discrete-event simulation of one dynamic-batching server (Triton's dynamic batcher, TF
// Serving's batching): Poisson arrivals of single items, one server, one queue.
//
// Batching rule: when the server is idle it starts a batch as soon as either max_batch items are
// queued or the oldest queued item has waited max_delay; the batch takes up to max_batch items,
// oldest first, and lasts BatchCost::seconds(n). max_delay 0 starts whatever is queued at once.
//
// Contract: deterministic for a given config (seed included); time is integer nanoseconds
// (sim/core/time.h), events are ordered by (time, push order) (sim/core/event_queue.h); every
// arrival is served (the queue drains after the last arrival).
#pragma once

#include <cstdint>
#include <optional>

#include "sim/batchserve/batch_cost.h"
#include "sim/core/stats.h"

namespace capsim {

struct BatchServeConfig {
  BatchCost cost;
  double rate = 1.0;                 // arrivals per second (Poisson); > 0
  int max_batch = 1;                 // >= 1
  double max_delay_s = 0;            // >= 0
  std::int64_t requests = 10000;     // arrivals to generate (when duration_s is unset)
  std::optional<double> duration_s;  // instead: arrivals until this time
  std::uint64_t seed = 0;
};

struct BatchServeResult {
  Samples latency_s;  // per item: arrival -> batch completion
  Samples wait_s;     // per item: arrival -> batch start
  std::int64_t items = 0;
  std::int64_t batches = 0;
  double makespan_s = 0;  // 0 -> last completion
  double busy_s = 0;      // time the server spent on batches

  double throughput() const { return makespan_s > 0 ? items / makespan_s : 0; }
  double utilisation() const { return makespan_s > 0 ? busy_s / makespan_s : 0; }
  double mean_batch() const { return batches > 0 ? static_cast<double>(items) / batches : 0; }
};

// REQUIRES: the config's ranges above (the CLI validates them).
BatchServeResult simulate_batch_serving(const BatchServeConfig& config);

}  // namespace capsim
