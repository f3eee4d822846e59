// What `capsim serve` accepts of a request body before any work (sim/server/api.h prepare()),
// driven here without the transport: runs past the run limits are 422; a name resolves only in
// the catalogues, and a path in any field is 400 before anything opens it.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/server/api.h"
#include "tests/support/temp_dir.h"

namespace {

using capsim::server::Endpoint;
using capsim::server::HttpError;
using capsim::server::Limits;
using capsim::server::prepare;

// The HttpError prepare() throws for `body` at `e` (status 0 when it prepared a job).
HttpError refusal(Endpoint e, const std::string& body) {
  try {
    (void)prepare(e, body, Limits{});
  } catch (const HttpError& x) {
    return x;
  }
  return HttpError(0, "prepared");
}

}  // namespace

TEST_CASE("server prepare: a CPU KV tier whose bookkeeping passes the run limits is 422 naming the field",
          "[server][limits][offload]") {
  // 1e5 GiB of Llama-3.1-8B's 2 MiB blocks: 51,200,000 blocks, 4.00 GiB of bookkeeping when full
  // (over the 2 GiB limit); a 20-request run of it took the server from 16 MB to 1.4 GB.
  const HttpError big = refusal(Endpoint::kSimulate, R"({"model": "llama-3.1-8b", "engine": {"kv_offloading_size": 100000},
                                                         "workload": {"rate": 5, "requests": 20}})");
  CHECK(big.status() == 422);
  CHECK_THAT(big.what(), Catch::Contains("engine.kv_offloading_size: 100000 GiB is 51200000 CPU KV blocks per "
                                         "replica, x 1 replica: 4.0"));
  CHECK_THAT(big.what(), Catch::Contains("the server's limit (docs/server.md#limits)"));
  // 8 GiB is 4096 blocks: prepared.
  CHECK(refusal(Endpoint::kSimulate, R"({"model": "llama-3.1-8b", "engine": {"kv_offloading_size": 8},
                                         "workload": {"rate": 5, "requests": 20}})")
            .status() == 0);
}

namespace {

// The 400 prepare() gives `body` at `e`, checked to quote none of `secret` (a file's content).
std::string refused_400(Endpoint e, const std::string& body, const std::string& secret) {
  const HttpError x = refusal(e, body);
  CHECK(x.status() == 400);
  CHECK_THAT(x.what(), !Catch::Contains(secret));
  CHECK_THAT(x.what(), !Catch::Contains("last read"));
  return x.what();
}

}  // namespace

TEST_CASE("server prepare: a name resolves only in the catalogues, a path is 400, never opened",
          "[server][files]") {
  capsim_test::TempDir tmp("serve_names");
  // What the server must not read: a file with a marker line, a FIFO (opening it would block
  // prepare, and with it the server's I/O thread), /etc/passwd, a path relative to the cwd.
  const std::string secret = "capsim-secret-7f3a";
  const std::string file = tmp.write("secret.yaml", secret + ": 1\n");
  const std::string csv = tmp.write("lengths.csv", "tokens\n" + secret + "\n");
  const std::string fifo = tmp.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string load = R"("workload": {"rate": 5, "requests": 20})";
  const auto draft = [&](const std::string& path) {
    return R"({"model": "llama-3.1-8b", "speculative": {"method": "draft_model", "model": ")" + path +
           R"(", "acceptance": 0.7}, )" + load + "}";
  };

  // speculative.model (method draft_model) was opened as a config.json: /etc/passwd answered
  // "last read: 'r'", a FIFO blocked the server. Each is refused naming the field and the list.
  for (const std::string& path : {std::string("/etc/passwd"), fifo, file, std::string("models/llama-3.2-1b/config.json"),
                                  std::string("./models/llama-3.2-1b")}) {
    const std::string m = refused_400(Endpoint::kSimulate, draft(path), secret);
    CHECK_THAT(m, Catch::Contains("speculative.model: '" + path + "' is not in the catalogue"));
    CHECK_THAT(m, Catch::Contains("accepted (GET /v1/models): "));
    CHECK_THAT(m, !Catch::Contains("root:"));
  }
  // A catalogue name is a draft; another method's `model` is a checkpoint never opened.
  CHECK(refusal(Endpoint::kSimulate, draft("llama-3.2-1b")).status() == 0);
  CHECK(refusal(Endpoint::kSimulate, R"({"model": "llama-3.1-8b", "speculative": {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}, )" +
                                         load + "}")
            .status() == 0);

  // Cards and engines: every field that names one, as a path to an existing file.
  const std::string card_list = "accepted (GET /v1/cards): ";
  const std::vector<std::pair<std::string, std::string>> cards = {
      {R"({"deployment": {"card": "FILE"}, )" + load + "}", "deployment.card: 'FILE' is not a card of the catalogue"},
      {R"({"deployment": [{"card": "h100-sxm"}, {"card": "FILE"}], )" + load + "}",
       "deployment[1].card: 'FILE' is not a card of the catalogue"},
      {R"({"serving": "pd-disaggregated", "disaggregation": {"prefill": {"card": "h100-sxm"}, "decode": {"card": "FILE"},
           "kv_link": "nvlink-h100"}, )" + load + "}",
       "disaggregation.decode.card: 'FILE' is not a card of the catalogue"}};
  for (const auto& [body, message] : cards) {
    const auto at = [&](std::string t) {
      for (std::size_t i; (i = t.find("FILE")) != std::string::npos;) t.replace(i, 4, file);
      return t;
    };
    const std::string m = refused_400(Endpoint::kSimulate, at(body), secret);
    CHECK_THAT(m, Catch::Contains(at(message)));
    CHECK_THAT(m, Catch::Contains(card_list));
  }
  const std::string engine = refused_400(Endpoint::kSimulate, R"({"deployment": {"engine": ")" + file + R"("}, )" + load + "}", secret);
  CHECK_THAT(engine, Catch::Contains("deployment.engine: '" + file + "' is not an engine of the catalogue"));
  CHECK_THAT(engine, Catch::Contains("accepted (GET /v1/engines): "));

  // Empirical distributions read a CSV: input and output lengths, and a chat's think time and turns.
  for (const std::string field : {"input_tokens", "output_tokens", "think_time", "turns"}) {
    const std::string body = R"({"workload": {"users": 4, "duration": "60s", ")" + field +
                             R"(": {"dist": "empirical", "file": ")" + csv + R"(", "column": "tokens"}}})";
    CHECK_THAT(refused_400(Endpoint::kSimulate, body, secret),
               Catch::Contains("workload." + field + ": empirical distributions read a file"));
  }

  // The commands' own options: plan's cards and prices, compare's deployments and search mix.
  const std::string slo = R"("slo": {"ttft_p95": "1s"}, )" + load;
  CHECK_THAT(refused_400(Endpoint::kPlan, R"({"plan": {"cards": ["h100-sxm", ")" + file + R"("]}, )" + slo + "}", secret),
             Catch::Contains("plan.cards: '" + file + "' is not a card of the catalogue"));
  CHECK_THAT(refused_400(Endpoint::kPlan, R"({"plan": {"price": {")" + file + R"(": 2}}, )" + slo + "}", secret),
             Catch::Contains("plan.price: '" + file + "' is not a card of the catalogue"));
  CHECK_THAT(refused_400(Endpoint::kCompare, R"({"compare": {"deployments": ["1x h100-sxm", "2x )" + file + R"( tp2"]}, )" + load + "}",
                         secret),
             Catch::Contains("compare.deployments: '" + file + "' is not a card of the catalogue"));
  CHECK_THAT(refused_400(Endpoint::kCompare, R"({"compare": {"search_mix": "h100-sxm,)" + file + R"("}, )" + load + "}", secret),
             Catch::Contains("compare.search_mix: '" + file + "' is not a card of the catalogue"));

  // A check body: an assertion's scenario fields, a baseline in any form, a plan expectation's cards.
  const std::string assertion = R"({"assertions": [{"name": "a", "model": "llama-3.1-8b", )" + load + ", ";
  CHECK_THAT(refused_400(Endpoint::kCheck, assertion + R"("speculative": {"method": "draft_model", "model": ")" + fifo +
                                               R"("}, "expect": {"no_preemption": true}}]})",
                         secret),
             Catch::Contains("assertions[0].speculative.model: '" + fifo + "' is not in the catalogue"));
  CHECK_THAT(refused_400(Endpoint::kCheck, assertion + R"("expect": {"baseline": {"file": ")" + file + R"(", "tolerance": "10%"}}}]})",
                         secret),
             Catch::Contains("assertions[0].expect.baseline: the server reads no files"));
  CHECK_THAT(refused_400(Endpoint::kCheck, assertion + R"("slo": {"ttft_p95": "1s"}, "expect": {"plan_cheapest_max_usd_per_hour": {"max_usd_per_hour": 10, "cards": [")" +
                                               file + R"("]}}}]})",
                         secret),
             Catch::Contains("assertions[0].expect.plan_cheapest_max_usd_per_hour.cards: '" + file + "' is not a card"));
  CHECK_THAT(refused_400(Endpoint::kCheck, R"({"model": "llama-3.1-8b", "slo": {"ttft_p95": "1s"}, "deployment": {"engine": ")" +
                                               file + R"("}, )" + load + "}",
                         secret),
             Catch::Contains("deployment.engine: '" + file + "' is not an engine of the catalogue"));
}

TEST_CASE("server prepare: plan.card_class keeps the catalogue's cards of those classes, plan.explain names a card",
          "[server][plan]") {
  // The same library call as `capsim plan --card-class consumer`: the candidates are the two
  // GeForce cards of the catalogue (card_class: consumer), nothing else.
  const std::string body =
      R"({"model": "llama-3.1-8b", "workload": {"rate": 2, "duration": "2min", "input_tokens": 512, "output_tokens": 128},
          "slo": {"ttft_p95": "1s"}, "plan": {"card_class": ["consumer"], "tp": [1], "kv_cache": ["auto"], "top": 2}})";
  const auto job = prepare(Endpoint::kPlan, body, Limits{});
  const nlohmann::json j = nlohmann::json::parse(job(std::make_shared<std::atomic<bool>>(false), {}));
  std::set<std::string> cards;
  for (const auto& o : j["options"]) cards.insert(o["card"].get<std::string>());
  for (const auto& o : j["rejected"]) cards.insert(o["card"].get<std::string>());
  CHECK(cards == std::set<std::string>{"rtx-3090", "rtx-4090"});
  const HttpError bad = refusal(Endpoint::kPlan, R"({"model": "llama-3.1-8b", "workload": {"rate": 2}, "slo": {"ttft_p95": "1s"},
                                                      "plan": {"explain": "t5"}})");
  CHECK(bad.status() == 400);
  CHECK_THAT(std::string(bad.what()), Catch::Contains("plan.explain"));
}
