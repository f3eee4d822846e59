// The load generators' result files that `capsim calibrate runs` reads (sim/calibration/bench_runs.h):
// tests/data/calibrate-runs/ (written by its make_runs.py from capsim's own runs) and broken copies.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/calibration/bench_runs.h"
#include "sim/core/error.h"
#include "tests/support/temp_dir.h"

using capsim::calibration::BenchRun;
using capsim::calibration::load_bench_runs;
using capsim::calibration::parse_bench_runs;
using nlohmann::json;

namespace {

const std::string kDir = std::string(CAPSIM_DATA_DIR) + "/tests/data/calibrate-runs/";

json read(const std::string& name) {
  std::ifstream in(kDir + name);
  return json::parse(in);
}

std::string error_of(const json& j, const std::string& label = "run.json") {
  try {
    parse_bench_runs(j, label);
  } catch (const capsim::Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("a vllm bench serve result at a fixed concurrency, with --save-detailed arrays", "[calibrate-runs]") {
  const json j = read("conc16.json");
  const std::vector<BenchRun> runs = load_bench_runs(kDir + "conc16.json");
  REQUIRE(runs.size() == 1);
  const BenchRun& r = runs[0];
  CHECK(r.format == "vllm-bench");
  CHECK(r.model == "meta-llama/Llama-3.1-8B-Instruct");
  CHECK_FALSE(r.rate);  // "request_rate": "inf"
  REQUIRE(r.concurrency);
  CHECK(*r.concurrency == 16);
  CHECK(r.requests == 96);
  CHECK(r.completed == 96);
  CHECK(r.mean_input_tokens == 512);
  CHECK(r.mean_output_tokens == 128);
  CHECK(r.input_lens.size() == 96);
  CHECK(r.output_lens.size() == 96);
  CHECK(r.ttft_ms == j["mean_ttft_ms"].get<double>());
  CHECK(r.tpot_ms == j["mean_tpot_ms"].get<double>());
  REQUIRE(r.e2e_ms);
  CHECK(*r.e2e_ms == j["mean_e2el_ms"].get<double>());
}

TEST_CASE("a vllm bench serve result at a request rate, without per-request arrays", "[calibrate-runs]") {
  const BenchRun r = load_bench_runs(kDir + "rate6.json").at(0);
  REQUIRE(r.rate);
  CHECK(*r.rate == 6);
  CHECK(r.arrival == "poisson");
  CHECK_FALSE(r.concurrency);
  CHECK(r.mean_input_tokens == 1024);
  CHECK(r.mean_output_tokens == 96);
  CHECK(r.input_lens.empty());
}

TEST_CASE("a GuideLLM report gives one run per benchmark, TPOT from inter_token_latency_ms", "[calibrate-runs]") {
  const json j = read("guidellm.json");
  const std::vector<BenchRun> runs = load_bench_runs(kDir + "guidellm.json");
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].format == "guidellm");
  CHECK(runs[0].label == kDir + "guidellm.json: benchmarks[0]");
  REQUIRE(runs[0].concurrency);
  CHECK(*runs[0].concurrency == 8);
  CHECK(runs[0].requests == 64);
  CHECK(runs[0].mean_input_tokens == 256);
  CHECK(runs[0].mean_output_tokens == 160);
  const json& m = j["benchmarks"][0]["metrics"];
  CHECK(runs[0].tpot_ms == m["inter_token_latency_ms"]["successful"]["mean"].get<double>());
  CHECK(runs[0].tpot_ms != m["time_per_output_token_ms"]["successful"]["mean"].get<double>());
  REQUIRE(runs[0].e2e_ms);
  CHECK(*runs[0].e2e_ms == Approx(m["request_latency"]["successful"]["mean"].get<double>() * 1e3));
  REQUIRE(runs[1].rate);
  CHECK(*runs[1].rate == 3);
  CHECK(runs[1].arrival == "constant");
  CHECK_FALSE(runs[1].concurrency);
}

TEST_CASE("malformed result files are refused naming the file and the field", "[calibrate-runs]") {
  json v = read("conc4.json");
  json missing = v;
  missing.erase("mean_tpot_ms");
  CHECK(error_of(missing) == "run.json: field 'mean_tpot_ms' is missing");
  json none = v;
  none["completed"] = 0;
  CHECK(error_of(none) == "run.json: field 'completed' is 0: no request completed, so the run measured nothing to fit");
  json rate = v;
  rate["request_rate"] = "fast";
  CHECK(error_of(rate) == "run.json: field 'request_rate' is \"fast\", not a rate > 0 (requests/s) or \"inf\"");
  json both = v;
  both["request_rate"] = 4;
  CHECK(error_of(both).rfind("run.json: request_rate 4 with max_concurrency 4: capsim replays a rate or a "
                             "concurrency, not both at once", 0) == 0);
  json lens = read("conc16.json");
  lens["output_lens"].erase(0);
  CHECK(error_of(lens) == "run.json: fields 'input_lens' and 'output_lens' hold 96 and 95 requests; "
                          "--save-detailed writes one of each per request");
  CHECK(error_of(json::array()) ==
        "run.json: not a JSON object (a vllm bench serve result or a GuideLLM report)");
  CHECK(error_of(json{{"foo", 1}}) == "run.json: neither a vllm bench serve result (keys completed, mean_ttft_ms, "
                                      "...) nor a GuideLLM report (key benchmarks)");

  json g = read("guidellm.json");
  json sweep = g;
  sweep["benchmarks"][1]["args"]["strategy"]["type_"] = "sweep";
  CHECK(error_of(sweep, "g.json") == "g.json: benchmarks[1].args.strategy: field 'type_' is 'sweep'; accepted: "
                                     "synchronous, concurrent, throughput, constant, poisson");
  json itl = g;
  itl["benchmarks"][0]["metrics"].erase("inter_token_latency_ms");
  CHECK(error_of(itl, "g.json") == "g.json: benchmarks[0].metrics: field 'inter_token_latency_ms' is missing");
  json failed = g;
  failed["benchmarks"][0]["request_totals"]["successful"] = 0;
  CHECK(error_of(failed, "g.json") == "g.json: benchmarks[0].request_totals: field 'successful' is 0: no request "
                                      "completed, so the run measured nothing to fit");
  json more = g;
  more["benchmarks"][0]["request_totals"]["successful"] = more["benchmarks"][0]["request_totals"]["total"].get<int>() + 1;
  CHECK_THAT(error_of(more, "g.json"), Catch::Contains("g.json: benchmarks[0].request_totals: field 'successful' (") &&
                                           Catch::Contains("is more than 'total' ("));
  CHECK_THROWS_WITH(load_bench_runs(kDir + "make_runs.py"), Catch::StartsWith(kDir + "make_runs.py:1: malformed JSON: "));
  // A number past double's range: nlohmann's out_of_range escaped without the file's name before
  // (found by fuzz_bench_runs); now capsim's error, naming it.
  capsim_test::TempDir tmp("bench_runs_overflow");
  const std::string big = tmp.file("big.json");
  std::ofstream(big) << R"({"completed": 1e999})";
  CHECK_THROWS_WITH(load_bench_runs(big), Catch::StartsWith(big + ": malformed JSON: ") &&
                                              Catch::Contains("number overflow"));
}
