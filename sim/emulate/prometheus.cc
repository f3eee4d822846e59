#include "sim/emulate/prometheus.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

namespace capsim::emulate {
namespace {

// vLLM's bucket bounds (vllm/v1/metrics/loggers.py).
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
                                          1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTokenBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                           0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestBuckets = {0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0,
                                             30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

std::string escape_label(const std::string& v) {
  std::string out;
  for (const char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void header(std::ostringstream& o, const std::string& name, const std::string& type, const std::string& help) {
  o << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

}  // namespace

std::string prom_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), cumulative_(bounds_.size(), 0) {}

void Histogram::observe(double v) {
  for (std::size_t i = 0; i < bounds_.size(); ++i) {
    if (v <= bounds_[i]) ++cumulative_[i];
  }
  ++count_;
  sum_ += v;
}

ServerMetrics::Engine::Engine()
    : ttft(kTtftBuckets), itl(kTokenBuckets), tpot(kTokenBuckets), e2e(kRequestBuckets) {}

ServerMetrics::ServerMetrics(std::string model_name, std::size_t replicas)
    : model_(std::move(model_name)), engines_(std::max<std::size_t>(1, replicas)) {}

void ServerMetrics::first_token(std::uint32_t replica, double ttft_s, std::int64_t prompt_tokens) {
  Engine& e = engines_.at(replica);
  e.ttft.observe(ttft_s);
  e.prompt_tokens += prompt_tokens;
  e.generation_tokens += 1;
}

void ServerMetrics::next_token(std::uint32_t replica, double gap_s) {
  Engine& e = engines_.at(replica);
  e.itl.observe(gap_s);
  e.generation_tokens += 1;
}

void ServerMetrics::finished(std::uint32_t replica, const std::string& reason, double e2e_s, double tpot_s,
                             std::int64_t output_tokens) {
  Engine& e = engines_.at(replica);
  e.e2e.observe(e2e_s);
  if (output_tokens > 1) e.tpot.observe(tpot_s);
  e.success[reason] += 1;
}

void ServerMetrics::aborted(std::uint32_t replica) { engines_.at(replica).success["abort"] += 1; }

std::string ServerMetrics::render(const std::vector<LiveReplicaState>& state) const {
  std::ostringstream o;
  const auto labels = [&](std::size_t engine) {
    return "engine=\"" + std::to_string(engine) + "\",model_name=\"" + escape_label(model_) + "\"";
  };
  const auto per_state = [&](const std::string& name, const std::string& type, const std::string& help,
                             auto value) {
    header(o, name, type, help);
    for (std::size_t i = 0; i < state.size(); ++i) o << name << "{" << labels(i) << "} " << prom_number(value(state[i])) << "\n";
  };
  per_state("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
            [](const LiveReplicaState& s) { return static_cast<double>(s.running); });
  per_state("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
            [](const LiveReplicaState& s) { return static_cast<double>(s.waiting); });
  per_state("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
            [](const LiveReplicaState& s) {
              return s.kv_blocks ? static_cast<double>(s.kv_used_blocks) / static_cast<double>(s.kv_blocks) : 0.0;
            });
  per_state("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.",
            [](const LiveReplicaState& s) { return static_cast<double>(s.preemptions); });
  per_state("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.",
            [](const LiveReplicaState& s) { return static_cast<double>(s.prefix_lookup_tokens); });
  per_state("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.",
            [](const LiveReplicaState& s) { return static_cast<double>(s.prefix_hit_tokens); });

  const auto per_engine = [&](const std::string& name, const std::string& help, auto value) {
    header(o, name, "counter", help);
    for (std::size_t i = 0; i < engines_.size(); ++i) o << name << "{" << labels(i) << "} " << value(engines_[i]) << "\n";
  };
  per_engine("vllm:prompt_tokens_total", "Number of prefill tokens processed.",
             [](const Engine& e) { return e.prompt_tokens; });
  per_engine("vllm:generation_tokens_total", "Number of generation tokens processed.",
             [](const Engine& e) { return e.generation_tokens; });
  header(o, "vllm:request_success_total", "counter", "Count of successfully processed requests.");
  for (std::size_t i = 0; i < engines_.size(); ++i) {
    for (const char* reason : {"stop", "length", "abort"}) {
      const auto it = engines_[i].success.find(reason);
      o << "vllm:request_success_total{" << labels(i) << ",finished_reason=\"" << reason << "\"} "
        << (it == engines_[i].success.end() ? 0 : it->second) << "\n";
    }
  }

  const auto histogram = [&](const std::string& name, const std::string& help, const Histogram Engine::*member) {
    header(o, name, "histogram", help);
    for (std::size_t i = 0; i < engines_.size(); ++i) {
      const Histogram& h = engines_[i].*member;
      for (std::size_t b = 0; b < h.bounds().size(); ++b) {
        o << name << "_bucket{" << labels(i) << ",le=\"" << prom_number(h.bounds()[b]) << "\"} " << h.cumulative(b) << "\n";
      }
      o << name << "_bucket{" << labels(i) << ",le=\"+Inf\"} " << h.count() << "\n";
      o << name << "_count{" << labels(i) << "} " << h.count() << "\n";
      o << name << "_sum{" << labels(i) << "} " << prom_number(h.sum()) << "\n";
    }
  };
  histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &Engine::ttft);
  histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &Engine::itl);
  histogram("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
            &Engine::tpot);
  histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", &Engine::e2e);
  return o.str();
}

}  // namespace capsim::emulate
