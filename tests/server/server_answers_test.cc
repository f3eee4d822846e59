// One question, one answer (#33): the HTTP API of `capsim serve` and the CLI, given one scenario
// (the body, and the same text as a scenario file: JSON is YAML), answer simulate, plan and
// compare with the same bytes `--json -` prints. tests/server/server_test.cc checks the same over
// real sockets for scenarios given as flags; here the scenario has what flags alone rarely carry
// (multi-turn users, a system prompt, an fp8 KV cache, replicas and a router), and the API is
// driven without its transport (prepare() and the job it returns, as the server runs it).
#include <catch2/catch.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/core/cancel.h"
#include "sim/server/api.h"
#include "tests/check/cli_run.h"

namespace {

using capsim::server::Endpoint;
using nlohmann::json;

// The 100-user chatbot of workloads/chat-8b-1x-h100.yaml at 60 users for 6 minutes, on two RTX
// 4090s with an fp8 KV cache behind prefix-aware routing.
const json kScenario = json::parse(R"({
  "name": "answers-chat", "description": "one scenario through the API and the CLI",
  "model": "llama-3.1-8b",
  "deployment": {"card": "rtx-4090", "replicas": 2, "kv_cache": "fp8", "engine": "vllm"},
  "router": "prefix-aware",
  "workload": {"users": 60, "think_time": {"dist": "exponential", "mean": "15s"},
               "turns": {"dist": "geometric", "mean": 3}, "system_prompt_tokens": 200,
               "prompt_tokens": {"dist": "lognormal", "mean": 200, "p99": 1500},
               "output_tokens": {"dist": "lognormal", "mean": 300, "p99": 1200},
               "duration": "6min", "warmup": "1min"},
  "slo": {"ttft_p95": "1s", "tpot_p95": "60ms"},
  "seed": 2})");

// The API's answer to `body` at `e`: the JSON text the server sends.
std::string answer(Endpoint e, const json& body) {
  const capsim::server::Job job = capsim::server::prepare(e, body.dump(), capsim::server::Limits{});
  return job(std::make_shared<std::atomic<bool>>(false), [](const json&) {});
}

// stdout of `capsim COMMAND FILE ARGS --json -`, FILE holding the scenario's text.
std::string cli(const std::string& command, const std::string& args = "") {
  capsim_test::Scratch tmp("server_answers");
  const std::string file = tmp.write("answers-chat.yaml", kScenario.dump(2));
  const auto r = capsim_test::run_capsim(command + " '" + file + "'" + args + " -q --json -");
  INFO(r.err);
  CHECK(r.status <= 1);
  return r.out;
}

}  // namespace

TEST_CASE("server and CLI: one scenario through POST /v1/simulate and `capsim simulate FILE` gives the same answer",
          "[answers][server]") {
  const std::string api = answer(Endpoint::kSimulate, kScenario);
  CHECK(api == cli("simulate"));
  const json j = json::parse(api);
  // The scenario as given, not a default: two replicas with an fp8 KV cache, prefix-aware.
  CHECK(j["scenario"] == "answers-chat");
  CHECK(j["router"] == "prefix-aware");
  CHECK(j["deployment"][0]["replicas"] == 2);
  CHECK(j["deployment"][0]["kv_cache"] == "fp8");
  CHECK(j["capsim"]["prefix_cache_hit_rate"].get<double>() > 0);
}

TEST_CASE("server and CLI: one scenario through POST /v1/plan and /v1/compare gives `capsim plan` and "
          "`capsim compare`'s answers",
          "[answers][server][plan]") {
  json plan = kScenario;
  plan["plan"] = {{"cards", {"rtx-4090", "l4"}}, {"tp", {1}}};
  const std::string planned = answer(Endpoint::kPlan, plan);
  CHECK(planned == cli("plan", " --cards rtx-4090,l4 --tp 1"));
  const json p = json::parse(planned);
  REQUIRE_FALSE(p["options"].empty());

  // plan's cheapest option, and the scenario's own deployment, compared through both.
  const json& o = p["options"][0];
  const std::string cheapest = std::to_string(o["replicas"].get<int>()) + "x " + o["card"].get<std::string>() + " " +
                               o["weights"].get<std::string>() + " kv:" + o["kv_cache"].get<std::string>();
  json compare = kScenario;
  compare["router"] = o["router"];
  compare["compare"] = {{"deployments", {cheapest, "2x rtx-4090"}}};
  const std::string compared = answer(Endpoint::kCompare, compare);
  json with_router = kScenario;
  with_router["router"] = o["router"];
  capsim_test::Scratch tmp("server_answers_compare");
  const std::string file = tmp.write("answers-chat.yaml", with_router.dump(2));
  const auto r = capsim_test::run_capsim("compare '" + file + "' -d '" + cheapest + "' -d '2x rtx-4090' -q --json -");
  CHECK(compared == r.out);
  const json c = json::parse(compared);
  REQUIRE(c["deployments"].size() == 2);
  // The cheapest option meets the SLOs in compare as in plan, with plan's numbers.
  CHECK(c["deployments"][0]["decision"] == o["result"]["decision"]);
  CHECK(c["deployments"][0]["p95_ttft_ms"].get<double>() == Approx(o["result"]["p95_ttft_ms"].get<double>()).epsilon(1e-12));
  CHECK(c["deployments"][0]["usd_per_hour"].get<double>() == Approx(o["usd_per_hour"].get<double>()).epsilon(1e-12));
}
