// /metrics of `capsim emulate`: the simulated server's state and latencies in the Prometheus text
// exposition format (version 0.0.4), under vLLM V1's metric names and labels
// (vllm/v1/metrics/loggers.py PrometheusStatLogger: labels model_name and engine, one engine per
// replica), so dashboards and autoscaling rules written for vLLM read it unchanged.
//
// Latencies are in simulated seconds (what the simulated hardware would show), whatever
// --time-scale the emulator runs at. Emitted:
//   gauges     vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc
//   counters   vllm:prompt_tokens_total, vllm:generation_tokens_total, vllm:num_preemptions_total,
//              vllm:prefix_cache_queries_total, vllm:prefix_cache_hits_total,
//              vllm:request_success_total{finished_reason=stop|length|abort}
//   histograms vllm:time_to_first_token_seconds, vllm:inter_token_latency_seconds,
//              vllm:request_time_per_output_token_seconds, vllm:e2e_request_latency_seconds
//              (vLLM's bucket bounds)
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "sim/cluster/live_simulation.h"

namespace capsim::emulate {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  const std::vector<double>& bounds() const { return bounds_; }
  // Cumulative count of observations <= bounds()[i]; count() is the +Inf bucket.
  std::int64_t cumulative(std::size_t i) const { return cumulative_[i]; }
  std::int64_t count() const { return count_; }
  double sum() const { return sum_; }

 private:
  std::vector<double> bounds_;
  std::vector<std::int64_t> cumulative_;
  std::int64_t count_ = 0;
  double sum_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics(std::string model_name, std::size_t replicas);
  // A request's first token reached its client `ttft_s` after it was sent.
  void first_token(std::uint32_t replica, double ttft_s, std::int64_t prompt_tokens);
  // A later token, `gap_s` after the previous one.
  void next_token(std::uint32_t replica, double gap_s);
  // The request ended: "stop" or "length" after its last token (tpot_s used when output > 1),
  // "abort" when its client went away.
  void finished(std::uint32_t replica, const std::string& reason, double e2e_s, double tpot_s,
                std::int64_t output_tokens);
  void aborted(std::uint32_t replica);
  // The exposition text; gauges and engine counters from `state` (one entry per replica).
  std::string render(const std::vector<LiveReplicaState>& state) const;

 private:
  struct Engine {
    Histogram ttft, itl, tpot, e2e;
    std::int64_t prompt_tokens = 0, generation_tokens = 0;
    std::map<std::string, std::int64_t> success;  // finished_reason -> requests
    Engine();
  };
  std::string model_;
  std::vector<Engine> engines_;
};

// Prometheus number text: shortest round-trip decimal, "+Inf", "NaN".
std::string prom_number(double v);

}  // namespace capsim::emulate
