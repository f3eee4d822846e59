// Helpers for hand-worked engine and cluster tests:
//   FakeStepCost    a StepCost whose step time is a + b x tokens (default: 10 ms flat), and
//                   which remembers every BatchShape it was asked about, so a test can check
//                   what each step ran;
//   deployment()    a validated Deployment from the real catalogues (cards, models, engines
//                   under CAPSIM_DATA_DIR) whose SchedulerLimits a test then overrides;
//   ScriptedWorkload a fixed list of Requests at given arrival times (for simulate());
//   ReplicaHarness  one Replica driven by hand: requests are delivered when their arrival time
//                   has come, steps begin and end exactly as simulate() does them (every arrival
//                   at an instant is delivered before the next step begins), and an observer
//                   records every token and every finished Sequence.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/core/time.h"
#include "sim/cost/batch_shape.h"
#include "sim/cost/step_cost.h"
#include "sim/engine/policies.h"
#include "sim/engine/replica.h"
#include "sim/hardware/card.h"
#include "sim/llm/deployment.h"
#include "sim/llm/engine_profile.h"
#include "sim/llm/model_spec.h"
#include "sim/workload/request.h"
#include "sim/workload/workload.h"
#include "tests/support/catalogues.h"

#ifndef CAPSIM_DATA_DIR
#error "CAPSIM_DATA_DIR must name the repository root (the build defines it)"
#endif

namespace capsim::test {

inline constexpr SimTime kMs = 1'000'000;  // ns

// ---- Catalogues and deployments ----

using capsim_test::card_catalogue;
using capsim_test::engine_catalogue;
using capsim_test::model_catalogue;

// The engine profile without its request path (no front end, no return delay, synchronous
// scheduling): what the scheduler and KV tests work by hand. Request-path tests use the
// profile as shipped.
inline EngineProfile without_request_path(EngineProfile e) {
  e.frontend_s = e.frontend_per_prompt_token_s = e.return_s = e.return_per_sequence_s = 0;
  e.async_scheduling = false;
  return e;
}

// `model` on one `card` with vLLM's defaults for that card (default_limits), 16-bit weights and
// KV cache of the card's native type, and the engine without its request path unless
// `request_path` is true. Override d.limits afterwards.
inline Deployment deployment(const std::string& model = "llama-3.1-8b",
                             const std::string& card = "h100-sxm", int tp = 1,
                             const std::string& engine = "vllm", bool request_path = false) {
  Deployment d;
  d.model = model_catalogue().find(model);
  d.card = card_catalogue().find(card);
  d.engine = engine_catalogue().find(engine);
  if (!request_path) d.engine = without_request_path(d.engine);
  d.tp = tp;
  d.weights = native_half(d.card);
  d.kv_cache = d.weights;
  d.limits = default_limits(d.card, d.engine);
  d.validate();
  return d;
}

// Limits for hand-worked replica tests: block 16, the given budgets, prefix caching as asked,
// chunked prefill on (vLLM V1).
inline SchedulerLimits limits(int max_num_seqs, int max_num_batched_tokens, bool prefix_caching) {
  SchedulerLimits l;
  l.max_num_seqs = max_num_seqs;
  l.max_num_batched_tokens = max_num_batched_tokens;
  l.block_size = 16;
  l.enable_prefix_caching = prefix_caching;
  l.enable_chunked_prefill = true;
  return l;
}

// ---- A step cost with a known answer ----

class FakeStepCost : public StepCost {
 public:
  // seconds(step) = fixed_s + per_token_s x (prefill tokens + decode tokens).
  explicit FakeStepCost(double fixed_s = 0.010, double per_token_s = 0.0)
      : fixed_s_(fixed_s), per_token_s_(per_token_s) {}

  double seconds(const BatchShape& b) const override {
    return fixed_s_ + per_token_s_ * static_cast<double>(b.tokens());
  }
  StepBreakdown breakdown(const BatchShape& b) const override {
    shapes_.push_back(b);
    StepBreakdown r;
    r.seconds = seconds(b);
    r.overhead_s = r.seconds;
    return r;
  }
  // Every shape costed so far, in order (one per engine step: Replica::begin_step asks once).
  const std::vector<BatchShape>& shapes() const { return shapes_; }

 private:
  double fixed_s_, per_token_s_;
  mutable std::vector<BatchShape> shapes_;
};

// ---- Requests ----

inline Request request(std::uint64_t id, SimTime arrival, std::int64_t prompt, std::int64_t output,
                       std::vector<ContentSegment> segments = {}) {
  Request r;
  r.id = id;
  r.arrival = arrival;
  r.prompt_tokens = prompt;
  r.output_tokens = output;
  r.segments = std::move(segments);
  return r;
}

// A fixed list of requests, all handed to the simulation at start (their arrival times are when
// they happen). Arrival times must be >= 0.
class ScriptedWorkload : public Workload {
 public:
  explicit ScriptedWorkload(std::vector<Request> rs) : requests_(std::move(rs)) {}
  void start(ArrivalSink& sink) override {
    for (const Request& r : requests_) sink.arrive(r);
  }
  std::string describe() const override { return "scripted: " + std::to_string(requests_.size()) + " requests"; }
  const std::vector<Request>& requests() const { return requests_; }

 private:
  std::vector<Request> requests_;
};

// Every request a workload sends when driven as simulate() drives an open loop — start(), then
// on_arrival() for each request it sent (which sends the next) — in arrival order. Bounded by
// `max` requests.
inline std::vector<Request> sent_requests(Workload& w, std::size_t max = 1'000'000) {
  struct Collect : ArrivalSink {
    void arrive(Request r) override { got.push_back(std::move(r)); }
    std::vector<Request> got;
  } sink;
  w.start(sink);
  for (std::size_t i = 0; i < sink.got.size() && sink.got.size() < max; ++i) w.on_arrival(sink.got[i], sink);
  return sink.got;
}

// ---- One replica, stepped by hand ----

struct FinishedSeq {
  std::uint64_t id;
  SimTime arrival, first_scheduled, first_token, finish;
  std::int64_t prompt_tokens, requested_output, generated, prefix_hit_tokens;
  std::int32_t preemptions;
};

class Recorder : public ReplicaObserver {
 public:
  void on_token(const Sequence& s, SimTime now) override { tokens[s.req.id].push_back(now); }
  // Replicas stepped by hand keep implicit decode off (the default): no bulk steps come here.
  void on_decode_step(std::int64_t, SimTime, SimTime) override {
    throw std::logic_error("Recorder: a replica with implicit decode on");
  }
  bool counts(const Sequence&) const override { return true; }
  void on_finish(const Sequence& s, SimTime now) override {
    finished.push_back({s.req.id, s.req.arrival, s.first_scheduled, s.first_token, now,
                        s.req.prompt_tokens, s.req.output_tokens, s.generated,
                        s.prefix_hit_tokens, s.preemptions});
  }
  const FinishedSeq& get(std::uint64_t id) const {
    for (const FinishedSeq& f : finished) {
      if (f.id == id) return f;
    }
    throw std::runtime_error("request " + std::to_string(id) + " did not finish");
  }
  std::map<std::uint64_t, std::vector<SimTime>> tokens;  // id -> time of each token
  std::vector<FinishedSeq> finished;                     // in finishing order
};

class ReplicaHarness {
 public:
  ReplicaHarness(SchedulerLimits lim, std::int64_t kv_blocks, const std::string& policy = "vllm-v1",
                 double fixed_s = 0.010, double per_token_s = 0.0,
                 std::optional<EngineProfile> engine = std::nullopt, KvLayout layout = KvLayout{},
                 CpuTierConfig cpu = CpuTierConfig{})
      : deployment_(deployment()),
        cost_(std::make_shared<FakeStepCost>(fixed_s, per_token_s)) {
    deployment_.limits = lim;
    if (engine) deployment_.engine = *engine;
    replica_ = std::make_unique<Replica>(0, deployment_, cost_, kv_blocks, make_policy(policy),
                                         layout, cpu);
  }

  // Queues a request; it reaches the replica when the clock reaches its arrival time.
  void add(Request r) {
    pending_.push_back(std::move(r));
    std::stable_sort(pending_.begin(), pending_.end(),
                     [](const Request& a, const Request& b) { return a.arrival < b.arrival; });
  }

  // Delivers every request that has arrived by now, then plans one step at now. Returns the
  // step's duration (0 = nothing ran). If nothing can run and requests are still to come, the
  // clock jumps to the next arrival and tries again.
  SimTime begin() {
    for (;;) {
      deliver();
      const SimTime d = replica_->has_work() ? replica_->begin_step(now_) : 0;
      if (d > 0 || pending_.empty()) return d;
      now_ = std::max(now_, pending_.front().arrival);
    }
  }
  // Ends the step begun last, at now + its duration, and delivers arrivals up to then.
  void end(SimTime duration) {
    now_ += duration;
    replica_->end_step(now_, rec_);
    deliver();
  }
  // One whole step; false when nothing could run and nothing is still to come.
  bool step() {
    const SimTime d = begin();
    if (d == 0) return false;
    end(d);
    return true;
  }
  // Steps until nothing is left (bounded, so a stuck scheduler fails instead of hanging).
  int run(int max_steps = 100000) {
    int n = 0;
    while (n < max_steps && step()) ++n;
    return n;
  }

  Replica& replica() { return *replica_; }
  const Recorder& rec() const { return rec_; }
  const FakeStepCost& cost() const { return *cost_; }
  SimTime now() const { return now_; }
  // Request ids in the waiting queue, front first.
  std::vector<std::uint64_t> waiting_ids() {
    std::vector<std::uint64_t> ids;
    for (const std::int32_t slot : replica_->waiting()) ids.push_back(replica_->seq(slot).req.id);
    return ids;
  }
  std::vector<std::uint64_t> running_ids() {
    std::vector<std::uint64_t> ids;
    for (const std::int32_t slot : replica_->running()) ids.push_back(replica_->seq(slot).req.id);
    return ids;
  }

 private:
  void deliver() {
    while (!pending_.empty() && pending_.front().arrival <= now_) {
      replica_->add_request(pending_.front(), now_);
      pending_.erase(pending_.begin());
    }
  }

  Deployment deployment_;
  std::shared_ptr<FakeStepCost> cost_;
  std::unique_ptr<Replica> replica_;
  Recorder rec_;
  std::vector<Request> pending_;
  SimTime now_ = 0;
};

}  // namespace capsim::test
