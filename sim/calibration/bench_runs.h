// Serving runs a team measured on its own deployment, read from the load generators' result files,
// for `capsim calibrate runs` (docs/calibration.md#your-own-runs).
//
// Two formats, told apart by their keys:
//  - `vllm bench serve` / benchmarks/benchmark_serving.py --save-result JSON (one run per file):
//    completed, num_prompts, request_rate (a number or "inf"), max_concurrency (null or a count),
//    burstiness, total_input_tokens, total_output_tokens, mean_ttft_ms, mean_tpot_ms,
//    mean_e2el_ms (older versions lack it), model_id; with --save-detailed the per-request arrays
//    input_lens and output_lens (a failed request has output length 0).
//  - GuideLLM's report JSON (vllm-project/guidellm, src/guidellm/benchmark/benchmark.py
//    GenerativeBenchmark; https://blog.vllm.ai/guidellm/main/guides/metrics): benchmarks[], one
//    run each, with args.strategy {type_: synchronous | concurrent (streams) | throughput |
//    constant | poisson (rate)}, request_totals {successful, total} and metrics.<name>.successful
//    .mean for time_to_first_token_ms, inter_token_latency_ms (GuideLLM's decode-only per-token
//    time, vLLM's TPOT; its time_per_output_token_ms includes the first token and is not used),
//    request_latency (seconds), prompt_token_count and output_token_count.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace capsim::calibration {

struct BenchRun {
  std::string file;    // as given
  std::string label;   // for messages: the file, or "file: benchmarks[2]"
  std::string format;  // "vllm-bench" or "guidellm"
  std::string model;   // the served model the file names; empty when it names none
  // The load: a rate (requests/s) with "poisson" (gamma when burstiness != 1) or "constant"
  // arrivals, or a number of requests in flight, or every request at once (neither).
  std::optional<double> rate;
  std::string arrival = "poisson";
  double burstiness = 1;
  std::optional<int> concurrency;
  std::int64_t requests = 0;   // sent
  std::int64_t completed = 0;
  double mean_input_tokens = 0, mean_output_tokens = 0;
  // Per completed request, when the file saved them (vLLM --save-detailed); else empty.
  std::vector<double> input_lens, output_lens;
  // Measured means over the completed requests (ms); e2e_ms unset when the file has none.
  double ttft_ms = 0, tpot_ms = 0;
  std::optional<double> e2e_ms;
};

// Reads one result file (either format). Throws capsim::Error naming the file, the field and
// what it should hold: a missing or mistyped key, zero completed requests, an unknown strategy.
std::vector<BenchRun> load_bench_runs(const std::string& path);
// The same for a file's JSON already read; `path` names it in messages.
std::vector<BenchRun> parse_bench_runs(const nlohmann::json& j, const std::string& path);

}  // namespace capsim::calibration
