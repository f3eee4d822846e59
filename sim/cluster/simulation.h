// The discrete-event simulation of a serving cluster: replicas (each one TP group, possibly of
// different card types) behind a router, fed by a workload. Events: request arrivals and the
// end of each replica's engine step. All events at one instant are processed before idle
// replicas start their next step, so requests arriving together are scheduled together.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/core/cancel.h"
#include "sim/engine/replica.h"
#include "sim/hardware/kv_link.h"
#include "sim/llm/deployment.h"
#include "sim/llm/memory_plan.h"
#include "sim/metrics/metrics.h"
#include "sim/metrics/steady_state.h"
#include "sim/workload/workload.h"

namespace capsim {

struct ReplicaGroup {
  Deployment deployment;
  int replicas = 1;
};

// A percentile SLO a run may stop at once it has missed it decisively (capsim plan's load-share
// searches, plan::evaluate): after at least kMinRequests measured completions, when more than
// twice the allowed share of them (2 x (1 - quantile)) took over kFactor x the bound, the run ends
// there. Then the quantile of the requests completed so far is already over 3x the bound; a
// heuristic, not a proof, that the full run would miss it too (its later requests would all have
// to be fast). The planner's tests compare answers with and without it.
struct EarlyStop {
  static constexpr double kFactor = 3.0;
  static constexpr std::int64_t kMinRequests = 200;
  enum Metric { kTtft, kTpot, kE2el };
  std::string slo;  // "ttft_p95"
  Metric metric = kTtft;
  double quantile = 0.95;
  double bound_s = 0;
};

// Prefill/decode disaggregation (cluster/disaggregation.h): the decode pool and the link its KV
// arrives over. SimulationConfig::groups are then the prefill pool.
struct DecodePool {
  std::vector<ReplicaGroup> groups;
  KvLink link;
};

struct SimulationConfig {
  std::vector<ReplicaGroup> groups;
  std::optional<DecodePool> decode_pool;
  std::string router = "least-outstanding";
  std::string policy = "vllm-v1";
  SimTime warmup = 0;
  // Arrivals after this time are not sent (closed-loop users stop); in-flight requests finish.
  std::optional<SimTime> stop_arrivals;
  RequestSlo slo;
  bool progress = false;  // progress line on stderr for runs longer than a second
  // Set by a front end to stop the run (checked every 1024 event times; throws Cancelled).
  CancelFlag cancel;
  // Skip ahead over quiet decode stretches in closed form (Replica::fast_forward). Results are
  // byte-identical either way; false steps one by one (tests compare the two).
  bool skip_ahead = true;
  // Memory flat in the length of the run apart from the per-request records: the per-step
  // distributions (ITL, step time, batch size) go to bounded histograms (sim/core/bounded_samples.h:
  // counts, min, max and the mean as before; percentiles within 0.1%; std to rounding) instead of
  // keeping every step's value. Off: every number exact, ~0.4 KB more per request (issue #12's
  // workload: 610 against 232 bytes a request, docs/scale.md).
  bool bounded_memory = false;
  // Multi-LoRA: which adapter each arriving request names (count 0 = none; llm/lora.h).
  AdapterMix adapters;
  // Empty: the run goes to its end. Otherwise it may end early (EarlyStop,
  // SimulationResult::stopped_early); never in live mode.
  std::vector<EarlyStop> early_stop;
  // The client gives up on a request this long after sending it unless its last token has
  // arrived (an HTTP client's total timeout: aiohttp's default is 300 s). The request is aborted
  // wherever it is (front end, queue, running: vLLM aborts on disconnect, freeing its KV) and
  // counted in SimulationResult::timed_out, not in the latencies, like a benchmark client's
  // failed requests. Unset: clients wait forever. Aggregated serving only; not in live mode
  // (live clients abort by themselves).
  std::optional<SimTime> request_timeout;
};

struct ReplicaSummary {
  std::uint32_t index;
  std::string card;
  int tp;
  std::int64_t kv_blocks;
  std::int64_t kv_tokens;
  ReplicaStats stats;
  MemoryPlan memory;
};

// The cluster at one instant of its timeline: KV-cache use averaged over replicas, requests
// running and waiting summed over replicas.
struct ClusterSample {
  double time_s = 0;
  double kv_used_fraction = 0;
  double running = 0;
  double waiting = 0;
};

// A disaggregated run's handoffs (counted requests): the KV each moved and how long the move took.
struct PdSummary {
  std::size_t prefill_replicas = 0;  // the first prefill_replicas of `replicas` are the prefill pool
  std::string link;
  Percentiles kv_transfer;           // seconds: link latency + bytes / bandwidth
  double mean_kv_bytes = 0;          // bytes per request
  Percentiles handoff;               // seconds from the client's request to the decode engine's arrival
};

struct SimulationResult {
  std::vector<RequestRecord> records;
  Percentiles ttft, tpot, itl, e2el, queue;
  // TTFT's other parts (RequestRecord): front end, prompt computation, return of the first token.
  Percentiles frontend, prefill, first_token_return;
  double duration_s = 0;        // first counted arrival .. last counted completion
  double simulated_s = 0;       // the whole simulated time
  std::int64_t completed = 0, rejected = 0, arrived = 0;
  std::int64_t timed_out = 0;   // measured requests whose client gave up (request_timeout)
  std::int64_t total_input_tokens = 0, total_output_tokens = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  double request_goodput = 0;   // requests/s meeting every SLO
  double goodput_fraction = 0;  // share of completed requests meeting every SLO
  std::int64_t max_concurrent_requests = 0;
  std::int64_t preemptions = 0;
  double prefix_hit_rate = 0;   // cached prompt tokens / prompt tokens looked up
  // The wait asynchronous scheduling adds to a request that arrives while others run: one
  // mean step (0 for a synchronous engine). Part of `queue`, but not queueing behind others.
  double scheduling_lag_s = 0;
  std::int64_t steps = 0;
  std::vector<ReplicaSummary> replicas;
  // On a grid of at most ~4096 points, one simulated second apart or coarser, from the
  // replicas' sampled timelines (ReplicaStats::timeline), each carried forward to the grid.
  std::vector<ClusterSample> timeline;
  // Warm-up transient left by --warmup (MSER-5), 95% intervals (batch means), warnings.
  SteadyState steady;
  // Why the run ended before its workload did (SimulationConfig::early_stop), naming the SLO
  // ("ttft_p95: ..."); empty when it ran to the end. Everything above then covers the requests
  // completed until then.
  std::string stopped_early;
  std::string stopped_slo;  // "ttft_p95", or empty
  std::optional<PdSummary> pd;  // serving: pd-disaggregated only
};

// REQUIRES: every deployment validated. Throws capsim::Error when a deployment does not fit.
SimulationResult simulate(const SimulationConfig& config, Workload& workload);

// The memory the KV caches' bookkeeping of `config` takes once full, over every replica of every
// pool (KvBlockManager::bookkeeping_bytes, CpuKvTier::bookkeeping_bytes), checked against
// RunLimit::kKvBookkeepingBytes from the deployments alone: simulate() checks it before building
// any replica, a front end may check earlier to name its own field. The message names
// `offloading_where` (--kv-offloading-size, or a scenario's file and field) when the CPU tier is
// the larger part, else the cluster's replicas. A block count past the 32-bit block ids is
// refused even with the limits lifted. Throws capsim::Error.
void check_kv_bookkeeping(const SimulationConfig& config,
                          const std::string& offloading_where = "--kv-offloading-size");

}  // namespace capsim
