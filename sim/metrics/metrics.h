// Per-request timings and their summaries, named as vLLM's `bench serve` names them
// (vllm-v1-notes.md section 6): TTFT, TPOT = (E2E - TTFT) / (output - 1), ITL (pooled gaps
// between tokens), E2EL; percentiles interpolate linearly like numpy.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/stats.h"
#include "sim/core/time.h"
#include "sim/engine/replica.h"
#include "sim/core/weighted_samples.h"

namespace capsim {

// Service-level objectives, checked per request (like vLLM's --goodput): a request is good when
// every given bound holds.
struct RequestSlo {
  std::optional<double> ttft_s, tpot_s, e2el_s;
  bool any() const { return ttft_s || tpot_s || e2el_s; }
};

// TTFT = frontend_s + queue_s + prefill_s + return_s: the API server's work before the engine
// core has the request, the wait until a step first schedules it (including the step in flight
// and, with asynchronous scheduling, the one already formed), the steps that compute its prompt,
// and the return path of the first token to the client (docs/cost-model.md#request-path).
struct RequestRecord {
  std::uint64_t id;
  double arrival_s, frontend_s, queue_s, prefill_s, return_s, ttft_s, e2el_s, tpot_s;
  std::int64_t prompt_tokens, output_tokens, prefix_hit_tokens;
  std::int32_t preemptions;
  std::uint32_t replica;
};

struct Percentiles {
  double mean = 0, median = 0, std = 0, p90 = 0, p95 = 0, p99 = 0, min = 0, max = 0;
  std::size_t count = 0;
};
Percentiles summarize(const Samples& s);
Percentiles summarize(const WeightedSamples& s);

class MetricsCollector {
 public:
  explicit MetricsCollector(SimTime warmup_end) : warmup_end_(warmup_end) {}
  // Before the first token: the inter-token gaps go to a bounded histogram
  // (SimulationConfig::bounded_memory).
  void bound_itl_samples() { itl_.bound_memory(); }
  void on_token(const Sequence& s, SimTime now);
  // A bulk decode step (ReplicaObserver::on_decode_step) in which `counted` sequences count:
  // one gap per counted sequence, as on_token would add for each.
  void on_decode_step(std::int64_t counted, SimTime previous, SimTime delivered) {
    itl_.add(to_seconds(delivered - previous), counted);
  }
  void on_finish(const Sequence& s, SimTime now, std::uint32_t replica);
  // A request whose client gave up (SimulationConfig::request_timeout).
  void on_timeout(const Request& r) {
    if (counted(r)) ++timed_out_;
  }
  void on_reject(const Request& r) {
    if (counted(r)) ++rejected_;
  }

  bool counted(const Request& r) const { return r.arrival >= warmup_end_; }
  const std::vector<RequestRecord>& records() const { return records_; }
  // Hands the records over at the end of a run (records() is empty after).
  std::vector<RequestRecord> take_records() { return std::move(records_); }
  const WeightedSamples& itl() const { return itl_; }
  std::int64_t rejected() const { return rejected_; }
  std::int64_t timed_out() const { return timed_out_; }
  SimTime warmup_end() const { return warmup_end_; }
  SimTime last_finish() const { return last_finish_; }
  SimTime first_counted_arrival() const { return first_arrival_; }

 private:
  SimTime warmup_end_;
  std::vector<RequestRecord> records_;
  WeightedSamples itl_;  // pooled inter-token gaps, as vLLM pools them
  std::int64_t rejected_ = 0;
  std::int64_t timed_out_ = 0;
  SimTime last_finish_ = 0;
  SimTime first_arrival_ = -1;
};

}  // namespace capsim
