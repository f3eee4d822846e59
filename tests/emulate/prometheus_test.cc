// /metrics text of `capsim emulate` (sim/emulate/prometheus.h): vLLM's names and labels,
// cumulative histogram buckets worked by hand, gauges from the replicas' state.
#include "sim/emulate/prometheus.h"

#include <catch2/catch.hpp>
#include <string>

namespace {

using namespace capsim;
using namespace capsim::emulate;

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

}  // namespace

TEST_CASE("emulate metrics: histogram buckets are cumulative, with sum and count", "[emulate]") {
  Histogram h({0.1, 0.5, 1.0});
  for (const double v : {0.05, 0.1, 0.3, 2.0}) h.observe(v);
  // <= 0.1: 0.05 and 0.1 (the bound is inclusive) = 2; <= 0.5: + 0.3 = 3; <= 1: 3; +Inf: 4.
  CHECK(h.cumulative(0) == 2);
  CHECK(h.cumulative(1) == 3);
  CHECK(h.cumulative(2) == 3);
  CHECK(h.count() == 4);
  CHECK(h.sum() == Approx(2.45));
  CHECK(prom_number(0.001) == "0.001");
  CHECK(prom_number(2560) == "2560");
  CHECK(prom_number(1.0 / 0.0) == "+Inf");
}

TEST_CASE("emulate metrics: vLLM's names, labels per engine, values from the simulation", "[emulate]") {
  ServerMetrics m("llama-3.1-8b", 2);
  // Engine 1: one request, prompt 2,000, 3 tokens: TTFT 0.2 s, gaps 0.02 and 0.03 s, E2E 0.25 s,
  // TPOT (0.25 - 0.2) / 2 = 0.025 s. Engine 0: one request aborted.
  m.first_token(1, 0.2, 2000);
  m.next_token(1, 0.02);
  m.next_token(1, 0.03);
  m.finished(1, "length", 0.25, 0.025, 3);
  m.aborted(0);
  LiveReplicaState a, b;
  a.index = 0;
  a.running = 3;
  a.waiting = 1;
  a.kv_used_blocks = 250;
  a.kv_blocks = 1000;
  b.index = 1;
  b.preemptions = 2;
  const std::string t = m.render({a, b});
  const std::string e0 = "{engine=\"0\",model_name=\"llama-3.1-8b\"}", e1 = "{engine=\"1\",model_name=\"llama-3.1-8b\"}";
  CHECK(has_line(t, "# TYPE vllm:num_requests_running gauge"));
  CHECK(has_line(t, "vllm:num_requests_running" + e0 + " 3"));
  CHECK(has_line(t, "vllm:num_requests_waiting" + e0 + " 1"));
  CHECK(has_line(t, "vllm:kv_cache_usage_perc" + e0 + " 0.25"));  // 250 / 1,000 blocks
  CHECK(has_line(t, "vllm:num_preemptions_total" + e1 + " 2"));
  CHECK(has_line(t, "vllm:prompt_tokens_total" + e1 + " 2000"));
  CHECK(has_line(t, "vllm:generation_tokens_total" + e1 + " 3"));
  CHECK(has_line(t, "vllm:request_success_total{engine=\"1\",model_name=\"llama-3.1-8b\",finished_reason=\"length\"} 1"));
  CHECK(has_line(t, "vllm:request_success_total{engine=\"0\",model_name=\"llama-3.1-8b\",finished_reason=\"abort\"} 1"));
  // TTFT 0.2 s: not in the 0.1 bucket, in 0.25 and above.
  CHECK(has_line(t, "vllm:time_to_first_token_seconds_bucket{engine=\"1\",model_name=\"llama-3.1-8b\",le=\"0.1\"} 0"));
  CHECK(has_line(t, "vllm:time_to_first_token_seconds_bucket{engine=\"1\",model_name=\"llama-3.1-8b\",le=\"0.25\"} 1"));
  CHECK(has_line(t, "vllm:time_to_first_token_seconds_count" + e1 + " 1"));
  // Gaps 0.02 and 0.03: one <= 0.025, both <= 0.05; sum 0.05.
  CHECK(has_line(t, "vllm:inter_token_latency_seconds_bucket{engine=\"1\",model_name=\"llama-3.1-8b\",le=\"0.025\"} 1"));
  CHECK(has_line(t, "vllm:inter_token_latency_seconds_bucket{engine=\"1\",model_name=\"llama-3.1-8b\",le=\"0.05\"} 2"));
  CHECK(has_line(t, "vllm:inter_token_latency_seconds_sum" + e1 + " 0.05"));
  CHECK(has_line(t, "vllm:request_time_per_output_token_seconds_bucket{engine=\"1\",model_name=\"llama-3.1-8b\",le=\"0.025\"} 1"));
  CHECK(has_line(t, "vllm:e2e_request_latency_seconds_bucket{engine=\"1\",model_name=\"llama-3.1-8b\",le=\"0.3\"} 1"));
  CHECK(has_line(t, "vllm:e2e_request_latency_seconds_count" + e0 + " 0"));
}
