// Pipeline, data and expert parallelism through the command line and scenario files: vLLM's flag
// names, the memory fit they change, and bad input refused with exit status 2.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/support/temp_dir.h"

#ifndef CAPSIM_BINARY
#error "CAPSIM_BINARY must name the built capsim (the build defines it)"
#endif

namespace {

struct Run {
  int status = -1;
  std::string out, err;
};

Run capsim(const std::string& args) {
  capsim_test::TempDir tmp;
  const std::string err = tmp.path() + "/stderr";
  const std::string cmd = "env -u CAPSIM_DATA_DIR '" + std::string(CAPSIM_BINARY) + "' " + args + " 2>'" + err + "'";
  Run r;
  FILE* pipe = ::popen(cmd.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.out.append(buf, n);
  const int raw = ::pclose(pipe);
  REQUIRE(WIFEXITED(raw));
  r.status = WEXITSTATUS(raw);
  std::ifstream in(err);
  std::stringstream s;
  s << in.rdbuf();
  r.err = s.str();
  return r;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("capsim fit: Llama-3.1-405B needs TP 8 x PP 2 on 80 GB H100s", "[parallelism][cli]") {
  const Run tp8 = capsim("fit --model llama-3.1-405b --card h100-sxm --tp 8 --json -");
  const Run pp2 = capsim("fit --model llama-3.1-405b --card h100-sxm --tp 8 --pipeline-parallel-size 2 --json -");
  REQUIRE(pp2.status == 0);
  const auto a = nlohmann::json::parse(tp8.out);
  const auto b = nlohmann::json::parse(pp2.out);
  CHECK_FALSE(a.at("fits").get<bool>());
  CHECK(b.at("fits").get<bool>());
}

TEST_CASE("capsim roofline: DP attention with expert parallelism shows the all-to-all", "[parallelism][cli]") {
  const Run r = capsim("roofline --model deepseek-v3 --card h200 --dp 8 --enable-expert-parallel "
                       "--batch 64 --context 2048 --json -");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("cost_model") == "expert-parallel");
  bool a2a = false;
  for (const auto& g : j.at("groups")) a2a = a2a || g.at("group") == "all_to_all";
  CHECK(a2a);
}

TEST_CASE("bad parallelism exits 2 naming the flag or field", "[parallelism][cli]") {
  const Run dense = capsim("simulate --model llama-3.1-8b --tp 2 --enable-expert-parallel -n 10");
  CHECK(dense.status == 2);
  CHECK(has(dense.err, "--enable-expert-parallel"));
  CHECK(has(dense.err, "dense model"));
  const Run stages = capsim("simulate --model llama-3.1-8b --pp 40 -n 10");
  CHECK(stages.status == 2);
  CHECK(has(stages.err, "accepted: 1 to 32"));

  capsim_test::TempDir tmp;
  const std::string path = tmp.path() + "/s.yaml";
  std::ofstream(path) << "model: llama-3.1-8b\ndeployment: {tp: 2, pp: 2, enable_expert_parallel: maybe}\n";
  const Run yaml = capsim("simulate " + path + " -n 10");
  CHECK(yaml.status == 2);
  CHECK(has(yaml.err, "deployment.enable_expert_parallel: 'maybe'; accepted: true, false"));
}

TEST_CASE("a scenario file's tp: 4, pp: 2 runs 8 GPUs per replica", "[parallelism][cli]") {
  capsim_test::TempDir tmp;
  const std::string path = tmp.path() + "/s.yaml";
  std::ofstream(path) << "model: llama-3.1-70b\ndeployment: {card: h100-sxm, tp: 4, pp: 2}\n"
                         "workload: {rate: 2, requests: 40, input_tokens: 512, output_tokens: 64}\n";
  const Run r = capsim("simulate " + path + " --json -");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("completed") == 40);
}
