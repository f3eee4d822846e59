// The capacity search behind `capsim plan`, `capacity` and `compare`: simulate a scenario on a
// deployment, check it against SLOs, and find the fewest replicas (or the most load) that meet
// them. Replica counts are found by doubling then bisecting, which assumes that more replicas
// never make latency worse (true for the routers capsim has, up to simulation noise).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/cli/scenario.h"

namespace capsim::plan {

struct SloVerdict {
  bool met = false;
  std::string worst;      // the SLO closest to (or furthest past) its bound, "ttft_p95"
  double worst_ratio = 0; // value / bound of that SLO (> 1 = violated)
};

// Checks a result against the scenario's SLOs and an optional minimum goodput share.
SloVerdict check_slos(const cli::ScenarioSpec& spec, const SimulationResult& r,
                      std::optional<double> min_goodput);

// What limits a deployment, read from a run: KV capacity, memory bandwidth, compute,
// communication, or queueing.
std::string binding_resource(const SimulationResult& r);

struct Evaluation {
  int replicas = 0;
  SimulationResult result;
  SloVerdict verdict;
  bool from_share = false;  // result is one replica under 1/replicas of the load

  // The cluster's throughput: a share's scaled by the replica count.
  double output_throughput() const { return result.output_throughput * (from_share ? replicas : 1); }
  double request_throughput() const { return result.request_throughput * (from_share ? replicas : 1); }
};

// Runs the scenario (replicas overridden). Throws capsim::Error for bad input.
Evaluation evaluate(const cli::ScenarioSpec& spec, int replicas, std::optional<double> min_goodput);

// The scenario's load divided by `parts`: users, concurrency, rate and request count divided
// (rounded up), a trace slowed down by `parts`. Replicas behind a balancing router serve about
// an equal share each, so one replica under 1/r of the load stands for r replicas at a 1/r of
// the simulation cost.
cli::ScenarioSpec share_of_load(const cli::ScenarioSpec& spec, int parts);

// Like evaluate(), on one replica with 1/replicas of the load (see share_of_load).
Evaluation evaluate_share(const cli::ScenarioSpec& spec, int replicas,
                          std::optional<double> min_goodput);

struct ReplicaSearch {
  bool found = false;
  Evaluation best;                 // the fewest replicas that meet the SLOs (if found)
  std::optional<Evaluation> below; // one replica fewer (why more are needed), when > 1
  int evaluations = 0;
};

// Fewest replicas in 1..max_replicas meeting the SLOs, searched on load shares
// (evaluate_share); `verify` re-runs the answer as a whole cluster behind its router and, if
// that misses the SLOs, keeps adding replicas until it meets them.
ReplicaSearch search_replicas(const cli::ScenarioSpec& spec, int max_replicas,
                              std::optional<double> min_goodput, bool verify);

// Runs `jobs` on up to `threads` threads; results are stored by index, so the output does not
// depend on the thread count. `progress(done, total)` is called from a watcher thread.
void run_parallel(std::size_t jobs, unsigned threads, const std::function<void(std::size_t)>& job,
                  const std::function<void(std::size_t, std::size_t)>& progress);

// Threads to use: $CAPSIM_THREADS, else the hardware's.
unsigned default_threads();

}  // namespace capsim::plan
