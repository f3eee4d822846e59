// Pipeline, data and expert parallelism through the command line and scenario files: vLLM's flag
// names, the memory fit they change, and bad input refused with exit status 2.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/check/cli_run.h"

namespace {

using capsim_test::has;

capsim_test::Run capsim(const std::string& args) { return capsim_test::run_capsim(args); }

}  // namespace

TEST_CASE("capsim fit: Llama-3.1-405B needs TP 8 x PP 2 on 80 GB H100s", "[parallelism][cli]") {
  const capsim_test::Run tp8 = capsim("fit --model llama-3.1-405b --card h100-sxm --tp 8 --json -");
  const capsim_test::Run pp2 = capsim("fit --model llama-3.1-405b --card h100-sxm --tp 8 --pipeline-parallel-size 2 --json -");
  REQUIRE(pp2.status == 0);
  const auto a = nlohmann::json::parse(tp8.out);
  const auto b = nlohmann::json::parse(pp2.out);
  CHECK_FALSE(a.at("fits").get<bool>());
  CHECK(b.at("fits").get<bool>());
  CHECK(b.at("pp") == 2);
  CHECK(b.at("gpus") == 16);
  CHECK_FALSE(a.contains("pp"));  // a TP-only answer is unchanged
}

TEST_CASE("capsim roofline: DP attention with expert parallelism shows the all-to-all", "[parallelism][cli]") {
  const capsim_test::Run r = capsim("roofline --model deepseek-v3 --card h200 --dp 8 --enable-expert-parallel "
                       "--batch 64 --context 2048 --json -");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("cost_model") == "expert-parallel");
  bool a2a = false;
  for (const auto& g : j.at("groups")) a2a = a2a || g.at("group") == "all_to_all";
  CHECK(a2a);
}

TEST_CASE("bad parallelism exits 2 naming the flag or field", "[parallelism][cli]") {
  const capsim_test::Run dense = capsim("simulate --model llama-3.1-8b --tp 2 --enable-expert-parallel -n 10");
  CHECK(dense.status == 2);
  CHECK(has(dense.err, "--enable-expert-parallel"));
  CHECK(has(dense.err, "dense model"));
  const capsim_test::Run stages = capsim("simulate --model llama-3.1-8b --pp 40 -n 10");
  CHECK(stages.status == 2);
  CHECK(has(stages.err, "accepted: 1 to 32"));

  capsim_test::TempDir tmp;
  const std::string path = tmp.path() + "/s.yaml";
  std::ofstream(path) << "model: llama-3.1-8b\ndeployment: {tp: 2, pp: 2, enable_expert_parallel: maybe}\n";
  const capsim_test::Run yaml = capsim("simulate " + path + " -n 10");
  CHECK(yaml.status == 2);
  CHECK(has(yaml.err, "deployment.enable_expert_parallel: 'maybe'; accepted: true, false"));
}

TEST_CASE("a scenario file's tp: 4, pp: 2 runs 8 GPUs per replica", "[parallelism][cli]") {
  capsim_test::TempDir tmp;
  const std::string path = tmp.path() + "/s.yaml";
  std::ofstream(path) << "model: llama-3.1-70b\ndeployment: {card: h100-sxm, tp: 4, pp: 2}\n"
                         "workload: {rate: 2, requests: 40, input_tokens: 512, output_tokens: 64}\n";
  const capsim_test::Run r = capsim("simulate " + path + " --json -");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("completed") == 40);
}
