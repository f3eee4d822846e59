// A serving cluster simulated live: the same discrete-event simulation as simulate()
// (simulation.h: routers, front end, replicas' continuous batching, KV cache, return path),
// driven from outside in step with a clock — requests are submitted as they come, time is
// advanced to a given instant, and each request's tokens come back as client events at the
// simulated times the client would receive them. Requests can be aborted (the client went away),
// which frees their KV blocks as vLLM's abort does. Used by `capsim emulate`, which maps the
// wall clock onto simulated time.
//
// Given the same requests at the same times, a live run produces the same token times as
// simulate() (tests/cluster/live_simulation_test.cc checks this); only aborts differ from a batch
// run. Not thread-safe: one thread drives it.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "sim/cluster/simulation.h"

namespace capsim {

// What the client of one request sees, at the time it sees it.
struct LiveEvent {
  enum Kind : std::uint8_t {
    kToken,     // one more output token; `generated` = tokens so far (1 = the first)
    kFinished,  // the last token has arrived (its kToken came just before, same time)
    kRejected,  // refused before queueing: prompt + output longer than max_model_len
  };
  Kind kind;
  std::uint64_t id;
  SimTime time;             // ns of simulated time
  std::int64_t generated;   // output tokens so far
  std::uint32_t replica;    // the replica that served (or refused) it
};

// One replica's state now, for gauges (vLLM's /metrics per engine).
struct LiveReplicaState {
  std::uint32_t index = 0;
  std::int64_t running = 0, waiting = 0;
  std::int64_t kv_used_blocks = 0, kv_blocks = 0;
  // Since the start: preemptions, prompt tokens computed (recomputation included), prefix-cache
  // hit and looked-up prompt tokens, engine steps.
  std::int64_t preemptions = 0, prompt_tokens_computed = 0;
  std::int64_t prefix_hit_tokens = 0, prefix_lookup_tokens = 0, steps = 0;
};

class LiveSimulation {
 public:
  // Builds the cluster as simulate() does; throws capsim::Error when a deployment does not fit.
  // `config.warmup`, `stop_arrivals`, `slo` and `progress` play no part in a live run.
  explicit LiveSimulation(SimulationConfig config);
  ~LiveSimulation();
  LiveSimulation(const LiveSimulation&) = delete;
  LiveSimulation& operator=(const LiveSimulation&) = delete;

  // The simulated time reached (the last advance_to()).
  SimTime now() const;
  // The longest request (prompt + output tokens) every replica serves: the smallest
  // max_model_len of the cluster. Longer ones are rejected (LiveEvent::kRejected).
  std::int64_t max_model_len() const;
  // Sends `r` at r.arrival. REQUIRES: r.arrival >= now(), r.id not used by a request still live.
  void submit(Request r);
  // The client of request `id` went away at now(): the request leaves the front end, its queue
  // or its batch and frees its KV blocks; no event of it is returned any more. A step in flight
  // that holds it runs to its end first (vLLM aborts between steps). Returns false (and does
  // nothing) for an id that is unknown or already ended.
  bool abort(std::uint64_t id);
  // Runs every simulation event at or before `t` and returns the client events at or before `t`,
  // in time order (equal times in the order the simulation produced them). REQUIRES: t >= now().
  std::vector<LiveEvent> advance_to(SimTime t);
  // When the next thing happens — a simulation event or a client event not yet returned — or
  // nullopt when nothing is pending (the cluster is idle).
  std::optional<SimTime> next_time() const;
  std::vector<LiveReplicaState> replicas() const;
  std::int64_t in_flight() const;  // submitted, neither ended nor aborted nor rejected

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace capsim
