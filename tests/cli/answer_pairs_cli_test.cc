// One question, one answer (#33), pair by pair: plan's cheapest option run again by compare and
// by simulate, compare's verdict against check's, plan against check's plan_cheapest. Each pair
// runs the same scenario, seed, deployment and duration through both commands and asserts the
// same verdict and the same numbers (with --replications: the same interval over the seeds).
//
// The scenario: the 100-user chatbot (workloads/chat-8b-1x-h100.yaml) shortened to 10 minutes
// with 2 of warm-up, planned on T4s at TP 2 only (about 2 s of plan). Its cheapest option needs
// 4 replicas behind prefix-aware routing (least-outstanding, the scenario's router, needs more):
// compare and simulate must be told the router, the replica count, TP and both precisions.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "sim/core/units.h"
#include "tests/check/cli_run.h"

namespace {

using capsim_test::has;
using capsim_test::run_capsim;
using nlohmann::json;

const std::string kScenario = "workloads/chat-8b-1x-h100.yaml --duration 10min --warmup 2min";
const std::string kPlanSpace = " --cards t4 --tp 2";

json json_of(const capsim_test::Run& r) {
  INFO(r.err);
  return json::parse(r.out);
}

// One of plan's runs of an option ("result" or "with_one_replica_fewer") as compare's -d text.
std::string deployment_text(const json& option, int replicas) {
  return std::to_string(replicas) + "x " + option["card"].get<std::string>() + " tp" +
         std::to_string(option["tp"].get<int>()) + " " + option["weights"].get<std::string>() +
         " kv:" + option["kv_cache"].get<std::string>();
}

// The same option as simulate's deployment flags.
std::string deployment_flags(const json& option, int replicas) {
  return " --card " + option["card"].get<std::string>() + " --tp " + std::to_string(option["tp"].get<int>()) +
         " --weights " + option["weights"].get<std::string>() + " --kv-cache " + option["kv_cache"].get<std::string>() +
         " --replicas " + std::to_string(replicas) + " --router " + option["router"].get<std::string>();
}

// simulate's SLOs decided as plan and compare decide a run: FAIL if one fails, else
// INCONCLUSIVE if one is, else PASS.
std::string overall(const json& decisions, const char* key) {
  bool fail = false, inconclusive = false;
  for (const auto& s : decisions) {
    fail = fail || s[key] == "FAIL";
    inconclusive = inconclusive || s[key] == "INCONCLUSIVE";
  }
  return fail ? "FAIL" : inconclusive ? "INCONCLUSIVE" : "PASS";
}

void check_same_numbers(const json& a, const json& b) {
  for (const char* k : {"p95_ttft_ms", "p95_tpot_ms", "p95_e2el_ms", "output_throughput"}) {
    INFO(k);
    CHECK(a[k].get<double>() == Approx(b[k].get<double>()).epsilon(1e-12));
  }
}

}  // namespace

TEST_CASE("plan's cheapest option, run by compare and by simulate, gives plan's numbers, cost and verdict",
          "[answers][plan][cli]") {
  const auto plan = run_capsim("plan " + kScenario + kPlanSpace + " -q --json -");
  REQUIRE(plan.status == 0);
  const json pj = json_of(plan);
  REQUIRE_FALSE(pj["options"].empty());
  const json& option = pj["options"][0];
  // What makes the pair worth running: the option is not the scenario's deployment.
  REQUIRE(option["router"] == "prefix-aware");
  REQUIRE(option["replicas"].get<int>() == 4);
  REQUIRE(option["tp"].get<int>() == 2);
  CHECK(option["weights"] == "fp16");
  CHECK(option["kv_cache"] == "fp16");
  const double usd_per_replica = option["usd_per_hour"].get<double>() / option["replicas"].get<double>();

  // The option (PASS) and its run with one replica fewer (why it needs 4: FAIL).
  for (const char* which : {"result", "with_one_replica_fewer"}) {
    const json& run = option[which];
    const int replicas = run["replicas"].get<int>();
    INFO(which << ": " << deployment_text(option, replicas));
    CHECK(run["decision"] == (replicas == 4 ? "PASS" : "FAIL"));

    const auto cmp = run_capsim("compare " + kScenario + " -d '" + deployment_text(option, replicas) +
                                "' --router " + option["router"].get<std::string>() + " -q --json -");
    const json row = json_of(cmp)["deployments"][0];
    check_same_numbers(row, run);
    CHECK(row["decision"] == run["decision"]);
    CHECK(row["slos_met"] == run["slos_met"]);
    CHECK(row["best"] == run["slos_met"]);
    CHECK(cmp.status == (run["slos_met"].get<bool>() ? 0 : 1));
    CHECK(row["worst_slo"] == run["worst_slo"]);
    CHECK(row["worst_slo_ratio"].get<double>() == Approx(run["worst_slo_ratio"].get<double>()).epsilon(1e-12));
    CHECK(row["binding_resource"] == run["binding_resource"]);
    CHECK(row["steady_state"] == run["steady_state"]);
    CHECK(row["usd_per_hour"].get<double>() == Approx(usd_per_replica * replicas).epsilon(1e-12));
    if (replicas == option["replicas"].get<int>()) {
      CHECK(row["usd_per_hour"].get<double>() == Approx(option["usd_per_hour"].get<double>()).epsilon(1e-12));
      CHECK(row["usd_per_million_output_tokens"].get<double>() ==
            Approx(option["usd_per_million_output_tokens"].get<double>()).epsilon(1e-12));
      // Whether it holds at its class's p90 model error: the same object, from the same call.
      REQUIRE(row.contains("model_error"));
      CHECK(row["model_error"] == option["model_error"]);
      CHECK(row["model_error"]["holds_at_p90"].is_boolean());
      // What the card's efficiencies rest on: plan's card_data, per group in compare.
      REQUIRE(row["card_data"].size() == 1);
      CHECK(row["card_data"][0]["card"] == option["card"]);
      for (const char* k : {"card_class", "efficiencies", "basis"}) CHECK(row["card_data"][0][k] == option["card_data"][k]);
    }

    const json sim = json_of(run_capsim("simulate " + kScenario + deployment_flags(option, replicas) + " -q --json -"));
    check_same_numbers(sim, run);
    CHECK(overall(sim["capsim"]["slos"], "decision") == run["decision"]);
    // The SLO decided on the same steady-state estimate and interval.
    const json& ttft = sim["capsim"]["slos"][0];
    REQUIRE(ttft["slo"] == "ttft_p95");
    CHECK(ttft["estimate_ms"].get<double>() == Approx(run["steady_state"]["ttft"]["p95"]["estimate_ms"].get<double>()).epsilon(1e-12));
    CHECK(ttft["high_ms"].get<double>() == Approx(run["steady_state"]["ttft"]["p95"]["high_ms"].get<double>()).epsilon(1e-12));
  }
}

TEST_CASE("plan --replications and simulate --replications decide the option on the same interval over seeds",
          "[answers][plan][replications][cli]") {
  // Over seeds 2, 3 and 4 the cheapest T4 TP2 option needs 6 replicas (one run's batch means
  // said 4): TTFT p95 533.12 ms over the seeds, 95% interval up to 589.60 ms.
  capsim_test::Scratch tmp("plan_seeds");
  const std::string file = tmp.file("plan.json");
  const auto plan = run_capsim("plan " + kScenario + kPlanSpace + " --replications 3 -q --json '" + file + "'");
  REQUIRE(plan.status == 0);
  const json pj = json::parse(capsim_test::read_all(file));
  const json& option = pj["options"][0];
  CHECK(option["verified_over_seeds"] == 3);
  REQUIRE(option["replicas"].get<int>() == 6);

  for (const char* which : {"result", "with_one_replica_fewer"}) {
    const json& run = option[which];
    const int replicas = run["replicas"].get<int>();
    INFO(which << ": " << replicas << " replicas");
    const json sim = json_of(run_capsim("simulate " + kScenario + deployment_flags(option, replicas) +
                                        " --replications 3 -q --json -"));
    const json& over = sim["capsim"]["over_seeds"];
    CHECK(over["seeds"] == json::array({2, 3, 4}));
    CHECK(overall(over["statistics"], "decision") == run["decision"]);
    // The run plan reports is the scenario's seed, as simulate's own numbers are.
    check_same_numbers(sim, run);
    if (replicas == option["replicas"].get<int>()) {
      CHECK(run["decision"] == "PASS");
      // plan's table shows the over-seeds mean of TTFT p95 and the upper end of its interval.
      const json& ttft = over["statistics"][0];
      REQUIRE(ttft["statistic"] == "ttft_p95");
      const std::string cell = capsim::units::format_time(ttft["mean_ms"].get<double>() / 1e3) + " (<=" +
                               capsim::units::format_time(ttft["high_ms"].get<double>() / 1e3) + ")";
      CHECK(cell == "533.12 ms (<=589.60 ms)");
      CHECK(has(plan.out, "  1  t4 tp2 fp16  assumed  prefix-aware         6     12  " + cell));
    } else {
      CHECK(run["decision"] != "PASS");
    }
  }
}

namespace {

// The verdict of one assertion of a check JSON: FAIL if a check fails, else INCONCLUSIVE if one
// is, else PASS (check's exit status 1 / 3 / 0).
std::string check_verdict(const json& assertion) {
  return overall(assertion["checks"], "status");
}

// `capsim compare` of one deployment: its row.
json compare_row(const std::string& scenario, const std::string& deployment, const std::string& extra = "") {
  const auto r = run_capsim("compare " + scenario + " -d '" + deployment + "'" + extra + " -q --json -");
  const json j = json_of(r);
  REQUIRE(j["deployments"].size() == 1);
  return j["deployments"][0];
}

}  // namespace

TEST_CASE("check's SLO verdict on a deployment is compare's, on the same estimate, for PASS, FAIL, "
          "INCONCLUSIVE and a deployment that rejects requests",
          "[answers][check][cli]") {
  capsim_test::Scratch tmp("check_vs_compare");
  const std::string chat = std::string(CAPSIM_DATA_DIR) + "/workloads/chat-8b-1x-h100.yaml";
  const std::string t4 = "    workload: {duration: 10min, warmup: 2min}\n    router: prefix-aware\n";
  // Rejections: prompts up to 3000 tokens on a server whose max_model_len is 2048 (148 of 425
  // measured requests refused; the 277 answered ones have a TTFT p95 of 65 ms).
  const std::string rejecting_flags =
      "--model llama-3.1-8b --rate 2 --duration 4min --warmup 30s --input-tokens uniform:100:3000 "
      "--max-model-len 2048 --slo 'ttft_p95<=1s'";
  const std::string file = tmp.write("assumptions.yaml",
      "assertions:\n"
      "  - name: four\n    scenario: " + chat + "\n" + t4 +
      "    deployment: {card: t4, tp: 2, replicas: 4, weights: fp16, kv_cache: fp16}\n"
      "    expect: {slo: true, max_cost_usd_per_hour: 100}\n"
      "  - name: three\n    scenario: " + chat + "\n" + t4 +
      "    deployment: {card: t4, tp: 2, replicas: 3, weights: fp16, kv_cache: fp16}\n"
      "    expect: {slo: true, max_cost_usd_per_hour: 100}\n"
      "  - name: straddles\n    scenario: " + chat + "\n" + t4 +
      "    deployment: {card: t4, tp: 2, replicas: 4, weights: fp16, kv_cache: fp16}\n"
      "    slo: {ttft_p95: 900ms}\n"
      "    expect: {slo: true}\n"
      "  - name: rejects\n    model: llama-3.1-8b\n    deployment: {card: h100-sxm}\n"
      "    engine: {max_model_len: 2048}\n"
      "    workload: {rate: 2, duration: 4min, warmup: 30s, prompt_tokens: 'uniform:100:3000'}\n"
      "    slo: {ttft_p95: 1s}\n"
      "    expect: {slo: true, max_cost_usd_per_hour: 100}\n");
  const auto chk = run_capsim("check '" + file + "' -q --json -");
  CHECK(chk.status == 1);
  const json cj = json_of(chk);
  REQUIRE(cj["assertions"].size() == 4);

  const std::string chat_flags = kScenario + " --router prefix-aware";
  const json rows[] = {
      compare_row(chat_flags, "4x t4 tp2 fp16 kv:fp16"),
      compare_row(chat_flags, "3x t4 tp2 fp16 kv:fp16"),
      compare_row(chat_flags, "4x t4 tp2 fp16 kv:fp16", " --slo 'ttft_p95<=900ms'"),
      compare_row(rejecting_flags, "1x h100-sxm"),
  };
  const char* expected[] = {"PASS", "FAIL", "INCONCLUSIVE", "FAIL"};
  for (std::size_t i = 0; i < 4; ++i) {
    const json& a = cj["assertions"][i];
    const json& row = rows[i];
    INFO(a["name"].get<std::string>() << " vs " << row["deployment"].get<std::string>());
    CHECK(check_verdict(a) == expected[i]);
    CHECK(row["decision"] == expected[i]);
    CHECK(row["slos_met"] == (check_verdict(a) == "PASS"));
    for (const auto& c : a["checks"]) {
      if (c["kind"] == "max_cost_usd_per_hour") {
        CHECK(c["measured"].get<double>() == Approx(row["usd_per_hour"].get<double>()).epsilon(1e-12));
        continue;
      }
      // Each SLO: the same steady-state estimate and interval as compare's run.
      const std::string item = c["item"];
      const json& est = row["steady_state"][item.substr(0, 4)][item.substr(5)];
      CHECK(c["measured"].get<double>() * 1e3 == Approx(est["estimate_ms"].get<double>()).epsilon(1e-12));
      CHECK(c["low"].get<double>() * 1e3 == Approx(est["low_ms"].get<double>()).epsilon(1e-12));
      CHECK(c["high"].get<double>() * 1e3 == Approx(est["high_ms"].get<double>()).epsilon(1e-12));
    }
  }
  // The rejecting deployment: before, check and simulate said PASS (TTFT p95 65 ms on the answered
  // requests) where compare said it misses its SLOs. Now each says why it fails.
  const json& rejected = cj["assertions"][3]["checks"][0];
  CHECK(rejected["status"] == "FAIL");
  CHECK(has(rejected["message"].get<std::string>(),
            "148 of 425 measured requests were rejected (longer than max_model_len): the deployment does not serve this workload"));
  const auto sim = run_capsim("simulate " + rejecting_flags + " --card h100-sxm -q --json -");
  const json sj = json_of(sim);
  CHECK(sj["failed"] == 148);
  CHECK(sj["capsim"]["slos"][0]["decision"] == "FAIL");
  const auto text = run_capsim("simulate " + rejecting_flags + " --card h100-sxm -q");
  CHECK(has(text.out, "FAIL"));
  CHECK_FALSE(has(text.out, "PASS"));
}

TEST_CASE("check's plan_cheapest_max_usd_per_hour is plan's cheapest option", "[answers][check][plan][cli]") {
  capsim_test::Scratch tmp("check_vs_plan");
  const std::string file = tmp.write("assumptions.yaml",
      "assertions:\n"
      "  - name: cheapest\n    scenario: " + std::string(CAPSIM_DATA_DIR) + "/workloads/chat-8b-1x-h100.yaml\n"
      "    workload: {duration: 10min, warmup: 2min}\n"
      "    expect:\n      plan_cheapest_max_usd_per_hour: {max_usd_per_hour: 5, cards: [t4], tp: [2]}\n");
  const auto chk = run_capsim("check '" + file + "' -q --json -");
  REQUIRE(chk.status == 0);
  const json c = json_of(chk)["assertions"][0]["checks"][0];
  const json pj = json_of(run_capsim("plan " + kScenario + kPlanSpace + " -q --json -"));
  const json& option = pj["options"][0];
  CHECK(c["item"] == std::to_string(option["replicas"].get<int>()) + "x t4 tp2 fp16");
  CHECK(c["measured"].get<double>() == Approx(option["usd_per_hour"].get<double>()).epsilon(1e-12));
  CHECK(c["passed"] == true);
}

TEST_CASE("a run too short for an interval: simulate, compare, check and plan all decline to call it a PASS",
          "[answers][check][plan][cli]") {
  // 1 request/s for 2 minutes: 99 measured requests, fewer than the 200 a batch-means interval
  // needs, with a TTFT p95 of ~24 ms under a 1 s bound. Before, simulate, compare and plan called
  // it PASS while check called it INCONCLUSIVE.
  const std::string flags =
      "--model llama-3.1-8b --rate 1 --duration 2min --warmup 0s --input-tokens 256 --output-tokens 64 "
      "--slo 'ttft_p95<=1s'";
  const json sim = json_of(run_capsim("simulate " + flags + " --card h100-sxm -q --json -"));
  REQUIRE(sim["capsim"]["slos"].size() == 1);
  const json& slo = sim["capsim"]["slos"][0];
  CHECK(slo["decision"] == "INCONCLUSIVE");
  CHECK(slo["has_interval"] == false);
  CHECK(slo["value_ms"].get<double>() < 1000);
  const auto text = run_capsim("simulate " + flags + " --card h100-sxm -q");
  CHECK(has(text.out, "too short for a 95% interval: 99 measured requests, fewer than the 200 a PASS needs "
                      "(about 2.1x the measured window)"));
  CHECK_FALSE(has(text.out, "  PASS"));  // no verdict cell says PASS (the reason names "a PASS")

  const json row = compare_row(flags, "1x h100-sxm");
  CHECK(row["decision"] == "INCONCLUSIVE");
  CHECK(row["slos_met"] == false);
  const auto compare_text = run_capsim("compare " + flags + " -d '1x h100-sxm' -q");
  CHECK(has(compare_text.out, "verdict: no deployment meets every SLO verifiably: a run within its SLOs is too short"));

  capsim_test::Scratch tmp("short_run");
  const std::string file = tmp.write("assumptions.yaml",
      "assertions:\n"
      "  - name: short\n    model: llama-3.1-8b\n    deployment: {card: h100-sxm}\n"
      "    workload: {rate: 1, duration: 2min, warmup: 0s, prompt_tokens: 256, output_tokens: 64}\n"
      "    slo: {ttft_p95: 1s}\n"
      "    expect: {slo: true}\n");
  const auto chk = run_capsim("check '" + file + "' -q --json -");
  CHECK(chk.status == 3);  // inconclusive
  const json cj = json_of(chk);
  CHECK(check_verdict(cj["assertions"][0]) == "INCONCLUSIVE");

  // plan: the option is within the SLOs by the run's statistics, but not verified.
  const auto plan = run_capsim("plan " + flags + " --cards h100-sxm --tp 1 --kv-cache auto -q --json -");
  CHECK(plan.status == 1);
  const json pj = json_of(plan);
  CHECK(pj["options"].empty());
  REQUIRE(pj["rejected"].size() == 1);
  CHECK(pj["rejected"][0]["too_short"] == true);
  CHECK(has(pj["rejected"][0]["reason"].get<std::string>(), "but on 99 measured requests, fewer than the 200 a PASS needs (about 2.1x"));
  const auto plan_text = run_capsim("plan " + flags + " --cards h100-sxm --tp 1 --kv-cache auto -q");
  CHECK(has(plan_text.out, "no option verified: the runs are too short to support a PASS"));
  // check's plan_cheapest on the same space: INCONCLUSIVE, not FAIL.
  const std::string plan_file = tmp.write("plan.yaml",
      "assertions:\n"
      "  - name: short-plan\n    model: llama-3.1-8b\n"
      "    workload: {rate: 1, duration: 2min, warmup: 0s, prompt_tokens: 256, output_tokens: 64}\n"
      "    slo: {ttft_p95: 1s}\n"
      "    expect:\n      plan_cheapest_max_usd_per_hour: {max_usd_per_hour: 50, cards: [h100-sxm], tp: [1], kv_cache: [auto]}\n");
  const auto plan_chk = run_capsim("check '" + plan_file + "' -q --json -");
  CHECK(plan_chk.status == 3);
  const json pc = json_of(plan_chk)["assertions"][0]["checks"][0];
  CHECK(pc["status"] == "INCONCLUSIVE");
  CHECK(has(pc["message"].get<std::string>(), "no option verified: the runs are too short"));
}
