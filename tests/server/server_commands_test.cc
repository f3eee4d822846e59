// The commands without a scenario through the HTTP API (issue 34: every command the CLI has is a
// library call the server can offer): POST /v1/batch-serve, /v1/finetune and /v1/calibrate give
// the bytes `capsim batch-serve|finetune|calibrate fit --json -` print for the same input; a bad
// body is a 4xx naming the field; the calibrate endpoint takes the profile itself, never a path.
// Driven without the transport, as server_answers_test.cc is (prepare() and the job it returns).
#include <catch2/catch.hpp>
#include <atomic>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/core/cancel.h"
#include "sim/server/api.h"
#include "tests/calibration/synthetic.h"
#include "tests/check/cli_run.h"

namespace {

using capsim::server::Endpoint;
using capsim::server::HttpError;
using capsim::server::Limits;
using nlohmann::json;

std::string answer(Endpoint e, const json& body, const Limits& limits = Limits{}) {
  const capsim::server::Job job = capsim::server::prepare(e, body.dump(), limits);
  return job(std::make_shared<std::atomic<bool>>(false), [](const json&) {});
}

// The refusal of `body` at `e`, whether prepare() or the job it returned found it (status 0: none).
HttpError refusal(Endpoint e, const json& body, const Limits& limits = Limits{}) {
  try {
    (void)answer(e, body, limits);
  } catch (const HttpError& x) {
    return x;
  }
  return HttpError(0, "answered");
}

}  // namespace

TEST_CASE("server and CLI: POST /v1/batch-serve gives `capsim batch-serve --json -`'s bytes", "[answers][server]") {
  // 1 TFLOP per item, 1 GB of weights, fp16 on a T4, 1 ms overhead (the default), one item alone:
  // sqrt(27.972028^2 + 4.166667^2) + 1 = 29.280655 ms (tests/batchserve/batch_server_test.cc).
  const std::string api = answer(Endpoint::kBatchServe, {{"flops_per_item", 1e12}, {"weights_bytes", "1GB"}, {"card", "t4"},
                                                         {"precision", "fp16"}, {"rate", 1}, {"requests", 1},
                                                         {"max_batch", 1}, {"slo", "p95<=1s"}, {"price", {{"t4", 0.35}}}});
  const auto cli = capsim_test::run_capsim(
      "batch-serve --flops-per-item 1e12 --weights-bytes 1GB --card t4 --precision fp16 --rate 1 --requests 1 "
      "--max-batch 1 --slo 'p95<=1s' --price t4=0.35 --json -");
  INFO(cli.err);
  REQUIRE(cli.status == 0);
  CHECK(api == cli.out);
  const json j = json::parse(api);
  CHECK(j["items"] == 1);
  CHECK(j["latency_s"]["max"].get<double>() == Approx(0.029280655).margin(1e-9));
  CHECK(j["slos"][0]["met"] == true);
  CHECK(j["cost"]["usd_per_hour"].get<double>() == 0.35);
}

TEST_CASE("server and CLI: POST /v1/finetune gives `capsim finetune --json -`'s bytes", "[answers][server]") {
  const std::string api =
      answer(Endpoint::kFinetune, {{"model", "llama-2-13b"}, {"method", "qlora"}, {"cards", {"rtx-4090", "l4", "t4"}},
                                   {"tokens", 5e8}});
  const auto cli =
      capsim_test::run_capsim("finetune --model llama-2-13b --method qlora --cards rtx-4090,l4,t4 --tokens 5e8 --json -");
  INFO(cli.err);
  REQUIRE(cli.status == 0);
  CHECK(api == cli.out);
  const json j = json::parse(api);
  // QLoRA of a 13B model fits a 24 GB card (tests/cli/beyond_llm_cli_test.cc); rank 8 as PEFT.
  CHECK(j["lora_rank"] == 8);
  CHECK(j["cards"][0]["card"] == "rtx-4090");
  CHECK(j["cards"][0]["fits"] == true);
  CHECK(j["fits_any"] == true);
  CHECK(j["training"]["tokens"] == 5e8);
  CHECK(j["cards"][0]["training"]["seconds"].get<double>() > 0);
}

TEST_CASE("server and CLI: POST /v1/calibrate fits the profile the body carries as `capsim calibrate fit` does",
          "[answers][server][calibration]") {
  const json profile = capsim::test::synthetic_profile({}, 11);
  const std::string api = answer(Endpoint::kCalibrate, {{"card", "h100-sxm"}, {"profile", profile}});
  capsim_test::Scratch tmp("server_calibrate");
  const std::string file = tmp.write("h100.json", profile.dump());
  const auto cli = capsim_test::run_capsim("calibrate fit '" + file + "' --card h100-sxm --out '" +
                                           tmp.file("h100-sxm.yaml") + "' --json -");
  INFO(cli.err);
  REQUIRE(cli.status == 0);
  // The two fields that name files: the server read the body's "profile" and wrote nothing.
  json expected = json::parse(cli.out);
  CHECK(expected["profile"] == file);
  expected["profile"] = "profile";
  expected["out"] = nullptr;
  CHECK(api == expected.dump(2) + "\n");
  const json j = json::parse(api);
  // The synthetic profile's true constants (tests/calibration/synthetic.h), recovered.
  CHECK(j["efficiency"]["memory_bandwidth"]["value"].get<double>() == Approx(0.83).epsilon(0.01));
  CHECK(j["efficiency"]["compute"]["value"].get<double>() == Approx(0.71).epsilon(0.01));
  CHECK(j["out"].is_null());
}

TEST_CASE("server: a bad batch-serve, finetune or calibrate body is a 4xx JSON error naming the field",
          "[server]") {
  const json bert = {{"model", "bert-base-uncased"}, {"card", "t4"}, {"rate", 1}};
  json b = bert;
  b["max_batch"] = 0;
  HttpError e = refusal(Endpoint::kBatchServe, b);
  CHECK(e.status() == 400);
  // The CLI's message for --max-batch 0, in the body's words.
  CHECK(std::string(e.what()) == "max_batch: 0 is not a batch size; accepted: a whole number from 1 to 65536");
  CHECK(json::parse(capsim::server::error_json(e.status(), e.what())) ==
        json({{"error", e.what()}, {"status", 400}}));
  b = bert;
  b["per_day"] = 100;
  CHECK(std::string(refusal(Endpoint::kBatchServe, b).what()) == "rate and per_day are alternatives; give one");
  b = bert;
  b["rate"] = "fast";
  CHECK(std::string(refusal(Endpoint::kBatchServe, b).what()).rfind("rate: expected a number", 0) == 0);
  b = bert;
  b["max_batches"] = 4;
  e = refusal(Endpoint::kBatchServe, b);
  CHECK(e.status() == 400);
  CHECK(std::string(e.what()).rfind("max_batches: not a field of a batch-serve body; accepted: model, ", 0) == 0);
  b = bert;
  b["prices"] = "calibration/prices.yaml";
  CHECK(std::string(refusal(Endpoint::kBatchServe, b).what()).rfind("prices: the server reads and writes no files", 0) == 0);
  b = bert;
  b["card"] = "calibration/cards/t4.yaml";
  CHECK(std::string(refusal(Endpoint::kBatchServe, b).what())
            .rfind("card: 'calibration/cards/t4.yaml' is not a card of the catalogue", 0) == 0);
  // Over the server's run limit: 422 before the run.
  b = bert;
  b["requests"] = 5000;
  Limits small;
  small.max_requests = 1000;
  e = refusal(Endpoint::kBatchServe, b, small);
  CHECK(e.status() == 422);
  CHECK(std::string(e.what()) ==
        "requests: 5000 items is more than the server runs (at most 1000 per run; capsim serve --max-requests)");
  b.erase("requests");
  b["duration"] = "2h";  // 7200 items at 1/s
  e = refusal(Endpoint::kBatchServe, b, small);
  CHECK(e.status() == 422);
  CHECK(std::string(e.what()).rfind("duration: 7200 items is more than the server runs", 0) == 0);

  e = refusal(Endpoint::kFinetune, {{"method", "qlora4"}});
  CHECK(e.status() == 400);
  CHECK(std::string(e.what()) == "method: 'qlora4' is not a fine-tuning method; accepted: full, lora, qlora");
  CHECK(std::string(refusal(Endpoint::kFinetune, {{"gradient_checkpointing", "yes"}}).what()) ==
        "gradient_checkpointing: expected true or false, got a string");
  CHECK(std::string(refusal(Endpoint::kFinetune, {{"cards", {"t4", "h100x"}}}).what()).rfind("cards: 'h100x' is not a card", 0) == 0);

  e = refusal(Endpoint::kCalibrate, {{"card", "h100-sxm"}, {"profile", {{"format", "capsim-calibration-profile"}}}});
  CHECK(e.status() == 400);
  CHECK(std::string(e.what()).rfind("profile: version: ", 0) == 0);
  // A profile from another GPU: found by the fit, worded as the body's fields (--force: force).
  e = refusal(Endpoint::kCalibrate,
              {{"card", "h100-sxm"}, {"profile", capsim::test::synthetic_profile({}, 1, "NVIDIA A100-SXM4-80GB")}});
  CHECK(e.status() == 400);
  CHECK(std::string(e.what()) ==
        "profile: provenance.gpu_name: 'NVIDIA A100-SXM4-80GB' does not match card h100-sxm (NVIDIA H100 SXM5 80GB): "
        "the GPU is a a100, the card's names do not include it; fit it to the card it was measured on, or pass force "
        "to accept it");
}

TEST_CASE("server: POST /v1/calibrate refuses a path, even to a readable profile", "[server][calibration]") {
  capsim_test::Scratch tmp("server_calibrate_path");
  const std::string file = tmp.write("h100.json", capsim::test::synthetic_profile({}, 11).dump());
  HttpError e = refusal(Endpoint::kCalibrate, {{"card", "h100-sxm"}, {"profile", file}});
  CHECK(e.status() == 400);
  CHECK(std::string(e.what()) ==
        "profile: the server reads no files; send the profile itself, capsim-calibrate's JSON object, not a path");
  for (const char* field : {"vidur", "out", "path"}) {
    e = refusal(Endpoint::kCalibrate, {{"card", "h100-sxm"}, {field, tmp.path()}});
    CHECK(e.status() == 400);
    CHECK(std::string(e.what()).rfind(std::string(field) + ": the server reads and writes no files", 0) == 0);
  }
  // A card file is not a catalogue name either.
  e = refusal(Endpoint::kCalibrate, {{"card", "calibration/cards/h100-sxm.yaml"}, {"profile", json::object()}});
  CHECK(e.status() == 400);
  CHECK(std::string(e.what()).rfind("card: 'calibration/cards/h100-sxm.yaml' is not a card of the catalogue", 0) == 0);
}

namespace {

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

const std::string kRunsDir = std::string(CAPSIM_DATA_DIR) + "/tests/data/calibrate-runs/";

// The body of POST /v1/calibrate/runs for tests/data/calibrate-runs' three vLLM result files.
json calibrate_runs_body() {
  json runs = json::array();
  for (const char* f : {"conc4.json", "conc16.json", "rate6.json"}) {
    runs.push_back({{"name", std::string("tests/data/calibrate-runs/") + f}, {"result", read_json(kRunsDir + f)}});
  }
  return {{"model", "llama-3.1-8b"},
          {"deployment", {{"card", "h100-sxm"}}},
          {"calibrate_runs", {{"runs", runs}, {"date", "2026-12-06"}}}};
}

}  // namespace

TEST_CASE("server and CLI: POST /v1/calibrate/runs fits the result files the body carries as `capsim calibrate runs` does",
          "[answers][server][calibrate-runs]") {
  const std::string api = answer(Endpoint::kCalibrateRuns, calibrate_runs_body());
  const auto cli = capsim_test::run_capsim(
      "calibrate runs tests/data/calibrate-runs/conc4.json tests/data/calibrate-runs/conc16.json "
      "tests/data/calibrate-runs/rate6.json --model llama-3.1-8b --card h100-sxm --date 2026-12-06 --json -");
  INFO(cli.err);
  REQUIRE(cli.status == 0);
  // The same fit; the profile's header names the command that wrote it.
  json expected = json::parse(cli.out);
  std::string profile = expected["profile_yaml"];
  const std::size_t from = profile.find("calibrated by `capsim calibrate runs ");
  REQUIRE(from != std::string::npos);
  const std::size_t start = from + std::string("calibrated by `").size();
  profile.replace(start, profile.find('`', start) - start, "POST /v1/calibrate/runs");
  expected["profile_yaml"] = profile;
  CHECK(api == expected.dump(2) + "\n");
  const json j = json::parse(api);
  // The files were made with a step overhead of 1.5 ms (tests/answers/calibrate_runs_test.cc).
  CHECK(j["written"]["overhead_step_ms"].get<double>() == Approx(1.5).margin(0.1));
  CHECK(j["runs"].size() == 3);
  CHECK(j["runs"][0]["run"] == "tests/data/calibrate-runs/conc4.json");
  CHECK(j["out"].is_null());
  CHECK(j["profile_yaml"].get<std::string>().find("own-runs-step") != std::string::npos);
}

TEST_CASE("server: POST /v1/calibrate/runs refuses paths, malformed runs and runs over the server's limits",
          "[server][calibrate-runs]") {
  json body = calibrate_runs_body();
  // A path, even to a readable result file.
  body["calibrate_runs"]["runs"][0] = kRunsDir + "conc4.json";
  HttpError e = refusal(Endpoint::kCalibrateRuns, body);
  CHECK(e.status() == 400);
  CHECK(std::string(e.what()) ==
        "calibrate_runs.runs[0]: the server reads no files; send the result file's JSON object itself");
  // A result without the keys either format has: the reader's message, naming the run.
  body = calibrate_runs_body();
  body["calibrate_runs"]["runs"][1]["result"] = json{{"completed", 5}};
  e = refusal(Endpoint::kCalibrateRuns, body);
  CHECK(e.status() == 400);
  CHECK(std::string(e.what()).rfind("tests/data/calibrate-runs/conc16.json", 0) == 0);
  // A result object given bare is named by its place in the list.
  body = calibrate_runs_body();
  body["calibrate_runs"]["runs"][2] = json{{"completed", "many"}};
  e = refusal(Endpoint::kCalibrateRuns, body);
  CHECK(e.status() == 400);
  CHECK(std::string(e.what()).rfind("calibrate_runs.runs[2]", 0) == 0);
  // Unknown fields, a non-array, a bad date.
  body = calibrate_runs_body();
  body["calibrate_runs"]["runs"][0]["file"] = "x";
  CHECK(refusal(Endpoint::kCalibrateRuns, body).status() == 400);
  body = calibrate_runs_body();
  body["calibrate_runs"]["runs"] = "conc4.json";
  CHECK(refusal(Endpoint::kCalibrateRuns, body).status() == 400);
  body = calibrate_runs_body();
  body["calibrate_runs"]["date"] = "06/12/2026";
  e = refusal(Endpoint::kCalibrateRuns, body);
  CHECK(e.status() == 400);
  CHECK(std::string(e.what()) == "calibrate_runs.date: expected a date as YYYY-MM-DD, e.g. \"2026-12-06\"");
  // One run: nothing can be cross-validated (the library's message).
  body = calibrate_runs_body();
  body["calibrate_runs"]["runs"].erase(1);
  body["calibrate_runs"]["runs"].erase(1);
  e = refusal(Endpoint::kCalibrateRuns, body);
  CHECK(e.status() == 400);
  CHECK(std::string(e.what()).find("leaving one run out needs at least 2") != std::string::npos);
  // Over the server's run limit: 422 before any simulation.
  Limits small;
  small.max_requests = 10;
  e = refusal(Endpoint::kCalibrateRuns, calibrate_runs_body(), small);
  CHECK(e.status() == 422);
  CHECK(std::string(e.what()).find("requests is more than the server runs (at most 10 per run") != std::string::npos);
  // More result files than one body may carry.
  body = calibrate_runs_body();
  for (int i = 0; i < 30; ++i) body["calibrate_runs"]["runs"].push_back(body["calibrate_runs"]["runs"][0]);
  e = refusal(Endpoint::kCalibrateRuns, body);
  CHECK(e.status() == 422);
  CHECK(std::string(e.what()) == "calibrate_runs.runs: 33 result files is more than the server fits at once (at most 32)");
}

TEST_CASE("server: POST /v1/calibrate/runs stops when its client goes away", "[server][calibrate-runs]") {
  const capsim::server::Job job = capsim::server::prepare(Endpoint::kCalibrateRuns, calibrate_runs_body().dump(), Limits{});
  auto cancel = std::make_shared<std::atomic<bool>>(true);  // already gone
  CHECK_THROWS_AS(job(cancel, [](const json&) {}), capsim::Cancelled);
}
