// Every answer reports capsim's model error for the scenario's class beside its own interval
// (calibration/model-error.yaml, docs/json-output.md#model-error): simulate, capacity and plan,
// text and JSON. The numbers must be the shipped file's for the class, read here through the
// reader the library uses.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "sim/scenario/model_error.h"
#include "tests/check/cli_run.h"

using capsim_test::has;
using capsim_test::run_capsim;

namespace {

const std::string kSmall =
    "-q --model llama-3.1-8b --rate 5 --requests 200 --input-tokens 300 --output-tokens 50";

capsim::scenario::ModelErrorTable shipped() {
  return capsim::scenario::ModelErrorTable::load(std::string(CAPSIM_DATA_DIR) + "/calibration/model-error.yaml");
}

nlohmann::json json_of(const std::string& args) {
  const auto r = run_capsim(args + " --json -");
  INFO(r.err);
  REQUIRE(r.status == 0);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("simulate: the model error of a card with kernel tables and of one without", "[model_error][cli]") {
  const auto t = shipped();
  // h100-sxm has calibration/kernels/h100-sxm/; rtx-4090 has none.
  for (const auto& [card, source] : {std::pair<std::string, std::string>{"h100-sxm", "measured"}, {"rtx-4090", "roofline"}}) {
    const auto j = json_of("simulate " + kSmall + " --card " + card);
    const auto& me = j["capsim"]["model_error"];
    CHECK(me["class"]["cost_source"] == source);
    CHECK(me["class"]["engine"] == "vllm");
    CHECK(me["class"]["architecture"] == "dense");
    CHECK(me["file"] == "calibration/model-error.yaml");
    for (const char* m : {"ttft", "tpot", "e2e"}) {
      const auto want = t.find({source, "vllm", "dense"}, m);
      REQUIRE(want);
      CHECK(me["metrics"][m]["p90"].get<double>() == Approx(want->stat.p90));
      CHECK(me["metrics"][m]["runs"] == want->stat.runs);
      CHECK(me["metrics"][m]["pooled_over"].is_null() == !want->fallback());
    }
  }
  const auto text = run_capsim("simulate " + kSmall + " --card h100-sxm");
  REQUIRE(text.status == 0);
  const auto ttft = t.find({"measured", "vllm", "dense"}, "ttft");
  char p90[16];
  std::snprintf(p90, sizeof p90, "%.0f%%", 100 * ttft->stat.p90);
  CHECK(has(text.out, "model error for cards with kernel tables, vllm, dense (p90 of |error| out of fold): TTFT +-" +
                          std::string(p90) + " (" + std::to_string(ttft->stat.runs) + " runs"));
}

TEST_CASE("capacity: the model error beside the capacity", "[model_error][cli][capacity]") {
  const auto r = run_capsim("capacity -q --model llama-3.1-8b --rate 5 --duration 1min --input-tokens 300 "
                            "--output-tokens 50 --card h100-sxm --slo 'ttft_p95<=1s' --points 2");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(has(r.out, "  model error for cards with kernel tables, vllm, dense (p90 of |error| out of fold): TTFT +-"));
}

TEST_CASE("plan: each option's cost source and whether it holds at its class's p90 error", "[model_error][cli][plan]") {
  const auto t = shipped();
  const std::string args = "plan -q --model llama-3.1-8b --duration 2min --input-tokens 512 --output-tokens 128 "
                           "--rate 2 --slo 'ttft_p95<=1s' --cards l40s --tp 1 --kv-cache auto";
  const auto j = json_of(args);
  REQUIRE(j["options"].size() == 1);
  const auto& me = j["options"][0]["model_error"];
  // The l40s has kernel tables (calibration/kernels/l40s/), so its error class is that of cards
  // with tables; but they are off for vLLM by default (vllm.yaml kernels.measured_kernels false),
  // so its step times come from the roofline, and the option says so.
  CHECK(me["class"]["cost_source"] == "measured");
  CHECK(me["cost_source"] == "roofline");
  REQUIRE(me["slos"].size() == 1);
  const auto& s = me["slos"][0];
  CHECK(s["slo"] == "ttft_p95");
  const double p90 = t.find({"measured", "vllm", "dense"}, "ttft")->stat.p90;
  CHECK(s["p90"].get<double>() == Approx(p90));
  // The rule: latency (the interval's upper end) x (1 + p90) against the bound.
  CHECK(s["with_error_s"].get<double>() == Approx(s["latency_s"].get<double>() * (1 + p90)));
  CHECK(me["holds_at_p90"] == (s["with_error_s"].get<double>() <= 1.0));
  const auto text = run_capsim(args);
  REQUIRE(text.status == 0);
  CHECK(has(text.out, "costs from"));
  CHECK(has(text.out, "at p90 model error"));
  CHECK_FALSE(has(text.out, "measured tables"));
  // With the tables turned on for the process, the same option's times come from them.
  const auto on = json_of("--measured-kernels " + args);
  CHECK(on["options"][0]["model_error"]["cost_source"] == "measured");
  CHECK(has(text.out, me["holds_at_p90"].get<bool>() ? "holds" : "fails: ttft_p95"));
}

TEST_CASE("simulate: a bad calibration/model-error.yaml stops before the run, naming file and field",
          "[model_error][cli]") {
  // A data root with the source tree's cards, engines, kernels and models, and a model-error
  // file without min_runs: exit 2, the file and field named, nothing on stdout.
  capsim_test::Scratch root("moderr-root");
  const std::string src = CAPSIM_DATA_DIR;
  std::filesystem::create_directories(root.path() + "/calibration");
  for (const char* d : {"calibration/cards", "calibration/engines", "calibration/kernels", "models"})
    std::filesystem::create_directory_symlink(src + "/" + d, root.path() + "/" + d);
  std::ofstream(root.file("calibration/model-error.yaml"))
      << "generated_by: x\ndate: 2026-01-01\nclasses:\n  - {cost_source: any, engine: any, architecture: any}\n";
  const auto r = run_capsim("--data-dir '" + root.path() + "' simulate " + kSmall + " --card h100-sxm");
  CHECK(r.status == 2);
  CHECK(has(r.err, root.path() + "/calibration/model-error.yaml: min_runs: missing; accepted: a whole number >= 1"));
  CHECK(r.out.empty());
}
