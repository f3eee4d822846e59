// One question, one answer (#33): where two commands answer the same question about the same
// deployment and workload, they give the same verdict and the same numbers.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/check/cli_run.h"

namespace {

using capsim_test::has;
using capsim_test::run_capsim;

nlohmann::json json_of(const capsim_test::Run& r) {
  INFO(r.err);
  return nlohmann::json::parse(r.out);
}

}  // namespace

TEST_CASE("fit, compare and plan agree that 70B fp8 on one H100 does not fit", "[answers][cli]") {
  // Its KV cache holds 96 tokens. Before, `fit` said it does not fit, `compare` printed a row of
  // "0 ns" latencies "limited by idle" and `plan` searched it and rejected it at "inf x its bound".
  const std::string why = "the KV cache (96 tokens) cannot hold one sequence of 4096 tokens";
  const auto fit = run_capsim("fit --model llama-3.1-70b --card h100-sxm --weights fp8 --json -");
  CHECK(fit.status == 1);
  const auto fj = json_of(fit);
  CHECK_FALSE(fj["fits"].get<bool>());
  CHECK(fj["reason"] == why);

  const std::string scenario = "workloads/chat-8b-1x-h100.yaml --model llama-3.1-70b ";
  const auto cmp = run_capsim("compare " + scenario + "-d '1x h100-sxm fp8' -q --json -");
  CHECK(cmp.status == 1);
  const auto cj = json_of(cmp);
  REQUIRE(cj["deployments"].size() == 1);
  const auto& row = cj["deployments"][0];
  CHECK_FALSE(row["fits"].get<bool>());
  CHECK_FALSE(row.contains("p95_ttft_ms"));
  CHECK(has(row["error"].get<std::string>(), "llama-3.1-70b does not fit on h100-sxm with TP 1: " + why));
  const auto text = run_capsim("compare " + scenario + "-d '1x h100-sxm fp8' -q");
  CHECK(has(text.out, "does not fit"));
  CHECK_FALSE(has(text.out, "0 ns"));
  CHECK_FALSE(has(text.out, "idle"));
  CHECK(has(text.out, "verdict: none of the deployments can run"));

  const auto plan = run_capsim("plan " + scenario + "--cards h100-sxm --tp 1 --weights fp8 --kv-cache auto -q --json -");
  CHECK(plan.status == 1);
  const auto pj = json_of(plan);
  CHECK(pj["options"].empty());
  REQUIRE(pj["rejected"].size() == 1);
  CHECK(pj["rejected"][0]["reason"] == "does not fit: " + why);
}
