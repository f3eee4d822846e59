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

namespace {

// compare's row and simulate's run of the same deployment: the same numbers and SLO verdict.
void check_same_run(const nlohmann::json& sim, const nlohmann::json& row) {
  for (const char* k : {"median_ttft_ms", "p95_ttft_ms", "p95_tpot_ms", "p95_e2el_ms", "output_throughput"}) {
    INFO(k);
    CHECK(row[k].get<double>() == Approx(sim[k].get<double>()).epsilon(1e-12));
  }
  bool all_met = true;
  for (const auto& s : sim["capsim"]["slos"]) all_met = all_met && s["met"].get<bool>();
  CHECK(row["slos_met"].get<bool>() == all_met);
}

}  // namespace

TEST_CASE("compare runs the scenario's KV-cache precision, as simulate does", "[answers][cli]") {
  // The 500-user chatbot with an fp8 KV cache. Before, compare ran every deployment with a
  // 16-bit KV cache: TTFT p95 1.56 s (INCONCLUSIVE) where simulate gives 205 ms (PASS).
  capsim_test::Scratch tmp("kvfp8");
  std::string yaml = capsim_test::read_all(std::string(CAPSIM_DATA_DIR) + "/workloads/chatbot-500-users.yaml");
  const auto at = yaml.find("kv_cache: bf16");
  REQUIRE(at != std::string::npos);
  yaml.replace(at, 14, "kv_cache: fp8");
  const std::string file = tmp.write("chatbot-fp8-kv.yaml", yaml);

  const auto sim = json_of(run_capsim("simulate '" + file + "' -q --json -"));
  CHECK(sim["p95_ttft_ms"].get<double>() < 1000);
  const auto cmp = run_capsim("compare '" + file + "' -d '1x h100-sxm' -q --json -");
  CHECK(cmp.status == 0);
  const auto row = json_of(cmp)["deployments"][0];
  CHECK(row["deployment"] == "1x h100-sxm kv:fp8");  // the name says what ran
  check_same_run(sim, row);

  // The same through compare's own flag and a deployment's kv: word, on the bf16 scenario.
  const std::string bf16 = "workloads/chatbot-500-users.yaml";
  const auto by_flag = json_of(run_capsim("compare " + bf16 + " --kv-cache fp8 -d '1x h100-sxm' -q --json -"));
  check_same_run(sim, by_flag["deployments"][0]);
  const auto by_word = json_of(run_capsim("compare " + bf16 + " -d '1x h100-sxm kv:fp8' -d '1x h100-sxm' -q --json -"));
  REQUIRE(by_word["deployments"].size() == 2);
  check_same_run(sim, by_word["deployments"][0]);
  // The unnamed one keeps the scenario's bf16 KV cache: simulate's numbers for the file as it is.
  check_same_run(json_of(run_capsim("simulate " + bf16 + " -q --json -")), by_word["deployments"][1]);
  CHECK(by_word["deployments"][1]["deployment"] == "1x h100-sxm");

  // A KV precision that is no KV precision, and kv: on a disaggregated pool, are bad input.
  const auto bad = run_capsim("compare " + bf16 + " -d '1x h100-sxm kv:int4' -q");
  CHECK(bad.status == 2);
  CHECK(has(bad.err, "kv:int4: not a KV-cache precision"));
  const auto pool = run_capsim("simulate " + bf16 + " --prefill-pool '1x h100-sxm kv:fp8' --decode-pool '1x h100-sxm' "
                               "--kv-link nvlink-h100 -q");
  CHECK(pool.status == 2);
  CHECK(has(pool.err, "give --kv-cache instead of kv:"));
}

TEST_CASE("check prints, bounds and decides an SLO on the estimate simulate decides on", "[answers][check][cli]") {
  // The 500-user chatbot on one bf16 H100: TTFT p95 over the whole measured window is 1.56 s, its
  // steady-state estimate 998 ms with a 95% interval of 746 ms - 1.25 s. Before, check printed
  // "1.56 s (95%: 745.88 ms - 1.25 s)", a margin of -56.3% from 1.56 s, and a verdict resting on
  // 998 ms; the JSON and JUnit carried the same.
  const std::string file = "workloads/chatbot-500-users.yaml";
  for (const std::string seeds : {"1", "3"}) {
    INFO("replications " << seeds);
    capsim_test::Scratch tmp("check_estimate");
    const std::string junit = tmp.file("check.xml");
    const auto chk = run_capsim("check " + file + " -q --replications " + seeds + " --json - --junit '" + junit + "'");
    CHECK(chk.status == 3);  // TTFT p95 inconclusive, TPOT p95 passes
    const auto cj = json_of(chk);
    const auto sim = json_of(run_capsim("simulate " + file + " -q --replications " + seeds + " --json -"));
    const auto& rows = cj["assertions"][0]["checks"];
    REQUIRE(rows.size() == 2);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& row = rows[i];
      // simulate's decision of the same SLO: one run's steady-state interval, or over the seeds.
      const auto& s = seeds == "1" ? sim["capsim"]["slos"][i] : sim["capsim"]["over_seeds"]["statistics"][i];
      const double estimate_ms = seeds == "1" ? s["estimate_ms"].get<double>() : s["mean_ms"].get<double>();
      INFO(row["item"].get<std::string>());
      CHECK(row["measured"].get<double>() * 1e3 == Approx(estimate_ms).epsilon(1e-12));
      CHECK(row["low"].get<double>() * 1e3 == Approx(s["low_ms"].get<double>()).epsilon(1e-12));
      CHECK(row["high"].get<double>() * 1e3 == Approx(s["high_ms"].get<double>()).epsilon(1e-12));
      CHECK(row["status"] == s["decision"]);
      CHECK(row["low"].get<double>() <= row["measured"].get<double>());
      CHECK(row["measured"].get<double>() <= row["high"].get<double>());
      const double limit = row["limit"].get<double>();
      CHECK(row["margin"].get<double>() == Approx((limit - row["measured"].get<double>()) / limit));
    }
    // The first run's TTFT p95 estimate, in the table and in JUnit, with the interval around it.
    if (seeds == "1") {
      CHECK(rows[0]["measured_text"] == "998.43 ms (95%: 745.88 ms - 1.25 s)");
      const std::string xml = capsim_test::read_all(junit);
      CHECK(has(xml, "measured 998.43 ms (95%: 745.88 ms - 1.25 s), limit &lt;= 1.00 s, margin +0.2%"));
      CHECK_FALSE(has(xml, "1.56 s"));
    }
  }
}

TEST_CASE("simulate's HTML report gives the SLO verdicts its text and JSON give", "[answers][report][cli]") {
  // The 500-user chatbot on one bf16 H100: TTFT p95 is INCONCLUSIVE (998 ms, interval 746 ms -
  // 1.25 s, bound 1 s). Before, the page's SLO table called it "MISSED" from the window's 1.56 s.
  capsim_test::Scratch tmp("report_verdict");
  const std::string page = tmp.file("r.html"), json = tmp.file("r.json");
  const auto r = run_capsim("simulate workloads/chatbot-500-users.yaml -q --report '" + page + "' --json '" + json + "'");
  REQUIRE(r.status == 0);
  const std::string html = capsim_test::read_all(page);
  const auto j = nlohmann::json::parse(capsim_test::read_all(json));
  CHECK_FALSE(has(html, "MISSED"));
  for (const auto& s : j["capsim"]["slos"]) {
    const std::string slo = s["slo"], decision = s["decision"];
    INFO(slo);
    const auto row = html.find("<td>" + slo + "</td>");
    REQUIRE(row != std::string::npos);
    const std::string cells = html.substr(row, html.find("</tr>", row) - row);
    CHECK(has(cells, "<td>" + decision + "</td>"));
    // The text report in the page and on stdout carry the same verdict.
    CHECK(has(r.out, slo));
  }
  CHECK(j["capsim"]["slos"][0]["decision"] == "INCONCLUSIVE");
  CHECK(has(html, "<td>ttft_p95</td><td class=\"num\">1.00 s</td><td class=\"num\">1.56 s</td>"
                  "<td class=\"num\">998.43 ms (745.88 ms - 1.25 s)</td><td>INCONCLUSIVE</td>"));
  CHECK(has(r.out, "INCONCLUSIVE: ttft_p95 is 998.43 ms"));
}
