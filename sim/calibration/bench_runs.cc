#include "sim/calibration/bench_runs.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "sim/core/error.h"
#include "sim/core/input_limits.h"

namespace capsim::calibration {
namespace {

using nlohmann::json;

// `at` names the object ("run.json" or "run.json: benchmarks[0].metrics"); `key` the field in it.
const json& field(const json& j, const std::string& key, const std::string& at) {
  if (!j.is_object()) throw Error(at + ": not a JSON object");
  const auto it = j.find(key);
  if (it == j.end()) throw Error(at + ": field '" + key + "' is missing");
  return *it;
}

double number(const json& j, const std::string& key, const std::string& at, const std::string& what) {
  const json& v = field(j, key, at);
  if (!v.is_number() || !std::isfinite(v.get<double>())) {
    throw Error(at + ": field '" + key + "' is " + v.dump() + ", not " + what);
  }
  return v.get<double>();
}

double positive(const json& j, const std::string& key, const std::string& at, const std::string& what) {
  const double v = number(j, key, at, what);
  if (!(v > 0)) throw Error(at + ": field '" + key + "' is " + field(j, key, at).dump() + ", not " + what);
  return v;
}

std::int64_t count(const json& j, const std::string& key, const std::string& at) {
  const double v = number(j, key, at, "a count of requests");
  // 1e12 requests is far past any benchmark run; above 2^63 the cast below was undefined.
  if (v < 0 || v != std::floor(v) || v > 1e12) {
    throw Error(at + ": field '" + key + "' is " + field(j, key, at).dump() + ", not a count of requests (0..1e12)");
  }
  return static_cast<std::int64_t>(v);
}

// A run cannot complete more requests than it sent (found by fuzz_bench_runs: the means per
// completed request were then taken over requests that were never sent).
void require_sent(const BenchRun& r, const std::string& at, const std::string& completed_key,
                  const std::string& sent_key) {
  if (r.completed > r.requests) {
    throw Error(at + ": field '" + completed_key + "' (" + std::to_string(r.completed) + ") is more than '" + sent_key +
                "' (" + std::to_string(r.requests) + "), the requests sent");
  }
}

void require_completed(const BenchRun& r, const std::string& at, const std::string& key) {
  if (r.completed == 0) {
    throw Error(at + ": field '" + key + "' is 0: no request completed, so the run measured nothing to fit");
  }
}

std::vector<double> lengths(const json& j, const std::string& key, const std::string& at) {
  const json& v = field(j, key, at);
  if (!v.is_array()) throw Error(at + ": field '" + key + "' is not an array of token counts");
  std::vector<double> out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number() || v[i].get<double>() < 0) {
      throw Error(at + ": field '" + key + "[" + std::to_string(i) + "]' is " + v[i].dump() +
                  ", not a token count");
    }
    out.push_back(v[i].get<double>());
  }
  return out;
}

BenchRun vllm_run(const json& j, const std::string& path) {
  BenchRun r;
  r.file = r.label = path;
  r.format = "vllm-bench";
  if (j.contains("model_id") && j["model_id"].is_string()) r.model = j["model_id"].get<std::string>();
  r.completed = count(j, "completed", path);
  require_completed(r, path, "completed");
  r.requests = count(j, "num_prompts", path);
  require_sent(r, path, "completed", "num_prompts");
  const json& rate = field(j, "request_rate", path);
  if (rate.is_string() && (rate == "inf" || rate == "Infinity")) {
    // vLLM writes "inf" for --request-rate inf: every request sent at once, bounded by max_concurrency.
  } else {
    r.rate = positive(j, "request_rate", path, "a rate > 0 (requests/s) or \"inf\"");
  }
  if (j.contains("max_concurrency") && !j["max_concurrency"].is_null()) {
    const std::int64_t c = count(j, "max_concurrency", path);
    if (c < 1) throw Error(path + ": field 'max_concurrency' is 0, not a count of requests in flight >= 1");
    r.concurrency = static_cast<int>(std::min<std::int64_t>(c, 1'000'000));
  }
  if (r.rate && r.concurrency) {
    throw Error(path + ": request_rate " + rate.dump() + " with max_concurrency " + std::to_string(*r.concurrency) +
                ": capsim replays a rate or a concurrency, not both at once; calibrate from runs made with "
                "one of them (--request-rate inf --max-concurrency N, or --request-rate R)");
  }
  if (j.contains("burstiness") && !j["burstiness"].is_null()) {
    r.burstiness = positive(j, "burstiness", path, "a gamma shape > 0");
  }
  r.mean_input_tokens = number(j, "total_input_tokens", path, "a token count") / static_cast<double>(r.completed);
  r.mean_output_tokens = number(j, "total_output_tokens", path, "a token count") / static_cast<double>(r.completed);
  if (!(r.mean_input_tokens >= 1) || !(r.mean_output_tokens >= 1)) {
    throw Error(path + ": total_input_tokens / total_output_tokens give " + std::to_string(r.mean_input_tokens) +
                " / " + std::to_string(r.mean_output_tokens) + " tokens per completed request; each must be >= 1");
  }
  if (j.contains("input_lens") && j.contains("output_lens")) {
    const std::vector<double> in = lengths(j, "input_lens", path), out = lengths(j, "output_lens", path);
    if (in.size() != out.size()) {
      throw Error(path + ": fields 'input_lens' and 'output_lens' hold " + std::to_string(in.size()) + " and " +
                  std::to_string(out.size()) + " requests; --save-detailed writes one of each per request");
    }
    // A failed request has output length 0 and is not in the measured means.
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (out[i] > 0 && in[i] > 0) {
        r.input_lens.push_back(in[i]);
        r.output_lens.push_back(out[i]);
      }
    }
  }
  r.ttft_ms = positive(j, "mean_ttft_ms", path, "a time > 0 (ms)");
  r.tpot_ms = positive(j, "mean_tpot_ms", path, "a time > 0 (ms)");
  if (j.contains("mean_e2el_ms")) r.e2e_ms = positive(j, "mean_e2el_ms", path, "a time > 0 (ms)");
  return r;
}

double successful_mean(const json& metrics, const std::string& name, const std::string& at) {
  const std::string m = at + ".metrics";
  const json& summary = field(field(metrics, name, m), "successful", m + "." + name);
  return number(summary, "mean", m + "." + name + ".successful", "a number");
}

BenchRun guidellm_run(const json& b, const std::string& path, std::size_t index) {
  const std::string at = path + ": benchmarks[" + std::to_string(index) + "]";
  BenchRun r;
  r.file = path;
  r.label = at;
  r.format = "guidellm";
  if (b.contains("worker") && b["worker"].is_object() && b["worker"].contains("backend_model") &&
      b["worker"]["backend_model"].is_string()) {
    r.model = b["worker"]["backend_model"].get<std::string>();
  }
  const json& totals = field(b, "request_totals", at);
  r.completed = count(totals, "successful", at + ".request_totals");
  require_completed(r, at + ".request_totals", "successful");
  r.requests = count(totals, "total", at + ".request_totals");
  require_sent(r, at + ".request_totals", "successful", "total");
  const std::string sat = at + ".args.strategy";
  const json& strategy = field(field(b, "args", at), "strategy", at + ".args");
  const json& type = field(strategy, "type_", sat);
  const std::string t = type.is_string() ? type.get<std::string>() : type.dump();
  if (t == "synchronous") {
    r.concurrency = 1;
  } else if (t == "concurrent") {
    const std::int64_t streams = count(strategy, "streams", sat);
    if (streams < 1) throw Error(sat + ": field 'streams' is 0, not a count of requests in flight >= 1");
    r.concurrency = static_cast<int>(std::min<std::int64_t>(streams, 1'000'000));
  } else if (t == "constant" || t == "poisson") {
    r.rate = positive(strategy, "rate", sat, "a rate > 0 (requests/s)");
    r.arrival = t;
  } else if (t != "throughput") {
    throw Error(sat + ": field 'type_' is '" + t +
                "'; accepted: synchronous, concurrent, throughput, constant, poisson");
  }
  const json& metrics = field(b, "metrics", at);
  r.mean_input_tokens = successful_mean(metrics, "prompt_token_count", at);
  r.mean_output_tokens = successful_mean(metrics, "output_token_count", at);
  if (!(r.mean_input_tokens >= 1) || !(r.mean_output_tokens >= 1)) {
    throw Error(at + ".metrics: prompt_token_count / output_token_count means are " +
                std::to_string(r.mean_input_tokens) + " / " + std::to_string(r.mean_output_tokens) +
                " tokens; each must be >= 1");
  }
  r.ttft_ms = successful_mean(metrics, "time_to_first_token_ms", at);
  r.tpot_ms = successful_mean(metrics, "inter_token_latency_ms", at);
  r.e2e_ms = successful_mean(metrics, "request_latency", at) * 1e3;  // GuideLLM: seconds
  if (!(r.ttft_ms > 0) || !(r.tpot_ms > 0) || !(*r.e2e_ms > 0)) {
    throw Error(at + ".metrics: time_to_first_token_ms, inter_token_latency_ms and request_latency means "
                "must be > 0");
  }
  return r;
}

}  // namespace

std::vector<BenchRun> parse_bench_runs(const json& j, const std::string& path) {
  if (!j.is_object()) throw Error(path + ": not a JSON object (a vllm bench serve result or a GuideLLM report)");
  if (j.contains("benchmarks")) {
    const json& list = j["benchmarks"];
    if (!list.is_array() || list.empty()) throw Error(path + ": field 'benchmarks' is not a non-empty array");
    std::vector<BenchRun> runs;
    for (std::size_t i = 0; i < list.size(); ++i) runs.push_back(guidellm_run(list[i], path, i));
    return runs;
  }
  if (j.contains("mean_ttft_ms") || j.contains("completed")) return {vllm_run(j, path)};
  throw Error(path + ": neither a vllm bench serve result (keys completed, mean_ttft_ms, ...) nor a GuideLLM "
              "report (key benchmarks)");
}

std::vector<BenchRun> load_bench_runs(const std::string& path) {
  // Through the bounded reader every JSON input uses (sim/core/input_limits.h): a size limit, a
  // nesting limit, and every nlohmann error as capsim::Error naming the file. Before, a number
  // past double's range escaped as nlohmann's out_of_range (found by fuzz_bench_runs). GuideLLM
  // reports keep every request, so the limit is larger than capsim's own JSON files'.
  constexpr std::size_t kMaxResultBytes = std::size_t{64} << 20;
  const std::string text = read_input_file(path, "load-generator result (vllm bench serve, GuideLLM)", kMaxResultBytes);
  return parse_bench_runs(parse_json(text, path), path);
}

}  // namespace capsim::calibration
