// The discrete-event cluster behind simulate() (cluster/simulation.h) and LiveSimulation
// (cluster/live_simulation.h); internal to sim/cluster. Split by what it does:
//   cluster.cc          building the pools, the event loop (one instant at a time, with
//                       skip-ahead), arrivals, front end, P/D hand-off, aborts and timeouts,
//                       early stops
//   cluster_summary.cc  the end of a run: invariants and the SimulationResult
//   live_simulation.cc  live mode: the cluster driven by LiveSimulation step by step
//
// Contract: one Cluster runs one workload once (run()) or is driven live (go_live, then
// submit/advance_to/abort), never both. It is the observer of its replicas: replicas report
// tokens and completions through on_token/on_finish/on_decode_step while end_step runs, with
// current_replica_ naming the replica whose step ended. All events at one instant are processed
// before idle replicas begin their next step, so requests arriving together are scheduled
// together; events at equal times keep their push order (EventQueue), so the run is
// deterministic and skip-ahead on or off gives byte-identical results.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "sim/cluster/live_simulation.h"
#include "sim/cluster/router.h"
#include "sim/cluster/simulation.h"
#include "sim/core/event_queue.h"
#include "sim/core/invariant.h"
#include "sim/engine/block_hash.h"

namespace capsim {

class Cluster : public ArrivalSink, public ReplicaObserver {
  // kArrival: the client sends a request; kEngineArrival: it reaches its replica's engine core
  // after the front end (docs/cost-model.md#request-path); kStepDone: a replica's step ends;
  // kTimeout: the client gives up on a request (SimulationConfig::request_timeout; payload: its id).
  enum EventKind : std::uint32_t { kArrival = 0, kStepDone = 1, kEngineArrival = 2, kTimeout = 3 };
  // Step ends (one per replica at most) and engine arrivals (requests in the front end) are few at
  // once: they go through EventQueue::push_few, apart from the arrivals a closed loop's thinking
  // users hold (hundreds), and come out in the same order.
 public:
  Cluster(const SimulationConfig& cfg, Workload& w);

  // Builds pool `p`'s replicas (0: the only pool, or the prefill pool; 1: the decode pool).
  void build_pool(int p, const std::vector<ReplicaGroup>& groups);

  void arrive(Request r) override {
    if (cfg_.adapters.count > 0 && r.adapter < 0) r.adapter = cfg_.adapters.adapter_of(r.id);
    const SimTime at = r.arrival;
    queue_.push(at, kArrival, 0, hold(std::move(r)));
  }

  void on_token(const Sequence& s, SimTime now) override {
    if (live_) {
      live_token(s, now);
      return;
    }
    metrics_.on_token(s, now);
  }

  void on_decode_step(std::int64_t counted, SimTime previous, SimTime delivered) override {
    metrics_.on_decode_step(counted, previous, delivered);
  }
  bool counts(const Sequence& s) const override { return metrics_.counted(s.req); }

  void on_finish(const Sequence& s, SimTime now) override;

  SimulationResult run();

  // ---- Live mode (LiveSimulation, live_simulation.h): the cluster driven step by step ----

  // From now on tokens, completions and rejections go to `out` (as client events) instead of
  // the batch metrics, and the request-count backstop no longer applies (a live run is open-ended).
  void go_live(std::vector<LiveEvent>* out);
  SimTime live_now() const { return live_now_; }
  std::optional<SimTime> next_event_time() const {
    if (queue_.empty()) return std::nullopt;
    return queue_.top().time;
  }
  // Processes every event at or before `t` (>= live_now()), instant by instant.
  void advance_to(SimTime t);
  void submit(Request r);
  // See LiveSimulation::abort. Returns whether `id` was live.
  bool abort(std::uint64_t id);
  const std::vector<std::unique_ptr<Replica>>& replicas() const { return pools_[0]; }
  std::int64_t max_model_len() const { return *std::min_element(max_len_.begin(), max_len_.end()); }
  std::int64_t in_flight() const { return in_flight_; }

 private:
  // Processes every event at `now` (the earliest pending time), then starts a step on each idle
  // replica that an event touched. Returns the number of events processed.
  std::uint64_t process_instant(SimTime now);

  // Replica `i` begins its next step at `now` if it is idle and has work (with the other ranks
  // of its engine when they step together).
  void start_step(std::uint32_t i, SimTime now);

  // DP attention with expert parallelism: the DP ranks of one engine step together
  // (lockstep_step_seconds, sim/cost/expert_parallel.h). Engine `e` begins its next step at `now`
  // unless a rank's step is in flight or no rank can run anything: every rank plans its step,
  // ranks with nothing to run take part with a dummy batch, and every rank that plans one
  // ends at the same time, appended to started_ in rank order.
  void start_lockstep(std::uint32_t e, SimTime now);

  void live_token(const Sequence& s, SimTime now);
  void live_finish(const Sequence& s, SimTime now);

  void handle_arrival(std::uint64_t slot, SimTime now);

  // A prefill replica finished request `s` (its one token reached the proxy at `now`): the proxy
  // sends the original request to a decode replica, which pulls the prompt's KV over the link
  // and recomputes the last prompt token to sample the first output token (disaggregation.h).
  // The request reaches the decode engine after its front end and the transfer.
  void hand_off(const Sequence& s, SimTime now);

  void handle_engine_arrival(std::uint32_t target, std::uint64_t slot, SimTime now);

  // The request reaches replica `target`'s engine core at `now`.
  void deliver(std::uint32_t target, Request r, SimTime now) {
    if (live_ || timeouts_on()) where_[r.id] = target;
    replicas_[target]->add_request(std::move(r), now);
    kick_[target] = 1;
  }

  // Takes back the request held in `slot` (see hold()).
  Request take(std::uint64_t slot) {
    Request r = std::move(pending_[slot]);
    free_pending_.push_back(slot);
    return r;
  }

  // Keeps a request in `pending_` until its event fires; returns its slot.
  std::uint64_t hold(Request r) {
    std::uint64_t slot;
    if (!free_pending_.empty()) {
      slot = free_pending_.back();
      free_pending_.pop_back();
      pending_[slot] = std::move(r);
    } else {
      slot = pending_.size();
      pending_.push_back(std::move(r));
    }
    return slot;
  }

  void handle_step_done(std::uint32_t i, SimTime now);

  // Aborts that waited for replica `i`'s step to end (a request that finished in that step is
  // already gone: abort() finds nothing).
  void apply_step_aborts(std::uint32_t i, SimTime now);

  bool timeouts_on() const { return cfg_.request_timeout.has_value() && !live_; }

  // The engine lets go of request `id` (its client left): in the front end it is dropped when it
  // reaches its replica, queued or running at once (Replica::abort: its KV blocks return), in a
  // step in flight when that step ends (apply_step_aborts; a request that finishes in that step
  // is already gone). Returns the replica it left at once, whose freed KV may let a waiting
  // request in (the caller starts its next step).
  std::optional<std::uint32_t> drop(std::uint64_t id, SimTime now);

  // The client of request `id` gives up at `now` (SimulationConfig::request_timeout) unless it
  // already has its answer. The request ends here for the metrics and the workload (a closed-loop
  // user thinks and asks again); the engine drops it where it is: in the front end when it
  // reaches its replica, in the queue or running at once (vLLM's abort: its KV blocks return),
  // and in a step in flight when that step ends (finishing in that step changes nothing: the
  // client has left).
  void handle_timeout(std::uint64_t id, SimTime now);

  // SimulationConfig::early_stop, after each measured completion: counts, per rule, the measured
  // requests over kFactor x the bound; stops the run when they exceed twice the share the
  // quantile allows among at least kMinRequests completions.
  void check_early_stop(SimTime now);

  // At the end nothing is in flight: every arrived request finished or was rejected once, and
  // every KV block is back in its replica's free queue.
  void check_end_invariants() const;

  SimulationResult finish(SimTime end);

  const SimulationConfig& cfg_;
  Workload& workload_;
  MetricsCollector metrics_;
  std::unique_ptr<Router> router_;
  std::vector<std::unique_ptr<Deployment>> deployments_;
  // Owners of the replicas by pool (1: the decode pool, empty unless disaggregated); replicas_
  // indexes them all, the prefill (or only) pool first.
  std::vector<std::unique_ptr<Replica>> pools_[2];
  std::vector<Replica*> replicas_;
  std::uint32_t offset_[2] = {0, 0};
  std::unique_ptr<Router> decode_router_;
  // Prefix caching on some replica: a user's next turn starts with the block hashes of the
  // previous one (exactly those a replica would compute; only hashing work is saved).
  bool hash_sessions_ = false;
  SessionHashCache session_hashes_;
  std::int64_t decode_max_len_ = 0;
  std::unordered_map<std::uint64_t, std::int64_t> decode_output_;  // id -> output tokens, while prefilling
  Samples kv_transfer_, handoff_;
  double kv_bytes_ = 0;
  std::vector<std::int64_t> max_len_;
  std::vector<MemoryPlan> plans_;
  std::vector<char> kick_;
  // Engines whose DP ranks step together (start_lockstep): their first replica, rank count and
  // the step time of an idle rank's dummy batch; lockstep_of_[i] is replica i's engine, -1 for
  // a replica that steps alone.
  struct LockstepEngine {
    std::uint32_t first = 0, ranks = 0;
    double dummy_s = 0;
  };
  std::vector<LockstepEngine> lockstep_;
  std::vector<std::int32_t> lockstep_of_;
  std::vector<std::pair<std::uint32_t, SimTime>> started_;  // replicas whose step began now, its end
  EventQueue queue_;
  std::vector<Request> pending_;
  std::vector<std::uint64_t> free_pending_;
  std::uint32_t current_replica_ = 0;
  std::int64_t in_flight_ = 0, max_in_flight_ = 0, arrived_ = 0;
  std::vector<std::int64_t> over_;      // per early-stop rule: measured requests over kFactor x bound
  std::string stopped_, stopped_slo_;  // set when an early-stop rule ended the run
  // Live mode, and where_/undelivered_aborts_/step_aborts_ also with request_timeout (empty otherwise).
  std::vector<LiveEvent>* live_ = nullptr;
  SimTime live_now_ = 0;
  std::unordered_set<std::uint64_t> live_ids_;             // submitted, not yet ended or aborted
  std::unordered_map<std::uint64_t, std::uint32_t> where_;  // delivered id -> replica
  std::unordered_set<std::uint64_t> undelivered_aborts_;   // dropped before reaching a replica
  std::unordered_map<std::uint32_t, std::vector<std::uint64_t>> step_aborts_;  // replica -> ids
  // SimulationConfig::request_timeout only (empty otherwise): requests whose client still waits
  // (with where_ telling their replica once delivered; drop() lets go of the others).
  std::unordered_map<std::uint64_t, Request> waiting_clients_;
  std::size_t timeouts_queued_ = 0;  // kTimeout events in queue_
#if CAPSIM_INVARIANTS_ON
  std::unordered_set<std::uint64_t> ended_;  // ids of requests that finished or were rejected
  std::int64_t finished_all_ = 0, rejected_all_ = 0, timed_out_all_ = 0;  // warm-up ones included
#endif
};

}  // namespace capsim
